package sim

import (
	"reflect"
	"slices"
	"testing"

	"github.com/sagellm/kvevict"
)

// differentialWorkloads are the fast-path tests' workloads: the
// conversation excerpt and every synthetic workload (seed, requests), the
// first two only with -short.
func differentialWorkloads(t *testing.T, seed uint64, requests int) []*Workload {
	t.Helper()
	ex, err := LoadTrace(excerpt)
	if err != nil {
		t.Fatal(err)
	}
	workloads := []*Workload{ex}
	names := WorkloadNames()
	if reduced() {
		names = names[:2]
	}
	for _, name := range names {
		w, err := Synthetic(name, seed, requests)
		if err != nil {
			t.Fatal(err)
		}
		workloads = append(workloads, w)
	}
	return workloads
}

// TestFastPathMatchesContract: a replay keeps its residents in an Index
// where the strategy allows one; the victims must be those a Policy's
// SelectVictims picks over every resident, the contract's path. Both paths
// run side by side, request for request, on the conversation trace (its
// excerpt, and the whole trace beside the repository when present) and
// on every synthetic workload, at a pool that evicts at nearly every
// request and at one that holds a tenth of the distinct blocks: the same
// victims in the same order, the same blocks loaded, and the same report.
//
// On the whole trace the larger pool is 2,500 blocks, the second size of
// compare's grid, not a tenth: the contract path scans every resident at
// each eviction, so its cost grows with the pool; at 2,500 blocks the
// strategies already part ways (their hit ratios in
// docs/conversation_replay.txt differ), so the Index's order and
// SelectVictims' are still compared where they choose among thousands of
// residents, over the whole hour of the trace.
func TestFastPathMatchesContract(t *testing.T) {
	skipUnderRace(t)
	t.Parallel()
	workloads := differentialWorkloads(t, 3, 600)
	var conversation *Workload
	if !reduced() {
		if conversation = loadConversation(t); conversation != nil {
			workloads = append(workloads, conversation)
		}
	}
	for _, w := range workloads {
		distinct := computeCeiling(w).distinct
		capacities := []int{64, max(64, distinct/10)}
		if w == conversation {
			capacities[1] = 2500
		}
		if reduced() {
			// The contract path scans every resident per eviction; -short
			// leaves the larger pool to the full run.
			capacities = capacities[:1]
		}
		for _, capacity := range capacities {
			for _, s := range kvevict.Strategies() {
				compareReplayPaths(t, w, s, capacity)
			}
		}
	}
}

// compareReplayPaths replays w under s at capacity by the fast path and the
// contract path in lockstep and fails at the first request they disagree on.
func compareReplayPaths(t *testing.T, w *Workload, s kvevict.Strategy, capacity int) {
	t.Helper()
	opts := []kvevict.Option{kvevict.WithEvictionHistory(0)}
	if s.Adaptive() {
		opts = append(opts, kvevict.WithCapacity(capacity+longestRequest(w, capacity)))
	}
	fastCache, err := cacheFor(s, opts, capacity, capacity, false)
	if err != nil {
		t.Fatal(err)
	}
	slowCache, err := cacheFor(s, opts, capacity, capacity, true)
	if err != nil {
		t.Fatal(err)
	}
	fast, slow := &replayer{w: w, cache: fastCache}, &replayer{w: w, cache: slowCache}
	ceiling := computeCeiling(w)
	tf, ts := newTally(w, ceiling), newTally(w, ceiling)
	var victims []uint64
	for i := range w.Requests {
		want, err := slow.request(i, ts)
		if err != nil {
			t.Fatalf("%s %s at %d, request %d, contract path: %v", w.Name, s, capacity, i, err)
		}
		victims = victims[:0]
		for _, v := range want.Victims {
			victims = append(victims, v.ID)
		}
		out, err := fast.request(i, tf)
		if err != nil {
			t.Fatalf("%s %s at %d, request %d: %v", w.Name, s, capacity, i, err)
		}
		got := out.Victims
		if !slices.EqualFunc(got, victims, func(v kvevict.Victim, id uint64) bool { return v.ID == id }) ||
			tf.loads != ts.loads {
			t.Fatalf("%s %s at %d, request %d: victims %v, contract path %v; loads %d, %d",
				w.Name, s, capacity, i, got, victims, tf.loads, ts.loads)
		}
	}
	a, b := tf.report(string(s), "replay", capacity), ts.report(string(s), "replay", capacity)
	a.EvictionP50, a.EvictionP99, b.EvictionP50, b.EvictionP99 = 0, 0, 0, 0
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("%s %s at %d: report %+v, contract path %+v", w.Name, s, capacity, a, b)
	}
}

// TestServeFastPathMatchesContract: Serve at sequence and tail granularity
// keeps its candidates in an Index where the strategy allows one; the pool
// must go through the same states as with a Policy's SelectVictims over
// every candidate: after every event the same cached blocks, and in the
// end the same report. The conversation excerpt and every synthetic
// workload, at a pool that preempts and at one that rarely evicts.
func TestServeFastPathMatchesContract(t *testing.T) {
	skipUnderRace(t)
	t.Parallel()
	for _, w := range differentialWorkloads(t, 5, 300) {
		distinct := computeCeiling(w).distinct
		for _, capacity := range []int{max(longestRequest(w, 1<<30)+8, 128), max(distinct/4, 256)} {
			for _, g := range []Granularity{GranularitySequence, GranularityTail} {
				for _, s := range kvevict.Strategies() {
					fast, fastSteps := serveFingerprints(t, w, s, capacity, g, false)
					slow, slowSteps := serveFingerprints(t, w, s, capacity, g, true)
					if i := firstDifference(fastSteps, slowSteps); i >= 0 {
						t.Fatalf("%s %s %s at %d: the pools differ after event %d of %d", w.Name, g, s, capacity, i, len(slowSteps))
					}
					fast.EvictionP50, fast.EvictionP99, slow.EvictionP50, slow.EvictionP99 = 0, 0, 0, 0
					if !reflect.DeepEqual(fast, slow) {
						t.Fatalf("%s %s %s at %d: report %+v, contract path %+v", w.Name, g, s, capacity, fast, slow)
					}
				}
			}
		}
	}
}

// serveFingerprints serves w and returns the report and, after every event,
// a fingerprint of the cached blocks: their number and the sum of a mix of
// their hashes, independent of the order the pool holds them in.
func serveFingerprints(t *testing.T, w *Workload, s kvevict.Strategy, capacity int, g Granularity, contract bool) (Report, [][2]uint64) {
	t.Helper()
	var steps [][2]uint64
	cfg := ServeConfig{Config: Config{Capacity: capacity, contract: contract}, Granularity: g}
	cfg.afterStep = func(p *pool) {
		var sum uint64
		for _, o := range p.owners {
			for _, b := range o.blocks {
				if b >= 0 {
					h := p.blocks[b].hash * 0x9e3779b97f4a7c15
					sum += h ^ h>>29
				}
			}
		}
		steps = append(steps, [2]uint64{uint64(p.cached), sum})
	}
	rep, err := Serve(w, s, cfg)
	if err != nil {
		t.Fatalf("%s %s %s at %d (contract %v): %v", w.Name, g, s, capacity, contract, err)
	}
	return rep, steps
}

// firstDifference returns the first index where a and b differ, or -1.
func firstDifference(a, b [][2]uint64) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
