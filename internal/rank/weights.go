package rank

import (
	"fmt"
	"math"

	"github.com/sagellm/kvevict/internal/ghost"
	"github.com/sagellm/kvevict/internal/idmap"
)

// SimWeights are the weights Auto's miniature caches try, in
// turnovers per doubling of requests: from recency alone (LRU) to sixteen
// lifetimes, which for ids used hundreds of times is frequency first. The
// steps are factors of four: the choice is of an order of magnitude, and
// each weight simulated costs every sampled request a heap update.
var SimWeights = [...]float64{0, 0.25, 1, 4, 16}

// simSize is the most ids a miniature cache holds. A pool larger than
// that is simulated on a spatial sample of its ids, the pool's size times
// the sampling rate (SHARDS: Waldspurger et al., FAST'15).
const simSize = 1024

// simBelowMax bounds a miniature cache's tier below, in ids: the tier
// below is simulated at the pool's sampling rate, so a tier far larger
// than the pool would cost memory in proportion.
const simBelowMax = 16 * simSize

// Weights chooses Auto's weight by simulation, as Waldspurger et al.
// ("Cache Modeling and Optimization using Miniature Simulations", USENIX
// ATC'17) tune a cache's parameters: one small cache per candidate weight,
// each fed the same hash-sampled stream of requests, ranking by Auto's
// score with its own weight; the weight of the cache with the most hits
// lately is the one the pool uses. The caches' hits are halved each time
// as many requests as a cache holds ids have been sampled: the choice
// follows the traffic within a few cache-fulls of requests, as a scan or
// a change of regime needs.
//
// Each simulated request costs O(log s) per weight for caches of s ids;
// the memory is O(s) per weight.
type Weights struct {
	// Cautious: a weight takes the place of a smaller one only if its
	// hits exceed that one's by more than their square root, the noise of
	// a count of hits; for a pool whose victims are not the simulated ids.
	Cautious bool

	sims      [len(SimWeights)]sim
	threshold uint64  // an id is sampled when its hash is at most threshold
	seen      float64 // sampled requests since the hits were last halved
	window    float64 // sampled requests per halving
}

// sim is one miniature cache: Auto's score with a fixed weight, in its
// own clock, the count of ids that entered it. An id used once stays size
// entries, so the weight in turnovers is span = w x size entries.
//
// Below it, if the pool has one, is a miniature of an exclusive tier below
// the pool: the cache's victims go there, the most recently demoted are
// kept, and a request that finds its id there is a hit and takes the id
// back up. The weight then chosen is the one whose cache and tier below
// together serve the most requests, as a GPU's over a host tier.
type sim struct {
	size  int
	span  float64 // entries of protection per doubling of requests
	clock int64   // ids that entered
	hits  float64 // requests that found their id, here or below, decayed
	slots idmap.Map[int32]
	heap  Heap
	below ghost.Counts // the tier below's ids, most recently demoted last; capacity 0 without one
}

// NewWeights returns the simulations for a pool of c ids above an
// exclusive tier of below ids (0: none), sampled at the same rate.
func NewWeights(c, below int) Weights {
	size := min(c, simSize)
	rate := float64(size) / float64(c)
	var w Weights
	w.threshold = math.MaxUint64
	if size < c {
		w.threshold = uint64(rate * (1 << 63) * 2)
	}
	w.window = float64(size)
	belowSize := int(math.Min(math.Ceil(rate*float64(max(below, 0))), simBelowMax)) // in floats: rate x below may pass an int
	for i := range w.sims {
		w.sims[i] = sim{size: size, span: SimWeights[i] * float64(size), below: ghost.New(belowSize)}
	}
	return w
}

// Access feeds a request for id, used 2^log2r times, to the simulations
// if id is in the sample.
func (w *Weights) Access(id uint64, log2r float32) {
	if w.Samples(id) {
		w.Record(id, log2r)
	}
}

// Samples reports whether requests for id go to the simulations. O(1).
func (w *Weights) Samples(id uint64) bool { return Mix64(id) <= w.threshold }

// Record feeds a request for id, which samples reports in the sample, to
// the simulations: for a caller that computes log2r only for those.
func (w *Weights) Record(id uint64, log2r float32) {
	for i := range w.sims {
		w.sims[i].access(id, log2r)
	}
	if w.seen++; w.seen >= w.window {
		w.seen = 0
		for i := range w.sims {
			w.sims[i].hits /= 2
		}
	}
}

// Weight returns the Weight, in turnovers per doubling, of the simulation
// with the most hits, the smallest among equals (or, Cautious, among
// those within noise of it): recency unless frequency has shown that it
// pays.
func (w *Weights) Weight() float64 { return SimWeights[w.Choice()] }

// Choice returns the index in autoSimWeights of weight's answer.
func (w *Weights) Choice() int {
	best := 0
	for i := range w.sims {
		margin := 0.0
		if w.Cautious {
			margin = math.Sqrt(w.sims[best].hits)
		}
		if w.sims[i].hits > w.sims[best].hits+margin {
			best = i
		}
	}
	return best
}

func (s *sim) access(id uint64, log2r float32) {
	slot, ok := s.slots.Get(id)
	if !ok {
		s.clock++
	}
	k := Key{Major: s.clock + int64(s.span*float64(log2r)), Minor: s.clock}
	if ok {
		s.hits++
		s.heap.Fix(slot, k, 1)
		return
	}
	// Every sampled request comes here: a pool with no tier below skips
	// the calls to it.
	below := s.below.Cap() > 0
	if below {
		if _, loaded := s.below.Take(id); loaded {
			s.hits++
		}
	}
	if s.heap.Len() < s.size {
		slot = int32(s.heap.Len())
		s.heap.Push(Entry{Key: k, ID: id, Slot: slot, Blocks: 1})
		s.slots.Put(id, slot)
		return
	}
	m := s.heap.Min()
	slot = m.Slot
	s.slots.Del(m.ID)
	if below {
		s.below.Put(m.ID, ghost.Count{}) // demoted
	}
	s.heap.Replace(slot, Entry{Key: k, ID: id, Slot: slot, Blocks: 1})
	s.slots.Put(id, slot)
}

// Mix64 is SplitMix64's finalizer, a bijection: a hash of id whose bits are uniform,
// so that a threshold samples ids at a rate.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Check reports a broken invariant of the miniature caches, for tests.
func (w *Weights) Check() error {
	for i := range w.sims {
		s := &w.sims[i]
		if s.heap.Len() > s.size || s.slots.Len() != s.heap.Len() {
			return fmt.Errorf("auto: miniature cache %d holds %d ids in its heap, %d indexed, at most %d",
				i, s.heap.Len(), s.slots.Len(), s.size)
		}
		if err := s.heap.Check(); err != nil {
			return fmt.Errorf("auto: miniature cache %d: %w", i, err)
		}
		if err := s.below.Check(); err != nil {
			return fmt.Errorf("auto: miniature cache %d's tier below: %w", i, err)
		}
		if !(s.hits >= 0) {
			return fmt.Errorf("auto: miniature cache %d: %v hits", i, s.hits)
		}
	}
	return nil
}
