package rank

import (
	"math"
	"testing"
)

// feed requests ids from w as Auto does: counting each id's requests.
func feed(t *testing.T, w *Weights, counts map[uint64]uint32, ids ...uint64) {
	t.Helper()
	for _, id := range ids {
		counts[id]++
		w.Access(id, float32(math.Log2(float64(counts[id]))))
	}
	if err := w.Check(); err != nil {
		t.Fatal(err)
	}
}

// feedScans requests four hot ids, then a run of 2c one-shot ids, 200
// times over: runs longer than a miniature cache of c ids.
func feedScans(t *testing.T, w *Weights, c int) {
	t.Helper()
	counts := map[uint64]uint32{}
	next := uint64(100)
	for range 200 {
		feed(t, w, counts, 1, 2, 3, 4)
		for range 2 * c {
			next++
			feed(t, w, counts, next)
		}
	}
}

// TestAutoWeightsAgainstScans: a few hot ids between runs of one-shot ids
// longer than the miniature caches: LRU loses the hot ids to every run, a
// weight for frequency keeps them, so the weight chosen is above 0.
func TestAutoWeightsAgainstScans(t *testing.T) {
	const c = 8
	w := NewWeights(c, 0)
	feedScans(t, &w, c)
	if got := w.Weight(); got == 0 {
		t.Errorf("weight %v, want frequency to count; hits %v", got, simHits(&w))
	}
}

// TestAutoWeightsWhenFrequencyMisleads: ids used four times in a burst and
// never again, as the turns of sessions that end: the ids with the most
// requests are the dead ones, LRU has the most hits and the weight is 0.
func TestAutoWeightsWhenFrequencyMisleads(t *testing.T) {
	const c = 16
	w := NewWeights(c, 0)
	counts := map[uint64]uint32{}
	next := uint64(0)
	for range 200 {
		round := make([]uint64, 12)
		for i := range round {
			next++
			round[i] = next
		}
		for range 4 {
			feed(t, &w, counts, round...)
		}
	}
	hits := simHits(&w)
	if got := w.Weight(); got != 0 {
		t.Errorf("weight %v, want 0 (recency alone); hits %v", got, hits)
	}
	if hits[0] <= hits[len(hits)-1] {
		t.Errorf("hits %v: LRU's should be above the largest weight's", hits)
	}
}

// TestAutoWeightsTierBelow: with a tier below, a miniature cache's victim
// is demoted there and a request that finds it is a hit that takes it back
// up, by hand for LRU (weight 0) with room for two ids above and two below.
func TestAutoWeightsTierBelow(t *testing.T) {
	w := NewWeights(2, 2)
	counts := map[uint64]uint32{}
	feed(t, &w, counts, 1, 2, 3) // 1 demoted
	feed(t, &w, counts, 1)       // loaded from below; 2 demoted
	// The hits are halved every 2 requests, the caches' size: the one hit,
	// the fourth request, is halved once.
	lru := &w.sims[0]
	if lru.hits != 0.5 {
		t.Errorf("LRU over a tier below: %v hits, want 0.5 (id 1, from below, halved once)", lru.hits)
	}
	if _, ok := lru.below.Get(1); ok {
		t.Error("id 1 is still below after its load: the tier below is exclusive")
	}
	if _, ok := lru.below.Get(2); !ok {
		t.Error("id 2, the victim of id 1's load, is not below")
	}
	if huge := NewWeights(1<<20, math.MaxInt); huge.sims[0].below.Cap() != simBelowMax {
		t.Errorf("a tier below of MaxInt ids: miniature of %d, want the bound %d", huge.sims[0].below.Cap(), simBelowMax)
	}
	alone := NewWeights(2, 0)
	feed(t, &alone, map[uint64]uint32{}, 1, 2, 3, 1)
	if alone.sims[0].hits != 0 {
		t.Errorf("LRU alone: %v hits, want 0", alone.sims[0].hits)
	}
}

// TestAutoWeightsScansOverTierBelow: TestAutoWeightsAgainstScans's
// traffic over a tier below that holds a run and the hot ids: recency
// over the two tiers serves every hot request, as frequency in the pool
// does, so the weight chosen is 0, where the pool alone needs frequency.
func TestAutoWeightsScansOverTierBelow(t *testing.T) {
	const c = 8
	w := NewWeights(c, 3*c)
	feedScans(t, &w, c)
	if got := w.Weight(); got != 0 {
		t.Errorf("weight %v, want 0: the tier below keeps what recency drops; hits %v", got, simHits(&w))
	}
}

// TestAutoWeightsSample: a pool larger than a miniature cache is simulated
// on a sample of its ids at the rate autoSimSize / c, and the caches stay
// within autoSimSize ids.
func TestAutoWeightsSample(t *testing.T) {
	const c, n = 1 << 20, 400_000
	w := NewWeights(c, 0)
	for id := range uint64(n) {
		w.Access(id, 0)
	}
	if err := w.Check(); err != nil {
		t.Fatal(err)
	}
	want := float64(n) * simSize / c
	if got := float64(w.sims[0].clock); math.Abs(got-want) > want/4 {
		t.Errorf("%v ids sampled of %d, want about %v", got, n, want)
	}
	for i := range w.sims {
		if l := w.sims[i].heap.Len(); l > simSize {
			t.Errorf("miniature cache %d holds %d ids, more than %d", i, l, simSize)
		}
	}
}

func simHits(w *Weights) []float64 {
	var hits []float64
	for i := range w.sims {
		hits = append(hits, w.sims[i].hits)
	}
	return hits
}

// TestLog2Requests: the table of small counts gives math.Log2's values,
// at its edges and past them.
func TestLog2Requests(t *testing.T) {
	for _, r := range []uint32{0, 1, 2, 3, 7, 1000, 1023, 1024, 1025, 1 << 20, math.MaxUint32} {
		want := float32(math.Log2(float64(max(r, 1))))
		if got := Log2Requests(r); got != want {
			t.Errorf("Log2Requests(%d) = %v, want %v", r, got, want)
		}
	}
}
