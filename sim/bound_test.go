package sim

import (
	"math"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/tier"
)

// TestPooledBoundByHand: a pool of 2 blocks, requests [1 2 3], [4],
// [5 2 3], [1]. After the first, blocks 2 and 3 come back at request 2
// and block 1 only at request 3: the pool keeps 2 and 3 and bypasses 1.
// Block 4 never comes back and is bypassed; request 2 finds 2 and 3 (hits
// though its first block, 5, is a miss: not a prefix); request 3 misses
// 1. Two hits of eight references. Belady, counting prefixes and caching
// every block, finds none of them.
func TestPooledBoundByHand(t *testing.T) {
	w := &Workload{Name: "hand", BlockTokens: 1, Requests: []Request{
		{InputTokens: 3, HashIDs: []uint64{1, 2, 3}},
		{InputTokens: 1, HashIDs: []uint64{4}},
		{InputTokens: 3, HashIDs: []uint64{5, 2, 3}},
		{InputTokens: 1, HashIDs: []uint64{1}},
	}}
	got, err := PooledBound(w, Config{Capacity: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got != 0.25 {
		t.Errorf("bound %v, want 2/8", got)
	}
	b, err := Belady(w, Config{Capacity: 2})
	if err != nil {
		t.Fatal(err)
	}
	if b.HitRatio != 0 {
		t.Errorf("Belady %v, want 0", b.HitRatio)
	}
	if _, err := PooledBound(w, Config{Capacity: 0}); err == nil {
		t.Error("capacity 0: no error")
	}
}

// TestPooledBoundIsABound: on every synthetic workload, at pools from a
// few blocks to all of them, the bound is at least Belady's hit ratio at
// the same capacity and every cluster's whose engines hold that capacity
// in all, behind every router (ttft in time) and under a key strategy and
// Auto (under the race detector, 3 engines of 20 blocks under LRU); with
// room for every block it is the share of references to a block
// referenced before, as an unbounded pool that counts every block finds.
func TestPooledBoundIsABound(t *testing.T) {
	skipUnderRace(t)
	t.Parallel()
	for _, name := range WorkloadNames() {
		w, cost := syntheticPriced(t, name)
		seen, again, refs := map[uint64]bool{}, 0, 0
		for _, r := range w.Requests {
			for _, h := range r.HashIDs {
				if seen[h] {
					again++
				}
				refs++
			}
			for _, h := range r.HashIDs {
				seen[h] = true
			}
		}
		if got, err := PooledBound(w, Config{Capacity: len(seen)}); err != nil || math.Abs(got-float64(again)/float64(refs)) > 1e-12 {
			t.Errorf("%s with room for all: bound %v (%v), want %v", name, got, err, float64(again)/float64(refs))
		}
		engineCounts, capacities, strategies := []int{1, 2, 3}, []int{20, 200}, []kvevict.Strategy{kvevict.LRU, kvevict.Auto}
		if reduced() { // -short keeps one of each
			engineCounts, capacities, strategies = []int{3}, []int{20}, strategies[:1]
		}
		for _, engines := range engineCounts {
			for _, capacity := range capacities {
				bound, err := PooledBound(w, Config{Capacity: engines * capacity})
				if err != nil {
					t.Fatal(err)
				}
				b, err := Belady(w, Config{Capacity: engines * capacity})
				if err != nil {
					t.Fatal(err)
				}
				if b.HitRatio > bound {
					t.Errorf("%s at %d blocks: Belady %v above the bound %v", name, engines*capacity, b.HitRatio, bound)
				}
				for _, s := range strategies {
					for _, router := range append(routerNames, "ttft") {
						var r Router
						if router == "ttft" {
							if r, err = NewTTFTRouter(newExactMirror(engines), cost); err != nil {
								t.Fatal(err)
							}
						} else {
							r = newRouter(t, router, engines, 0.7)
						}
						rep, err := Cluster(w, s, r, ClusterConfig{Config: Config{Capacity: capacity}, Engines: engines, EngineConfig: EngineConfig{Cost: cost}})
						if err != nil {
							t.Fatal(err)
						}
						checkLittle(t, "cluster", &rep.Times)
						if rep.HitRatio > bound {
							t.Errorf("%s, %s, %s at %d x %d: hit ratio %v above the bound %v", name, s, router, engines, capacity, rep.HitRatio, bound)
						}
					}
				}
			}
		}
	}
}

// syntheticPriced returns synthetic workload name (seed 2, 300 requests)
// and the default cost model of its blocks: Llama-3-8B on one H100.
func syntheticPriced(t *testing.T, name string) (*Workload, *tier.Cost) {
	t.Helper()
	w, err := Synthetic(name, 2, 300)
	if err != nil {
		t.Fatal(err)
	}
	m := llama(t)
	cost := mustCost(t, m, w.BlockTokens, tier.DefaultCompute(), nil)
	return w, cost
}
