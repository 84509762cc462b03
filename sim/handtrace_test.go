package sim

import (
	"slices"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/tier"
)

// The papers' hand traces, stepped through a tier.Cache: each access's
// hit and the resident set after it.

// traceStep is one access of a hand trace and the resident set after it.
type traceStep struct {
	id   uint64
	hit  bool
	want []uint64 // residents after the access, any order
}

// runTrace steps a tier.Cache of capacity c driven by strategy s through
// steps, checking each access's hit and the resident set after it.
func runTrace(t *testing.T, s kvevict.Strategy, c int, steps []traceStep) {
	t.Helper()
	p, err := kvevict.New(s, kvevict.WithCapacity(c))
	if err != nil {
		t.Fatal(err)
	}
	cache, err := tier.NewPolicyCache(p, c)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range steps {
		hit, err := cache.Access(st.id)
		if err != nil {
			t.Fatalf("step %d (access %d): %v", i+1, st.id, err)
		}
		got := cache.Residents()
		slices.Sort(got)
		want := slices.Sorted(slices.Values(st.want))
		if hit != st.hit || !slices.Equal(got, want) {
			t.Fatalf("step %d (access %d): hit %v, residents %v; want hit %v, residents %v",
				i+1, st.id, hit, got, st.hit, want)
		}
	}
}

// TestSIEVEHandTrace steps SIEVE (Zhang et al., NSDI'24, Fig. 2) through a
// cache of 3. Queue shown tail first, * = visited, ^ = the hand.
func TestSIEVEHandTrace(t *testing.T) {
	runTrace(t, kvevict.SIEVE, 3, []traceStep{
		{1, false, []uint64{1}},       // [1]
		{2, false, []uint64{1, 2}},    // [1 2]
		{3, false, []uint64{1, 2, 3}}, // [1 2 3]
		{1, true, []uint64{1, 2, 3}},  // [1* 2 3]
		// Hand from the tail: 1 is visited (cleared), 2 is not: evict 2;
		// the hand rests on 3.
		{4, false, []uint64{1, 3, 4}}, // [1 ^3 4]
		// 3 is not visited: evicted; the hand rests on 4.
		{2, false, []uint64{1, 4, 2}}, // [1 ^4 2]
		{4, true, []uint64{1, 4, 2}},  // [1 ^4* 2]
		// 4 cleared, 2 evicted; past the head the hand returns to the tail.
		{5, false, []uint64{1, 4, 5}}, // [1 4 5], hand at the tail
		{1, true, []uint64{1, 4, 5}},  // [1* 4 5]
		// 1 cleared, 4 evicted. Unlike LRU, which would evict 4 here too
		// but evicted 1 at the access of 4 above, 1 survived on its bit.
		{6, false, []uint64{1, 5, 6}}, // [1 ^5 6]
		{1, true, []uint64{1, 5, 6}},
	})
}

// TestS3FIFOHandTrace steps S3-FIFO (Yang et al., SOSP'23, Algorithm 1)
// through a cache of 5: small's share is 1 (10%, at least 1), ghost holds
// 4. Queues shown tail first; f = frequency when not 0.
func TestS3FIFOHandTrace(t *testing.T) {
	runTrace(t, kvevict.S3FIFO, 5, []traceStep{
		{1, false, []uint64{1}},
		{2, false, []uint64{1, 2}},
		{3, false, []uint64{1, 2, 3}},
		{4, false, []uint64{1, 2, 3, 4}},
		{5, false, []uint64{1, 2, 3, 4, 5}}, // S [1 2 3 4 5]
		{1, true, []uint64{1, 2, 3, 4, 5}},  // S [1f1 2 3 4 5]
		// Full: S's tail 1 was accessed, so it moves to M; 2 was not: to G.
		{6, false, []uint64{1, 3, 4, 5, 6}}, // S [3 4 5 6] M [1] G [2]
		// 3 is evicted to G, then 2, found in G, enters M.
		{2, false, []uint64{1, 2, 4, 5, 6}}, // S [4 5 6] M [1 2] G [3]
		{1, true, []uint64{1, 2, 4, 5, 6}},  // M [1f1 2]
		{7, false, []uint64{1, 2, 5, 6, 7}}, // S [5 6 7] G [3 4]
		{3, false, []uint64{1, 2, 3, 6, 7}}, // S [6 7] M [1f1 2 3] G [4 5]
		{8, false, []uint64{1, 2, 3, 7, 8}}, // S [7 8] G [4 5 6]
		{4, false, []uint64{1, 2, 3, 4, 8}}, // S [8] M [1f1 2 3 4] G [5 6 7]
		{9, false, []uint64{1, 2, 3, 4, 9}}, // S [9] G [5 6 7 8]
		// 9 goes to G, which overflows and forgets 5, so 5 is new again:
		// the paper evicts before it asks the ghost.
		{5, false, []uint64{1, 2, 3, 4, 5}},   // S [5] G [6 7 8 9]
		{10, false, []uint64{1, 2, 3, 4, 10}}, // S [10] G [7 8 9 5]
		{10, true, []uint64{1, 2, 3, 4, 10}},  // S [10f1]
		// 10 moves to M; S is empty, so M evicts: 1 has a count, goes back
		// to M's head with it decremented; 2 has none and is evicted, not
		// to G.
		{11, false, []uint64{1, 3, 4, 10, 11}}, // S [11] M [3 4 10 1] G [7 8 9 5]
		// 2 is not a ghost: it enters S; 11 goes to G, forgetting 7.
		{2, false, []uint64{1, 2, 3, 4, 10}}, // S [2] G [8 9 5 11]
		{7, false, []uint64{1, 3, 4, 10, 7}}, // S [7] G [9 5 11 2]
	})
}
