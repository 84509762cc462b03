package kvevict

import (
	"errors"
	"fmt"
	"math"

	"github.com/sagellm/kvevict/internal/rank"
)

func init() { rank.RegisterHistory(newTreeHistory) }

// Auto's score, written once: the Policy's history ([auto]) and package
// prefix's tree (through [treeAuto]) both rank by these functions, measure
// the turnover with [autoTurnover] and choose the weight with
// [autoWeights].

// autoTurnover measures the pool's turnover, Auto's W for a weight of
// one: the ticks in which as many ids enter the pool as it holds. Its
// clock is the entries, the requests for ids not resident; their rate is
// measured from the first eviction after one, the origin (entries, tick).
type autoTurnover struct {
	entries, originEntries, originTick int64
	hasOrigin                          bool
}

// enter counts an id entering the pool. O(1).
func (t *autoTurnover) enter() { t.entries++ }

// evicting sets the origin at tick now, at the first eviction after an id
// entered. O(1).
func (t *autoTurnover) evicting(now int64) {
	if !t.hasOrigin && t.entries > 0 {
		t.originEntries, t.originTick, t.hasOrigin = t.entries, now, true
	}
}

// horizon returns Auto's W at tick now: weight times the ticks in which n
// ids enter the pool at the rate measured since the origin. It is 0,
// ranking by recency alone, until the clock and the entries have both
// moved. O(1).
func (t *autoTurnover) horizon(weight float64, n int, now int64) float64 {
	if !t.hasOrigin {
		return 0
	}
	dt, de := now-t.originTick, t.entries-t.originEntries
	if de <= 0 || dt <= 0 {
		return 0
	}
	return weight * float64(n) * float64(dt) / float64(de)
}

// autoLog2 is log2(requests) for a count of at least one: the score's
// measure of frequency.
func autoLog2(requests uint32) float32 {
	return float32(math.Log2(float64(max(requests, 1))))
}

// autoScore is Auto's score of an id last accessed at lastAccess and
// requested 2^log2r times, under horizon w: lastAccess + w x log2r,
// saturating at math.MaxInt64.
func autoScore(lastAccess int64, log2r float32, w float64) int64 {
	bonus := w * float64(log2r)
	if bonus >= 1<<62 {
		return math.MaxInt64
	}
	return saturatingAdd(lastAccess, int64(bonus))
}

// treeAuto is Auto's [rank.History] for package prefix's tree: the
// measurements [auto] makes over a policy's ids, made over the tree's
// blocks. The tree keeps each block's request count and remembers the
// counts of evicted blocks ([WithGhostCap] of them); treeAuto counts the
// blocks entering, feeds every request to the miniature caches by the
// block's hash, sized for the tree's capacity in blocks, and keys blocks
// by autoScore. Keys are computed when a block is touched, with the weight
// of that moment.
type treeAuto struct {
	turnover  autoTurnover
	weights   autoWeights // the miniature caches that choose the weight
	memoryCap int
	horizons  [len(autoSimWeights)]float64 // Horizons' answer
}

// newTreeHistory returns the History of strategy s for a prefix tree of
// capacity blocks (0: [WithCapacity]'s default), which sizes the miniature
// caches, configured by the options of [New] that apply to a tree. A
// strategy other than Auto returns an error matching
// [errors.ErrUnsupported].
func newTreeHistory(s string, capacity int, opts ...Option) (rank.History, error) {
	info, cfg, err := resolve(Strategy(s), opts, forRanker)
	if err != nil {
		return nil, err
	}
	if capacity > 0 {
		cfg.capacity = capacity
	}
	if info.name != Auto {
		return nil, fmt.Errorf("kvevict: a tree history of %q: %w: %q ranks by lists of sequences, which a tree of blocks does not keep", s, errors.ErrUnsupported, s)
	}
	return &treeAuto{weights: newAutoWeights(cfg.capacity), memoryCap: cfg.ghostCap}, nil
}

// Request counts a request for one block, as [auto.access] counts one for
// an id: an entry if the block was not resident, and a request of the
// miniature caches if its hash is in their sample, in O(log s) for caches
// of s ids, else O(1).
func (h *treeAuto) Request(hash uint64, requests uint32, resident bool) {
	if !resident {
		h.turnover.enter()
	}
	if h.weights.samples(hash) {
		h.weights.record(hash, autoLog2(requests))
	}
}

// Evicting sets the origin of the entry rate at the first eviction after
// a block entered, as [auto.horizon] does at the first selection.
func (h *treeAuto) Evicting(now int64) { h.turnover.evicting(now) }

// Horizons returns the horizon W of each weight the miniature caches
// simulate, for a tree of n blocks at tick now, and the index of the one
// they choose.
func (h *treeAuto) Horizons(now int64, n int) (horizons []float64, chosen int) {
	for i, w := range autoSimWeights {
		h.horizons[i] = h.turnover.horizon(w, n, now)
	}
	return h.horizons[:], h.weights.choice()
}

// Key returns the block's key: Major the score, Minor the recency, as
// autoKey's for a full block.
func (h *treeAuto) Key(lastAccess int64, requests uint32, w float64) rank.Key {
	return rank.Key{Major: autoScore(lastAccess, autoLog2(requests), w), Minor: lastAccess}
}

// MemoryCap returns how many evicted blocks' counts the tree may remember.
func (h *treeAuto) MemoryCap() int { return h.memoryCap }

// Check reports a broken invariant of the miniature caches, for tests.
func (h *treeAuto) Check() error { return h.weights.check() }
