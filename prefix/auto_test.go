package prefix

import (
	"slices"
	"testing"

	"github.com/sagellm/kvevict"
)

// TestAutoFrequentLeafOutlivesNewer is a hand-computed script: a leaf
// requested four times outlives a leaf requested once that was used more
// recently, where LRU evicts it. Evict carries no tick: it happens at the
// latest tick the tree saw.
//
//	tick  0  Insert F     entries 1
//	tick 10  Insert Y     entries 2
//	         Evict(1)     origin (2 entries, tick 10); W = 0: F (key 0) goes,
//	                      remembered with 1 request
//	tick 30  Insert F     F returns: missed 1, entries 3, requests 2
//	tick 40  Match F      caught 1, requests 3
//	tick 50  Match F      caught 2, requests 4; 2 blocks resident:
//	                      W = odds 1/2 x 2 blocks x 40 ticks / 1 entry = 40,
//	                      key F = 50 + 40 x log2(4) = 130
//	tick 60  Insert O     entries 4; key O = 60 + W x log2(1) = 60
//	         Evict(2)     Y (key 10), then O (key 60); F stays
//
// Under LRU the same script evicts Y (10), then F (50).
func TestAutoFrequentLeafOutlivesNewer(t *testing.T) {
	const f, y, o = 1, 2, 3
	for _, tc := range []struct {
		strategy kvevict.Strategy
		want     []uint64
		keyF     int64
	}{
		{kvevict.Auto, []uint64{y, o}, 130},
		{kvevict.LRU, []uint64{y, f}, 50},
	} {
		t.Run(string(tc.strategy), func(t *testing.T) {
			tr := newTree(t, tc.strategy)
			mustInsert(t, tr, []uint64{f}, at(0))
			mustInsert(t, tr, []uint64{y}, at(10))
			if got := mustEvict(t, tr, 1); !slices.Equal(got, []uint64{f}) {
				t.Fatalf("Evict(1) = %v, want [%d]", got, f)
			}
			mustInsert(t, tr, []uint64{f}, at(30))
			for _, tick := range []int64{40, 50} {
				if _, err := tr.Match([]uint64{f}, at(tick)); err != nil {
					t.Fatal(err)
				}
				check(t, tr)
			}
			mustInsert(t, tr, []uint64{o}, at(60))
			tr.mu.Lock()
			nf := tr.children[edge{0, f}]
			gotKey := tr.heap.At(nf.slot).Major
			tr.mu.Unlock()
			if gotKey != tc.keyF {
				t.Errorf("F's key %d, want %d", gotKey, tc.keyF)
			}
			if got := mustEvict(t, tr, 2); !slices.Equal(got, tc.want) {
				t.Errorf("Evict(2) = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAutoMemoryBound: the memory of evicted blocks holds at most
// WithHistoryCap hashes however many blocks pass, a block evicted within
// the last cap evictions takes back its requests when inserted again, and
// one evicted earlier is forgotten and starts from one.
func TestAutoMemoryBound(t *testing.T) {
	const limit = 8
	tr := newTree(t, kvevict.Auto, WithStrategyOptions(kvevict.WithHistoryCap(limit)))
	tick := int64(0)
	use := func(h uint64, times int) {
		for range times {
			tick++
			if _, err := tr.Match([]uint64{h}, at(tick)); err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Insert([]uint64{h}, at(tick)); err != nil {
				t.Fatal(err)
			}
		}
	}
	requests := func(h uint64) uint32 {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.children[edge{0, h}].requests
	}
	for h := uint64(1); h <= 1000; h++ {
		use(h, int(h%4)+1) // h requested h%4+1 times
		if got := requests(h); got != uint32(h%4+1) {
			t.Fatalf("block %d: %d requests, want %d", h, got, h%4+1)
		}
		mustEvict(t, tr, 1) // the only block: h
		if n := tr.memory.len(); n > limit {
			t.Fatalf("after %d evictions the memory holds %d hashes, cap %d", h, n, limit)
		}
	}
	// 1000 was evicted last and 993 eighth from last: both remembered.
	// 992, ninth from last, is forgotten.
	for _, tc := range []struct {
		h    uint64
		want uint32
	}{{1000, 1000%4 + 2}, {993, 993%4 + 2}, {992, 1}} {
		use(tc.h, 1)
		if got := requests(tc.h); got != tc.want {
			t.Errorf("block %d inserted again: %d requests, want %d", tc.h, got, tc.want)
		}
	}
}
