package prefix

import "github.com/sagellm/kvevict/internal/rank"

// measurements score blocks for a strategy that ranks by what it measures
// of the requests rather than by a key over a candidate's fields
// (kvevict's Auto), for a structure that keeps the per-block counts itself
// (this tree: each block's request count, and the bounded ghosts, the
// counts of evicted blocks). The structure reports every request and every
// eviction; the measurements take from them what the strategy measures
// (how fast blocks leave, which weight of frequency would have hit most)
// and turn a block's recency and request count into a Key, by the same
// functions the strategy's Policy ranks with.
//
// Measurements are not safe for concurrent use: the structure's lock
// guards them.
type measurements interface {
	// Request records a request for one block: its hash, by which the
	// measurements sample the blocks they simulate, its requests counted with
	// this one (at least 1, including those remembered from before an
	// eviction), and whether the structure held it. O(log s) for a block
	// the measurements simulate, s being the simulated cache's size; O(1) for
	// the others.
	Request(hash uint64, requests uint32)
	// Evicted records an eviction of blocks at tick now: the rate at which
	// blocks leave is measured from the first. O(1).
	Evicted(now int64, blocks int)
	// Horizons returns the horizon of each weight the measurements simulate,
	// in ticks at tick now for a structure of n blocks, and the index of
	// the weight it chooses. A structure keeps one order of its blocks per
	// weight, each keyed by that weight's horizon when a block is touched,
	// and evicts from the order of the weight chosen: the choice may change
	// from one eviction to the next, and a block keyed under an earlier
	// choice would otherwise keep that choice's key. The slice is the
	// measurements' own, of the same length at every call, valid until the
	// next. O(weights).
	Horizons(now int64, n int) (horizons []float64, chosen int)
	// Key returns the key of a block last accessed at lastAccess and
	// requested requests times (at least 1), under horizon w. O(1).
	Key(lastAccess int64, requests uint32, w float64) rank.Key
	// GhostCap is how many evicted blocks' counts the structure may
	// remember: kvevict.WithGhostCap. O(1).
	GhostCap() int
}

// treeAuto is [kvevict.Auto]'s measurements for a tree: those
// Auto makes over a policy's ids, made over the tree's
// blocks. The tree keeps each block's request count and remembers the
// counts of evicted blocks ([kvevict.WithGhostCap] of them); treeAuto counts the
// blocks evicted, feeds every request to the miniature caches by the
// block's hash, sized for the tree's capacity in blocks, and keys blocks
// by [rank.Score]. Keys are computed when a block is touched, with the weight
// of that moment.
type treeAuto struct {
	turnover rank.Turnover
	weights  rank.Weights // the miniature caches that choose the weight
	ghostCap int
	horizons [len(rank.SimWeights)]float64 // Horizons' answer
}

// newTreeAuto returns Auto's measurements for a tree of capacity blocks, which
// sizes the miniature caches, remembering the counts of ghostCap evicted
// blocks.
func newTreeAuto(capacity, ghostCap int) *treeAuto {
	return &treeAuto{weights: rank.NewWeights(capacity, 0), ghostCap: ghostCap}
}

// Request counts a request for one block, as Auto counts one for a
// sequence: a request of the miniature caches if its hash is in their
// sample, in O(log s) for caches of s ids, else O(1).
func (h *treeAuto) Request(hash uint64, requests uint32) {
	if h.weights.Samples(hash) {
		h.weights.Record(hash, rank.Log2Requests(requests))
	}
}

// Evicted counts the blocks of an eviction, as Auto counts its victims'.
func (h *treeAuto) Evicted(now int64, blocks int) { h.turnover.Evicted(now, blocks) }

// Horizons returns the horizon W of each weight the miniature caches
// simulate, for a tree of n blocks at tick now, and the index of the one
// they choose.
func (h *treeAuto) Horizons(now int64, n int) (horizons []float64, chosen int) {
	for i, w := range rank.SimWeights {
		h.horizons[i] = h.turnover.Horizon(w, n, now)
	}
	return h.horizons[:], h.weights.Choice()
}

// Key returns the block's key: Major the score, Minor the recency, as
// Auto's for a sequence.
func (h *treeAuto) Key(lastAccess int64, requests uint32, w float64) rank.Key {
	return rank.Key{Major: rank.Score(lastAccess, rank.Log2Requests(requests), w), Minor: lastAccess}
}

// GhostCap returns how many evicted blocks' counts the tree may remember.
func (h *treeAuto) GhostCap() int { return h.ghostCap }

// Check reports a broken invariant of the miniature caches, for tests.
func (h *treeAuto) Check() error { return h.weights.Check() }
