package sim

import (
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/tier"

	"github.com/sagellm/kvevict/internal/tracetest"
)

const excerpt = "testdata/mooncake_conversation_excerpt.jsonl"

// goldenTolerance is how far a replayed hit ratio may drift from a golden
// number: the issue's ±0.002.
const goldenTolerance = 0.002

// loadConversation loads the full conversation trace, beside the
// repository (tracetest.Conversation skips or fails when it is absent).
func loadConversation(t *testing.T) *Workload {
	t.Helper()
	w, err := LoadTrace(tracetest.Conversation(t))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// reduced reports whether long tests run a reduced version or none: in
// -short mode and under the race detector, which finds nothing in a
// single-threaded replay (.ci/run runs the long ones without it).
func reduced() bool { return testing.Short() || raceEnabled }

// skipUnderRace skips a long test under the race detector: sim starts no
// goroutine, so the detector has nothing to find in its tests, and .ci/run
// runs them in full without it.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("single-threaded; the run without -race checks it in full")
	}
}

func checkRatio(t *testing.T, name string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > goldenTolerance {
		t.Errorf("%s = %.4f, want %.3f ± %.3f", name, got, want, goldenTolerance)
	}
}

// TestReplayGoldenExcerpt replays the committed excerpt (the trace's first
// 600 requests). The golden numbers come from a run of this replay; the
// unbounded ceiling, 2783 hits of 16495 references, also follows by hand
// from the prefix rule.
func TestReplayGoldenExcerpt(t *testing.T) {
	w, err := LoadTrace(excerpt)
	if err != nil {
		t.Fatal(err)
	}
	if got := computeCeiling(w).hits; got != 2783 {
		t.Errorf("unbounded hits = %d, want 2783", got)
	}
	for _, tc := range []struct {
		capacity    int
		lru, belady float64
	}{
		{400, 0.0363, 0.0797},
		{1600, 0.0416, 0.1687},
	} {
		lru, err := Replay(w, kvevict.LRU, Config{Capacity: tc.capacity})
		if err != nil {
			t.Fatal(err)
		}
		opt, err := Belady(w, Config{Capacity: tc.capacity})
		if err != nil {
			t.Fatal(err)
		}
		checkRatio(t, "LRU hit ratio", lru.HitRatio, tc.lru)
		checkRatio(t, "Belady hit ratio", opt.HitRatio, tc.belady)
		if lru.BlockRefs != 16495 || opt.BlockRefs != 16495 {
			t.Errorf("block references = %d (LRU), %d (Belady), want 16495", lru.BlockRefs, opt.BlockRefs)
		}
	}
}

// TestReplayGoldenConversation is the check on the whole trace:
// at 10,000 blocks LRU hits 0.212 of block references and Belady 0.366,
// which is the unbounded ceiling. About 3 s.
func TestReplayGoldenConversation(t *testing.T) {
	if reduced() {
		t.Skip("full-trace replay in -short mode or under the race detector")
	}
	w := loadConversation(t)
	lru, err := Replay(w, kvevict.LRU, Config{Capacity: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	opt, err := Belady(w, Config{Capacity: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	checkRatio(t, "LRU hit ratio", lru.HitRatio, 0.212)
	checkRatio(t, "Belady hit ratio", opt.HitRatio, 0.366)
	c := computeCeiling(w)
	checkRatio(t, "unbounded hit ratio", ratio(c.hits, lru.BlockRefs), 0.366)
	if lru.BlockRefs != 288_500 {
		t.Errorf("block references = %d, want 288500 (the trace README's count)", lru.BlockRefs)
	}
}

// TestBeladyBoundsEveryStrategy checks on the excerpt that no strategy
// loads fewer blocks than the offline optimum (what MIN provably minimises;
// its prefix hits need not be the most, see Belady) and none hits more
// than an unbounded cache, at several capacities (one with -short or the
// race detector), and that the counts add up.
func TestBeladyBoundsEveryStrategy(t *testing.T) {
	skipUnderRace(t)
	w, err := LoadTrace(excerpt)
	if err != nil {
		t.Fatal(err)
	}
	ceil := computeCeiling(w)
	capacities := []int{50, 400, 1600}
	if reduced() {
		capacities = capacities[:1]
	}
	for _, capacity := range capacities {
		opt, optLoads := runBelady(t, w, Config{Capacity: capacity})
		if opt.BlockHits > ceil.hits {
			t.Errorf("capacity %d: Belady hits %d > unbounded %d", capacity, opt.BlockHits, ceil.hits)
		}
		for _, s := range kvevict.Strategies() {
			var loads int64
			rep, err := replay(w, s, Config{Capacity: capacity}, &loads)
			if err != nil {
				t.Fatalf("%s: %v", s, err)
			}
			if loads < optLoads {
				t.Errorf("capacity %d: %s loaded %d blocks, fewer than MIN's %d", capacity, s, loads, optLoads)
			}
			if rep.BlockHits > ceil.hits {
				t.Errorf("capacity %d: %s hits %d > unbounded %d", capacity, s, rep.BlockHits, ceil.hits)
			}
			checkReport(t, &rep)
		}
		checkReport(t, &opt)
	}
}

// checkReport checks the identities every report satisfies.
func checkReport(t *testing.T, r *Report) {
	t.Helper()
	if r.PrefillTokens < r.UnboundedPrefillTokens {
		t.Errorf("%s at %d: prefill %d below the unbounded %d", r.Strategy, r.CapacityBlocks, r.PrefillTokens, r.UnboundedPrefillTokens)
	}
	if r.RePrefillTokens > r.PrefillTokens {
		t.Errorf("%s at %d: re-prefill %d > prefill %d", r.Strategy, r.CapacityBlocks, r.RePrefillTokens, r.PrefillTokens)
	}
	if r.RePrefilledBlocks > r.EvictedBlocks {
		t.Errorf("%s at %d: %d blocks re-prefilled of %d evicted", r.Strategy, r.CapacityBlocks, r.RePrefilledBlocks, r.EvictedBlocks)
	}
	for name, v := range map[string]float64{
		"hit_ratio": r.HitRatio, "token_hit_ratio": r.TokenHitRatio, "block_reprefill_rate": r.BlockRePrefillRate,
		"utilization": r.Utilization, "hit_fairness": r.HitFairness,
	} {
		if !(v >= 0 && v <= 1) {
			t.Errorf("%s at %d: %s = %v, outside [0, 1]", r.Strategy, r.CapacityBlocks, name, v)
		}
	}
	if r.Times != nil {
		checkLittle(t, r.Strategy, r.Times)
	}
}

// checkLittle checks Little's law, L = lambda W, on a run in time: the mean
// of the requests in the system, which the engine counts as they arrive
// and finish, within 2% of the arrival rate times the mean time in it.
func checkLittle(t *testing.T, name string, tm *Times) {
	t.Helper()
	l, lw := tm.MeanInSystem, tm.ArrivalRatePerS*tm.E2EMean
	if math.Abs(l-lw) > 0.02*max(l, lw) {
		t.Errorf("%s: Little's law: mean in system %.6f, arrival rate %.6f/s x mean E2E %.6fs = %.6f", name, l, tm.ArrivalRatePerS, tm.E2EMean, lw)
	}
}

// TestReplayTinyScript checks a replay step by step against hand-computed
// hits, at capacity 2 under LRU.
func TestReplayTinyScript(t *testing.T) {
	w := &Workload{Name: "script", BlockTokens: 2, GroupKind: "session", Requests: []Request{
		{InputTokens: 4, HashIDs: []uint64{1, 2}},    // miss, miss: resident 1 2
		{InputTokens: 4, HashIDs: []uint64{1, 3}},    // hit 1; evict 2 (1 is in use): resident 1 3
		{InputTokens: 3, HashIDs: []uint64{1, 2}},    // hit 1; 2 comes back (1 token); evict 3
		{InputTokens: 6, HashIDs: []uint64{4, 1, 2}}, // 4 misses: no prefix hits; keeps 4 1, evicts 2
	}}
	rep, err := Replay(w, kvevict.LRU, Config{Capacity: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.BlockHits != 2 || rep.BlockRefs != 9 {
		t.Errorf("hits/refs = %d/%d, want 2/9", rep.BlockHits, rep.BlockRefs)
	}
	// Request 2 brings back block 2, evicted by request 1: 1 token, the
	// last block of a 3-token prompt.
	if rep.RePrefillTokens != 1 {
		t.Errorf("re-prefill tokens = %d, want 1", rep.RePrefillTokens)
	}
	if rep.PrefillTokens != 4+2+1+6 {
		t.Errorf("prefill tokens = %d, want 13", rep.PrefillTokens)
	}
	if rep.EvictedBlocks != 3 {
		t.Errorf("evicted blocks = %d, want 3", rep.EvictedBlocks)
	}
	// Of the three evictions (2, 3, 2 again) only the first is needed again.
	if rep.RePrefilledBlocks != 1 || rep.BlockRePrefillRate != 1.0/3 {
		t.Errorf("re-prefilled blocks = %d (rate %v), want 1 (1/3)", rep.RePrefilledBlocks, rep.BlockRePrefillRate)
	}
}

func TestReplayErrors(t *testing.T) {
	w := &Workload{Name: "one", BlockTokens: 16, Requests: []Request{{HashIDs: []uint64{1}}}}
	if _, err := Replay(w, kvevict.LRU, Config{Capacity: 0}); err == nil {
		t.Error("capacity 0: no error")
	}
	if _, err := Replay(w, "nope", Config{Capacity: 4}); !errors.Is(err, kvevict.ErrUnknownStrategy) {
		t.Errorf("unknown strategy: err = %v", err)
	}
	bad := &Workload{Name: "bad", BlockTokens: 16, Requests: []Request{{InputTokens: -3}}}
	if _, err := Serve(bad, kvevict.LRU, ServeConfig{Config: Config{Capacity: 4}}); err == nil ||
		!strings.Contains(err.Error(), "request 0: input_length -3 is out of range") {
		t.Errorf("negative input tokens: err = %v", err)
	}
	if _, err := Belady(&Workload{BlockTokens: 16}, Config{Capacity: 4}); !errors.Is(err, ErrEmptyWorkload) {
		t.Errorf("empty workload: err = %v", err)
	}
}

// TestReplayFeedsPolicyMetrics: the replay's UpdateAccess calls let the
// policy count the same re-prefills and evictions the replay counts (the
// excerpt evicts fewer blocks than the policy's history cap).
func TestReplayFeedsPolicyMetrics(t *testing.T) {
	w, err := LoadTrace(excerpt)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []kvevict.Strategy{kvevict.LRU, kvevict.LFU} {
		p, err := kvevict.New(s)
		if err != nil {
			t.Fatal(err)
		}
		_, tl := replayAll(t, w, p, 400)
		m := p.Metrics()
		evicted, rePrefills := tl.evictions.Evictions(), tl.evictions.RePrefills()
		if evicted == 0 || evicted >= 1<<16 /* WithEvictionHistory's default */ {
			t.Fatalf("%s: %d evictions; the test needs some, below the history cap", s, evicted)
		}
		if m.EvictedBlocks != evicted || m.RePrefills != rePrefills {
			t.Errorf("%s: policy saw %d evicted blocks and %d re-prefills, the replay %d and %d",
				s, m.EvictedBlocks, m.RePrefills, evicted, rePrefills)
		}
	}
}

// TestMemoryFollowsWorkload: a pool far larger than the workload costs
// memory for the workload's blocks only. A hundred million blocks at even
// one byte each would be 100 MB; the runs must stay far below that.
func TestMemoryFollowsWorkload(t *testing.T) {
	w, err := Synthetic("chat", 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	const capacity = 100_000_000
	runs := map[string]func() (Report, error){
		"replay lru": func() (Report, error) { return Replay(w, kvevict.LRU, Config{Capacity: capacity}) },
		"replay arc": func() (Report, error) { return Replay(w, kvevict.ARC, Config{Capacity: capacity}) },
		"belady":     func() (Report, error) { return Belady(w, Config{Capacity: capacity}) },
	}
	for _, g := range []Granularity{GranularitySequence, GranularityTail, GranularityBlock} {
		runs["serve "+string(g)] = func() (Report, error) {
			return Serve(w, kvevict.LRU, ServeConfig{Config: Config{Capacity: capacity}, Granularity: g})
		}
	}
	for name, run := range runs {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := run(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 20<<20 {
			t.Errorf("%s at %d blocks: allocated %d MiB for %d requests", name, capacity, alloc>>20, len(w.Requests))
		}
	}
}

// replayAll replays every request of w through policy p at capacity, as
// Replay does, and returns the replayer and its tally for inspection.
func replayAll(t *testing.T, w *Workload, p kvevict.Policy, capacity int) (*replayer, *tally) {
	t.Helper()
	c, err := tier.NewPolicyCache(p, capacity)
	if err != nil {
		t.Fatal(err)
	}
	r := &replayer{w: w, cache: c}
	tl := newTally(w, computeCeiling(w))
	for i := range w.Requests {
		if _, err := r.request(i, tl); err != nil {
			t.Fatal(err)
		}
	}
	return r, tl
}
