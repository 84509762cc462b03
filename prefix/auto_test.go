package prefix

import (
	"math"
	"slices"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/internal/rank"
)

// TestAutoFrequentLeafOutlivesNewer is a hand-computed script: a leaf
// requested four times outlives a leaf requested once that was used more
// recently, where LRU evicts it. The pool is of two blocks (the
// tree's capacity), so the miniature caches that choose the weight hold
// two blocks each and see every request. Evict carries no tick: it
// happens at the latest tick the tree saw.
//
//	tick  0  Insert F     entries 1; the caches take F
//	tick 10  Match F      requests 2; every cache hits
//	tick 20  Match F      requests 3; every cache hits
//	         Lock F
//	tick 30  Insert A     entries 2
//	tick 40  Insert B     entries 3; the caches of weight 0 and 1/4 (F's
//	                      score 1 in their clock) drop F, those of 1, 4
//	                      and 16 (F's score 4 or more) drop A (score 2)
//	         Evict(1)     origin (3 entries, tick 40): A (key 30) goes
//	tick 50  Match F      requests 4: a hit in the caches of 1, 4 and 16
//	                      only, so weight 1 (the smallest with the most)
//	tick 60  Insert C     entries 4; 3 blocks: W = 1 x 3 blocks x 20 ticks
//	                      / 1 entry = 60; key C = 60 + W x log2(1) = 60
//	         Unlock F     key F = 50 + 60 x log2(4) = 170
//	         Evict(2)     B (key 40, W 0 when inserted), then C (60)
//
// Under LRU the same script evicts B (40), then F (50).
func TestAutoFrequentLeafOutlivesNewer(t *testing.T) {
	const f, a, b, c = 1, 2, 3, 4
	for _, tc := range []struct {
		strategy kvevict.Strategy
		want     []uint64
		keyF     int64
	}{
		{kvevict.Auto, []uint64{b, c}, 170},
		{kvevict.LRU, []uint64{b, f}, 50},
	} {
		t.Run(string(tc.strategy), func(t *testing.T) {
			tr := newTree(t, tc.strategy, 2)
			match := func(tick int64) {
				t.Helper()
				if _, err := tr.Match([]uint64{f}, at(tick)); err != nil {
					t.Fatal(err)
				}
				check(t, tr)
			}
			mustInsert(t, tr, []uint64{f}, at(0))
			match(10)
			match(20)
			if err := tr.Lock([]uint64{f}); err != nil {
				t.Fatal(err)
			}
			mustInsert(t, tr, []uint64{a}, at(30))
			mustInsert(t, tr, []uint64{b}, at(40))
			if got := mustEvict(t, tr, 1); !slices.Equal(got, []uint64{a}) {
				t.Fatalf("Evict(1) = %v, want [%d]", got, a)
			}
			match(50)
			mustInsert(t, tr, []uint64{c}, at(60))
			if err := tr.Unlock([]uint64{f}); err != nil {
				t.Fatal(err)
			}
			check(t, tr)
			if got := leafKey(tr, f); got != tc.keyF {
				t.Errorf("F's key %d, want %d", got, tc.keyF)
			}
			if got := mustEvict(t, tr, 2); !slices.Equal(got, tc.want) {
				t.Errorf("Evict(2) = %v, want %v", got, tc.want)
			}
		})
	}
}

// leafKey returns the score that the heap of the weight chosen holds for
// the one-block path h.
func leafKey(tr *Tree, h uint64) int64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	chosen := 0
	if tr.meas != nil {
		_, chosen = tr.meas.Horizons(tr.now, tr.evictable+tr.protected)
	}
	return tr.heaps[chosen].At(tr.children[edge{0, h}].slot).Major
}

// pool serves one-block requests on a tree as an allocator of c blocks
// does: a Match, and on a miss an eviction if the pool is full and an
// Insert. Each block's requests are those of the stream, since the tree
// remembers the counts of evicted blocks.
type pool struct {
	tb   testing.TB
	tr   *Tree
	c    int
	tick int64
}

func (p *pool) request(hashes ...uint64) {
	p.tb.Helper()
	for _, h := range hashes {
		p.tick++
		path := []uint64{h}
		matched, err := p.tr.Match(path, at(p.tick))
		if err != nil {
			p.tb.Fatal(err)
		}
		if matched == 0 {
			if p.tr.Len() >= p.c {
				mustEvict(p.tb, p.tr, 1)
			}
			mustInsert(p.tb, p.tr, path, at(p.tick))
		}
		check(p.tb, p.tr)
	}
}

// TestAutoWeightFromSimulation: the tree's weight is the one its
// miniature caches choose, as for a Policy (autoweight_internal_test.go's
// streams, served by a tree). A hot block requested again at the end
// shows the weight: its key is its recency plus W x log2(requests), so
// above its recency exactly when the weight is above 0.
func TestAutoWeightFromSimulation(t *testing.T) {
	if raceEnabled {
		t.Skip("one goroutine, an invariant check after every request; run without -race")
	}
	t.Run("hot blocks between scans", func(t *testing.T) {
		// A few hot blocks between runs of one-shot blocks longer than the
		// pool: LRU loses the hot blocks to every run, a weight for
		// frequency keeps them.
		const c = 8
		p := &pool{tb: t, tr: newTree(t, kvevict.Auto, c), c: c}
		next := uint64(100)
		for range 200 {
			p.request(1, 2, 3, 4)
			for range 2 * c {
				next++
				p.request(next)
			}
		}
		p.request(1)
		if key := leafKey(p.tr, 1); key <= p.tick {
			t.Errorf("hot block's key %d at tick %d: want frequency to count", key, p.tick)
		}
	})
	t.Run("frequency misleads", func(t *testing.T) {
		// Blocks used four times in a burst and never again, as the turns
		// of sessions that end: the blocks with the most requests are the
		// dead ones, and the weight is 0.
		const c = 16
		p := &pool{tb: t, tr: newTree(t, kvevict.Auto, c), c: c}
		next := uint64(0)
		for range 200 {
			round := make([]uint64, 12)
			for i := range round {
				next++
				round[i] = next
			}
			for range 4 {
				p.request(round...)
			}
		}
		if key := leafKey(p.tr, next); key != p.tick {
			t.Errorf("last block's key %d at tick %d, 4 requests: want recency alone", key, p.tick)
		}
	})
}

// TestAutoMemoryBound: the memory of evicted blocks holds at most
// WithGhostCap hashes however many blocks pass, a block evicted within
// the last cap evictions takes back its requests when inserted again, and
// one evicted earlier is forgotten and starts from one.
func TestAutoMemoryBound(t *testing.T) {
	const limit = 8
	tr := newTree(t, kvevict.Auto, roomy, WithStrategyOptions(kvevict.WithGhostCap(limit)))
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
		if n := tr.ghosts.Len(); n > limit {
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

// choiceMeasurements are measurements whose choice of weight a test sets: two
// weights, of horizons 0 (recency alone) and 100 ticks per doubling of
// requests, keyed as Auto keys, lastAccess + W x log2(requests).
type choiceMeasurements struct{ chosen int }

func (h *choiceMeasurements) Request(uint64, uint32) {}
func (h *choiceMeasurements) Evicted(int64, int)     {}
func (h *choiceMeasurements) Horizons(int64, int) ([]float64, int) {
	return []float64{0, 100}, h.chosen
}
func (h *choiceMeasurements) Key(lastAccess int64, requests uint32, w float64) rank.Key {
	return rank.Key{Major: lastAccess + int64(w*math.Log2(float64(requests))), Minor: lastAccess}
}
func (h *choiceMeasurements) GhostCap() int { return 0 }
func (h *choiceMeasurements) Check() error  { return nil }

// TestAutoChoiceChangeLeavesNoStaleKey is a hand-computed script of a
// change of weight between the touch of a leaf and its eviction. X is
// requested four times by tick 3 and Y once at tick 10, both while the
// weight of horizon 100 is chosen: X's score is 3 + 100 x log2(4) = 203
// under it, 3 under recency alone; Y's is 10 under both. If the choice
// stays, Evict takes Y then X. If it moves to recency before the
// eviction, X, the least recent, goes first, although it was touched
// under the other weight: a tree that kept only the key of the moment of
// the touch would still hold 203 for X and evict Y.
func TestAutoChoiceChangeLeavesNoStaleKey(t *testing.T) {
	const x, y = 1, 2
	for _, tc := range []struct {
		chosenAtEvict int
		want          []uint64
	}{
		{1, []uint64{y, x}},
		{0, []uint64{x, y}},
	} {
		tr := newTree(t, kvevict.Auto, roomy)
		h := &choiceMeasurements{chosen: 1}
		tr.meas, tr.heaps, tr.keyBuf = h, make([]rank.Heap, 2), make([]rank.Key, 2)
		mustInsert(t, tr, []uint64{x}, at(0))
		for tick := int64(1); tick <= 3; tick++ {
			if _, err := tr.Match([]uint64{x}, at(tick)); err != nil {
				t.Fatal(err)
			}
		}
		mustInsert(t, tr, []uint64{y}, at(10))
		check(t, tr)
		if got := leafKey(tr, x); got != 203 {
			t.Fatalf("X's score under the weight chosen: %d, want 203", got)
		}
		h.chosen = tc.chosenAtEvict
		if got := mustEvict(t, tr, 2); !slices.Equal(got, tc.want) {
			t.Errorf("choice %d at Evict: Evict(2) = %v, want %v", tc.chosenAtEvict, got, tc.want)
		}
		check(t, tr)
	}
}
