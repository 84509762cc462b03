package sim

import (
	"maps"
	"testing"

	"github.com/sagellm/kvevict"
)

// accessCounts maps the unreferenced candidates' IDs to their AccessCount.
func accessCounts(cands []kvevict.Candidate) map[uint64]int {
	m := map[uint64]int{}
	for _, c := range cands {
		if c.RefCount == 0 {
			m[c.ID] = c.AccessCount
		}
	}
	return m
}

// reuseWorkload: sequence 0 caches prompt blocks 1 2 3 (3 is partial);
// sequence 1 comes back with 1 2 and a different rest, as a conversation's
// next turn whose last block filled up, and finishes; sequence 2 needs 3
// blocks of a pool of 6 that has 1 free, so it evicts. By then owner 0
// holds block 3 and was hit once (sequence 1 found its blocks 1 and 2
// cached); owner 1 holds 1 2 5 6 and was never hit, though its own
// request found two blocks cached.
func reuseWorkload() *Workload {
	return &Workload{Name: "reuse", BlockTokens: 2, GroupKind: "tenant", Requests: []Request{
		{Timestamp: 0, InputTokens: 5, OutputTokens: 1, HashIDs: []uint64{1, 2, 3}, Group: 1},
		{Timestamp: 100, InputTokens: 7, OutputTokens: 1, HashIDs: []uint64{1, 2, 5, 6}, Group: 1},
		{Timestamp: 200, InputTokens: 5, OutputTokens: 1, HashIDs: []uint64{7, 8, 9}, Group: 2},
	}}
}

// TestServeAccessCount: at sequence and tail granularity a candidate's
// AccessCount is the requests that found its blocks cached (the contract's
// hits on it), not the hits of the request that made it; on the Policy's
// path (the candidates handed to SelectVictims) and on the Index's (the
// candidates the index holds when the eviction comes).
func TestServeAccessCount(t *testing.T) {
	want := map[uint64]int{0: 1, 1: 0}
	for _, g := range []Granularity{GranularitySequence, GranularityTail} {
		p, err := kvevict.New(kvevict.LFU)
		if err != nil {
			t.Fatal(err)
		}
		rec := &recordingPolicy{Policy: p}
		ev := NewSequenceEvictor(rec)
		if g == GranularityTail {
			ev = NewTailEvictor(rec)
		}
		if _, err := Serve(reuseWorkload(), kvevict.LFU, ServeConfig{Config: Config{Capacity: 6}, Granularity: g, Evictor: ev}); err != nil {
			t.Fatal(err)
		}
		if got := accessCounts(rec.last); !maps.Equal(got, want) {
			t.Errorf("%s, Policy: AccessCount by candidate = %v, want %v", g, got, want)
		}

		var indexed map[uint64]int
		cfg := ServeConfig{Config: Config{Capacity: 6}, Granularity: g, afterStep: func(p *pool) {
			x := p.ev.(*SequenceEvictor).cands.(*indexCandidates).x
			if len(p.running) == 0 && p.cached == 5 { // sequence 1 finished: the eviction is next
				indexed = map[uint64]int{}
				for id := range p.owners {
					c, _ := x.Get(id)
					indexed[id] = c.AccessCount
				}
			}
		}}
		if _, err := Serve(reuseWorkload(), kvevict.LFU, cfg); err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(indexed, want) {
			t.Errorf("%s, Index: AccessCount by candidate = %v, want %v", g, indexed, want)
		}
	}
}

// TestReplayAccessCount: in a plain replay a candidate is a block, and its
// AccessCount is the requests that found it resident, as in serve mode at
// block granularity. On reuseWorkload's third request, blocks 1 and 2
// were found by the second; 3, 5 and 6 never were.
func TestReplayAccessCount(t *testing.T) {
	p, err := kvevict.New(kvevict.LFU)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingPolicy{Policy: p}
	replayAll(t, reuseWorkload(), rec, 6)
	want := map[uint64]int{1: 1, 2: 1, 3: 0, 5: 0, 6: 0}
	if got := accessCounts(rec.last); !maps.Equal(got, want) {
		t.Errorf("AccessCount by block = %v, want %v", got, want)
	}
}
