package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sagellm/kvevict"
)

// TestContinued checks the contract of final on a hand-made workload.
func TestContinued(t *testing.T) {
	w := &Workload{Name: "hand", BlockTokens: 16, Requests: []Request{
		{HashIDs: []uint64{1, 2, 3}},    // continued by the next: it begins with 1, 2
		{HashIDs: []uint64{1, 2, 4, 5}}, // continued by the last: it begins with 1, 2, 4
		{HashIDs: []uint64{7}},          // continued by the next, which begins with its one hash
		{HashIDs: []uint64{7, 8}},       // nothing later begins with 7
		{HashIDs: []uint64{1, 2, 4}},    // nothing after it
		{HashIDs: []uint64{9, 9}},       // its own prefix twice: still nothing later
	}}
	got := Continued(w)
	want := []bool{true, true, true, false, false, false}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Continued = %v, want %v", got, want)
	}
}

// TestHindsightPrecisionRecall: the flipped labels have the precision and
// recall asked, to the rounding of a count.
func TestHindsightPrecisionRecall(t *testing.T) {
	continued := make([]bool, 10_000)
	for i := range continued {
		continued[i] = i%5 < 2 // 60% final
	}
	if _, err := hindsight(continued, 0.5, 0.9, 7); err == nil {
		t.Error("precision 0.5 at recall 0.9 needs 5,400 false finals of 4,000 continued: accepted")
	}
	for _, pr := range [][2]float64{{1, 1}, {0.8, 0.8}, {0.6, 0.9}, {0.9, 0.5}} {
		final, err := hindsight(continued, pr[0], pr[1], 7)
		if err != nil {
			t.Fatal(err)
		}
		tp, fp, fn := 0, 0, 0
		for i, f := range final {
			switch {
			case f && !continued[i]:
				tp++
			case f:
				fp++
			case !continued[i]:
				fn++
			}
		}
		precision, recall := float64(tp)/float64(tp+fp), float64(tp)/float64(tp+fn)
		if math.Abs(precision-pr[0]) > 1e-3 || math.Abs(recall-pr[1]) > 1e-3 {
			t.Errorf("asked precision %v recall %v, got %.4f %.4f", pr[0], pr[1], precision, recall)
		}
	}
}

func TestParseHintSources(t *testing.T) {
	got, err := ParseHintSources("none,trace,hindsight,hindsight:recall=0.8:precision=0.8,ttl=5m,ttl=90s:hard")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.String())
	}
	want := "none trace hindsight hindsight:precision=0.8:recall=0.8:seed=1 ttl=5m0s ttl=1m30s:hard"
	if strings.Join(names, " ") != want {
		t.Errorf("normalised %q, want %q", strings.Join(names, " "), want)
	}
	for _, bad := range []string{
		"", "lru", "none:x", "trace:seed=1", "hindsight:precision=2", "hindsight:recall=0",
		"hindsight:precision=-1", "hindsight:seed=-1", "hindsight:depth=3", "hindsight:precision",
		"ttl=0s", "ttl=-1s", "ttl=1.5ms", "ttl=721h", "ttl=5m:soft", "none,none", "hindsight,hindsight:seed=1",
		"none, trace",
	} {
		if _, err := ParseHintSources(bad); err == nil {
			t.Errorf("ParseHintSources(%q) accepted it", bad)
		}
	}
}

// TestTraceHints: the optional hint fields reach Request.Hints, and a
// malformed one is refused with its line named.
func TestTraceHints(t *testing.T) {
	in := `{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1], "final": true, "ttl_ms": 300000}
{"timestamp": 1, "input_length": 10, "output_length": 1, "hash_ids": [2], "retention_priority": 90, "retention_ms": 60000}
`
	reqs, err := ReadTrace(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if h := reqs[0].Hints; h != (RequestHints{Final: true, TTLMs: 300_000}) {
		t.Errorf("line 1's hints %+v", h)
	}
	if h := reqs[1].Hints; h != (RequestHints{Retention: 90, RetentionMs: 60_000}) {
		t.Errorf("line 2's hints %+v", h)
	}
	const ok = `{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}` + "\n"
	for _, c := range []struct{ field, want string }{
		{`"ttl_ms": -1`, `"ttl_ms" must be 0 to`},
		{`"ttl_ms": 2592000001`, `"ttl_ms" must be 0 to`},
		{`"retention_priority": 5`, `go together`},
		{`"retention_ms": 5`, `go together`},
		{`"retention_priority": 101, "retention_ms": 5`, `"retention_priority" must be 0 to 100`},
		{`"retention_priority": -1, "retention_ms": 5`, `"retention_priority" must be 0 to 100`},
		{`"retention_priority": 1, "retention_ms": -5`, `"retention_ms" must be 0 to`},
		{`"final": "yes"`, `"final" must be true or false`},
	} {
		line := `{"timestamp": 1, "input_length": 10, "output_length": 1, "hash_ids": [1], ` + c.field + "}\n"
		_, err := ReadTrace(strings.NewReader(ok + line))
		if err == nil || !strings.Contains(err.Error(), "trace line 2") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want line 2 and %q", c.field, err, c.want)
		}
	}
}

// TestServeHonoursHints: a pool of two blocks holds sequences A (request
// 0) and B (request 1), one block each; request 2 needs a block, and
// request 3 asks for A's again. LRU alone evicts A, the older, so request 3
// misses; told that B is final, or that A is leased, the pool evicts B and
// request 3 hits: 1 hit of 4 block references. Hindsight finds B final
// itself (request 3 continues A; nothing continues B).
func TestServeHonoursHints(t *testing.T) {
	req := func(ms int64, hash uint64, h RequestHints) Request {
		return Request{Timestamp: ms, InputTokens: 16, HashIDs: []uint64{hash}, Group: hash, Hints: h}
	}
	base := []Request{req(0, 1, RequestHints{}), req(1, 2, RequestHints{}), req(2, 3, RequestHints{}), req(3, 1, RequestHints{})}
	final, leased := append([]Request(nil), base...), append([]Request(nil), base...)
	final[1].Hints = RequestHints{Final: true}
	leased[0].Hints = RequestHints{TTLMs: 10}
	spent := append([]Request(nil), base...)
	spent[0].Hints = RequestHints{TTLMs: 1} // ends before request 2 needs the block
	for _, c := range []struct {
		name             string
		reqs             []Request
		src              HintSource
		want             float64
		released, leased int64 // blocks evicted of a final request, and under a live lease
		honoured, wasted int64 // leases
	}{
		{"none", final, HintSource{Kind: "none"}, 0, 0, 0, 0, 0},
		{"final", final, HintSource{Kind: "trace"}, 0.25, 1, 0, 0, 0},
		// A's lease is honoured by request 3, under it.
		{"lease", leased, HintSource{Kind: "trace"}, 0.25, 0, 0, 1, 0},
		// A's lease ended before its eviction, unread: honoured, wasted.
		{"spent lease", spent, HintSource{Kind: "trace"}, 0, 0, 0, 1, 1},
		{"hindsight", base, HintSource{Kind: "hindsight", Precision: 1, Recall: 1, Seed: 1}, 0.25, 1, 0, 0, 0},
		// Every request leased: A's lease ends first, so A goes, then
		// for request 3 B's (ending at 11 ms, before request 2's at 12):
		// two leases broken, and the other two live when the run ends.
		{"ttl", base, HintSource{Kind: "ttl", TTL: 10 * time.Millisecond}, 0, 0, 2, 0, 0},
	} {
		w, err := c.src.Apply(&Workload{Name: c.name, BlockTokens: 16, GroupKind: "tenant", Requests: c.reqs})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range []Granularity{GranularitySequence, GranularityTail} {
			for _, s := range []kvevict.Strategy{kvevict.LRU, kvevict.ARC, kvevict.Auto} {
				rep, err := Serve(w, s, ServeConfig{Config: Config{Capacity: 2}, Granularity: g})
				if err != nil {
					t.Fatal(err)
				}
				if rep.HitRatio != c.want || rep.ReleasedEvicted != c.released || rep.LeasedEvicted != c.leased ||
					rep.LeasesHonoured != c.honoured || rep.LeasesWasted != c.wasted {
					t.Errorf("%s, %s, %s: hit ratio %v, released and leased blocks evicted %d, %d, leases honoured and wasted %d, %d; want %v, %d, %d, %d, %d",
						c.name, g, s, rep.HitRatio, rep.ReleasedEvicted, rep.LeasedEvicted, rep.LeasesHonoured, rep.LeasesWasted,
						c.want, c.released, c.leased, c.honoured, c.wasted)
				}
			}
		}
	}
}

// TestServeWaitsForHardLease: in a pool of three blocks, request 0's two
// blocks are held by a hard lease of 100 ms and request 1's one is not;
// request 2, at 2 ms, needs two blocks, and only one may be evicted until
// the lease ends. The pool waits for it, then serves request 2: every block
// referenced, two evicted, none under a live lease.
func TestServeWaitsForHardLease(t *testing.T) {
	w := &Workload{Name: "hard", BlockTokens: 16, GroupKind: "tenant", Requests: []Request{
		{Timestamp: 0, InputTokens: 32, HashIDs: []uint64{1, 2}, Hints: RequestHints{TTLMs: 100, Hard: true}},
		{Timestamp: 1, InputTokens: 16, HashIDs: []uint64{4}, Group: 1},
		{Timestamp: 2, InputTokens: 32, HashIDs: []uint64{5, 6}, Group: 2},
	}}
	for _, g := range Granularities() {
		rep, err := Serve(w, kvevict.LRU, ServeConfig{Config: Config{Capacity: 3}, Granularity: g})
		if err != nil {
			t.Fatalf("%s: %v", g, err)
		}
		if rep.BlockRefs != 5 || rep.Rejected != 0 || rep.EvictedBlocks != 2 || rep.LeasedEvicted != 0 {
			t.Errorf("%s: %d blocks referenced, %d rejected, %d evicted, %d under a lease; want 5, 0, 2, 0",
				g, rep.BlockRefs, rep.Rejected, rep.EvictedBlocks, rep.LeasedEvicted)
		}
	}
}

// abca is the workload of TestClusterHonoursHints and
// TestReplayHonoursHints: A, B, C, then A again, one block each, 1 ms
// apart, request i with hints h.
func abca(i int, h RequestHints) []Request {
	req := func(ms int64, hash uint64) Request {
		return Request{Timestamp: ms, InputTokens: 16, HashIDs: []uint64{hash}, Group: hash}
	}
	rs := []Request{req(0, 1), req(1, 2), req(2, 3), req(3, 1)}
	rs[i].Hints = h
	return rs
}

// TestClusterHonoursHints is TestServeHonoursHints on one engine of a
// cluster, whose tree takes the hints: LRU alone evicts A for request 2,
// so request 3 misses; told that B is final, or that A is leased, the
// engine evicts B and request 3 hits. A lease that ended before request 2
// changes nothing. The same with a speedup of 4, which brings request 2
// to 0.5 ms, inside a lease of 1 ms from A's arrival at 0.
func TestClusterHonoursHints(t *testing.T) {
	base := abca(0, RequestHints{})
	for _, c := range []struct {
		name    string
		reqs    []Request
		speedup float64
		want    float64
	}{
		{"none", base, 1, 0},
		{"final", abca(1, RequestHints{Final: true}), 1, 0.25},
		{"lease", abca(0, RequestHints{TTLMs: 10}), 1, 0.25},
		{"spent lease", abca(0, RequestHints{TTLMs: 1}), 1, 0},
		{"lease, faster", abca(0, RequestHints{TTLMs: 1}), 4, 0.25},
	} {
		w := &Workload{Name: c.name, BlockTokens: 16, GroupKind: "tenant", Requests: c.reqs}
		for _, s := range []kvevict.Strategy{kvevict.LRU, kvevict.Auto} {
			rep, err := Cluster(w, s, NewRoundRobin(), ClusterConfig{Config: Config{Capacity: 2}, Engines: 1, Speedup: c.speedup})
			if err != nil {
				t.Fatal(err)
			}
			if rep.HitRatio != c.want {
				t.Errorf("%s, %s: hit ratio %v, want %v", c.name, s, rep.HitRatio, c.want)
			}
		}
	}
}

// TestReplayHonoursHints is TestServeHonoursHints in a replay, whose
// blocks take the hints: LRU alone evicts A's block for request 2, so
// request 3 misses; told that B is final, or that A is leased, the replay
// evicts B's and request 3 hits. A lease that ends at request 2's time
// changes nothing. With A and B both leased, request 2 breaks the lease
// that ends first, A's, and request 3 takes C's block, unleased. Key
// strategies go through an Index, Auto through a Policy: the same hits,
// and the same blocks evicted released or under a live lease.
func TestReplayHonoursHints(t *testing.T) {
	base := abca(0, RequestHints{})
	both := abca(0, RequestHints{TTLMs: 10})
	both[1].Hints = RequestHints{TTLMs: 10}
	for _, c := range []struct {
		name             string
		reqs             []Request
		want             float64
		released, leased int64
	}{
		{"none", base, 0, 0, 0},
		{"final", abca(1, RequestHints{Final: true}), 0.25, 1, 0},
		{"lease", abca(0, RequestHints{TTLMs: 10}), 0.25, 0, 0},
		{"spent lease", abca(0, RequestHints{TTLMs: 2}), 0, 0, 0},
		{"broken lease", both, 0, 0, 1},
		{"low priority", abca(1, RequestHints{Retention: 10, RetentionMs: 10}), 0.25, 0, 0},
	} {
		w := &Workload{Name: c.name, BlockTokens: 16, GroupKind: "tenant", Requests: c.reqs}
		for _, s := range []kvevict.Strategy{kvevict.LRU, kvevict.ARC, kvevict.Auto} {
			rep, err := Replay(w, s, Config{Capacity: 2})
			if err != nil {
				t.Fatal(err)
			}
			if rep.HitRatio != c.want || rep.ReleasedEvicted != c.released || rep.LeasedEvicted != c.leased {
				t.Errorf("%s, %s: hit ratio %v, released and leased blocks evicted %d, %d; want %v, %d, %d",
					c.name, s, rep.HitRatio, rep.ReleasedEvicted, rep.LeasedEvicted, c.want, c.released, c.leased)
			}
		}
	}
}
