package sim

import (
	"slices"
	"testing"

	"github.com/sagellm/kvevict"
)

// TestAgenticShape checks the agentic workload against what it promises:
// the same seed gives the same requests; every session's prompt extends the
// previous turn's full blocks; turns come at least a second apart (a tool
// runs in between); a session's last turn is within one turn's growth
// (at most 16,400 tokens) of its aim of 35K-90K tokens; about AgenticSessions sessions run at once; and
// one-shot requests come in bursts.
func TestAgenticShape(t *testing.T) {
	const n = 2000
	w, err := Synthetic("agentic", 3, n)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Synthetic("agentic", 3, n)
	other, _ := Synthetic("agentic", 4, n)
	if len(w.Requests) != n || !slices.EqualFunc(w.Requests, again.Requests, sameRequest) {
		t.Fatalf("%d requests, or a second run with the same seed differs", len(w.Requests))
	}
	if slices.EqualFunc(w.Requests, other.Requests, sameRequest) {
		t.Error("seeds 3 and 4 give the same workload")
	}
	if w.BlockTokens != AgenticBlockTokens || w.GroupKind != "session" {
		t.Errorf("blocks of %d tokens, groups are %ss", w.BlockTokens, w.GroupKind)
	}
	type span struct {
		first, last int64
		turns       int
		prev        *Request
	}
	groups := map[uint64]*span{}
	for i := range w.Requests {
		r := &w.Requests[i]
		if want := (r.InputTokens + AgenticBlockTokens - 1) / AgenticBlockTokens; len(r.HashIDs) != want {
			t.Fatalf("request %d: %d tokens in %d blocks", i, r.InputTokens, len(r.HashIDs))
		}
		g := groups[r.Group]
		if g == nil {
			groups[r.Group] = &span{first: r.Timestamp, last: r.Timestamp, turns: 1, prev: r}
			continue
		}
		full := g.prev.InputTokens / AgenticBlockTokens
		if r.Timestamp-g.last < 1000 || r.InputTokens <= g.prev.InputTokens ||
			!slices.Equal(r.HashIDs[:full], g.prev.HashIDs[:full]) {
			t.Fatalf("request %d of session %d: %d ms after the last turn, %d tokens after %d, or not its extension",
				i, r.Group, r.Timestamp-g.last, r.InputTokens, g.prev.InputTokens)
		}
		g.last, g.prev = r.Timestamp, r
		g.turns++
	}
	oneShots, ended := 0, 0
	end := w.Requests[n-1].Timestamp
	for _, g := range groups {
		if g.turns == 1 {
			oneShots++
			continue
		}
		if g.last < end-10*60_000 { // ended: its last turn was the final answer
			ended++
			if g.prev.InputTokens <= 35_000-16_400 || g.prev.InputTokens > 90_000 {
				t.Errorf("a session ended at %d tokens", g.prev.InputTokens)
			}
		}
	}
	if oneShots < n/10 || ended == 0 {
		t.Errorf("%d one-shot requests, %d sessions ended", oneShots, ended)
	}
	// Sessions live at the middle of the run: started before, last seen after.
	mid, live := end/2, 0
	for _, g := range groups {
		if g.turns > 1 && g.first <= mid && g.last >= mid {
			live++
		}
	}
	if live < AgenticSessions*8/10 || live > AgenticSessions {
		t.Errorf("%d sessions live halfway, want about %d", live, AgenticSessions)
	}
}

// TestAgenticHints checks the hints agentic promises (Synthetic's doc)
// against the timestamps: a turn whose session's next turn came 1-15 s
// after its decode (20 ms a token) called the tool that answers in
// seconds, so it is leased for that decode plus 8,000 ms, the middle of
// the tool's range; one whose next turn came later called a tool that
// takes minutes and carries no lease; a session's last turn is final, as
// is every request of a group of its own that is not a session's (the
// one-shot requests: a session's first turn is never final, as a session
// grows to 35K tokens).
func TestAgenticHints(t *testing.T) {
	const n = 3000
	w, err := Synthetic("agentic", 1, n)
	if err != nil {
		t.Fatal(err)
	}
	next := map[uint64]*Request{} // each group's latest request
	leased, bare, final := 0, 0, 0
	for i := range w.Requests {
		r := &w.Requests[i]
		if r.Hints.Final {
			final++
		}
		prev := next[r.Group]
		next[r.Group] = r
		if prev == nil {
			continue
		}
		if prev.Hints.Final {
			t.Fatalf("request %d continues session %d after its final turn", i, r.Group)
		}
		decode := int64(prev.OutputTokens) * 20
		switch wait := r.Timestamp - prev.Timestamp - decode; {
		case wait >= 1000 && wait < 15_000:
			leased++
			if want := (RequestHints{TTLMs: decode + 8000}); prev.Hints != want {
				t.Fatalf("session %d: a turn waited %d ms for its tool, hints %+v, want %+v", r.Group, wait, prev.Hints, want)
			}
		case wait >= 15_000:
			bare++
			if prev.Hints != (RequestHints{}) {
				t.Fatalf("session %d: a turn waited %d ms for its tool, hints %+v, want none", r.Group, wait, prev.Hints)
			}
		default:
			t.Fatalf("session %d: a turn %d ms after its predecessor's decode", r.Group, wait)
		}
	}
	// A group not heard from in the last ten minutes has ended (a tool
	// runs at most five): a session with its final answer, a one-shot
	// request with itself.
	end := w.Requests[n-1].Timestamp
	for g, r := range next {
		if r.Timestamp < end-10*60_000 && !r.Hints.Final {
			t.Fatalf("group %d ended without a final request: %+v", g, r.Hints)
		}
	}
	// Six tool calls in ten answer in seconds.
	if share := float64(leased) / float64(leased+bare); share < 0.55 || share > 0.65 {
		t.Errorf("%d turns leased, %d not: %.2f leased, want about 0.6", leased, bare, share)
	}
	if final < n/10 {
		t.Errorf("%d final requests of %d", final, n)
	}
}

func sameRequest(a, b Request) bool {
	return a.Timestamp == b.Timestamp && a.InputTokens == b.InputTokens && a.OutputTokens == b.OutputTokens &&
		a.Group == b.Group && a.Priority == b.Priority && slices.Equal(a.HashIDs, b.HashIDs)
}

// TestReturningRePrefill checks the returning requests' re-prefill tokens
// on a hand-computed script: two sessions of three 10-token blocks in a
// pool of five, each returning once after the other pushed it out.
// Sequence granularity loses a whole session (30 tokens each time); block
// granularity loses the LRU session's deepest blocks only (block 3 when B
// arrives: 10 tokens; blocks 5 and 6 when A returns: 20).
func TestReturningRePrefill(t *testing.T) {
	script := func(kind string) *Workload {
		return &Workload{Name: "script", BlockTokens: 10, GroupKind: kind, Requests: []Request{
			{Timestamp: 0, InputTokens: 25, OutputTokens: 1, HashIDs: []uint64{1, 2, 3}, Group: 0},
			{Timestamp: 1000, InputTokens: 25, OutputTokens: 1, HashIDs: []uint64{4, 5, 6}, Group: 1},
			{Timestamp: 2000, InputTokens: 35, OutputTokens: 1, HashIDs: []uint64{1, 2, 3, 7}, Group: 0},
			{Timestamp: 3000, InputTokens: 35, OutputTokens: 1, HashIDs: []uint64{4, 5, 6, 8}, Group: 1},
		}}
	}
	for _, tc := range []struct {
		g             Granularity
		kind          string
		n             int
		p50, p99, all int64
	}{
		{GranularitySequence, "session", 2, 30, 30, 60},
		{GranularityBlock, "session", 2, 10, 20, 30},
		{GranularityBlock, "tenant", 0, 0, 0, 30}, // no sessions, no returning requests
	} {
		rep, err := Serve(script(tc.kind), kvevict.LRU, ServeConfig{Config: Config{Capacity: 5}, Granularity: tc.g})
		if err != nil {
			t.Fatal(err)
		}
		if rep.ReturningRequests != tc.n || rep.RePrefillTokensP50 != tc.p50 || rep.RePrefillTokensP99 != tc.p99 ||
			rep.RePrefillTokens != tc.all {
			t.Errorf("%s/%s: %d returning, p50 %d, p99 %d, re-prefill %d; want %d, %d, %d, %d", tc.g, tc.kind,
				rep.ReturningRequests, rep.RePrefillTokensP50, rep.RePrefillTokensP99, rep.RePrefillTokens,
				tc.n, tc.p50, tc.p99, tc.all)
		}
	}
}
