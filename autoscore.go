package kvevict

import (
	"errors"
	"fmt"
	"math"

	"github.com/sagellm/kvevict/internal/rank"
)

func init() { rank.RegisterHistory(newTreeHistory) }

// Auto's score, written once: the Policy's history ([auto]) and package
// prefix's tree (through [treeAuto]) both rank by these functions.

// autoMaxWeight bounds the odds of a tree that catches almost no reuse,
// keeping scores finite: requests first, recency second.
const autoMaxWeight = 1 << 16

// autoOdds is the odds that a reuse comes after an eviction: requests for
// evicted ids over requests for resident ones. 0 until an evicted id came
// back; at most autoMaxWeight.
func autoOdds(caught, missed float64) float64 {
	if missed == 0 {
		return 0
	}
	if caught*autoMaxWeight <= missed {
		return autoMaxWeight
	}
	return missed / caught
}

// autoHorizon is Auto's W: weight times the ticks in which n ids enter
// the pool, at the rate of de entries in dt ticks. It is 0, ranking by
// recency alone, until the clock and the entries have both moved.
func autoHorizon(weight float64, n int, dt, de int64) float64 {
	if de <= 0 || dt <= 0 {
		return 0
	}
	return weight * float64(n) * float64(dt) / float64(de)
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
// counts of evicted blocks ([WithHistoryCap] of them); treeAuto measures
// the entries, the reuse caught and missed, and keys blocks by autoScore.
// Keys are computed when a block is touched, with the weight of that
// moment.
type treeAuto struct {
	// entries counts requests for blocks not resident: the blocks
	// entering the tree, its own clock. origin is (entries, tick) at the
	// first eviction after one.
	entries, originEntries, originTick int64
	hasOrigin                          bool
	// Requests for resident blocks (caught) and for remembered evicted
	// ones (missed), halved together as [auto] halves them.
	caught, missed float64
	memoryCap      int
}

// newTreeHistory returns the History of strategy s for a prefix tree,
// configured by the options of [New] that apply to a tree: WithCapacity and
// WithSampling are refused. A strategy other than Auto returns an error
// matching [errors.ErrUnsupported].
func newTreeHistory(s string, opts ...Option) (rank.History, error) {
	info, cfg, err := resolve(Strategy(s), opts, forRanker)
	if err != nil {
		return nil, err
	}
	if info.name != Auto {
		return nil, fmt.Errorf("kvevict: a tree history of %q: %w: %q ranks by lists of sequences, which a tree of blocks does not keep", s, errors.ErrUnsupported, s)
	}
	return &treeAuto{memoryCap: cfg.historyCap}, nil
}

// Request counts a request for one block, as [auto.access] counts one for
// an id.
func (h *treeAuto) Request(resident, returned bool, n int) {
	switch {
	case resident:
		h.caught++
	case returned:
		h.entries++
		h.missed++
	default:
		h.entries++
		return
	}
	if h.caught+h.missed > float64(max(h.memoryCap, n)) {
		h.caught /= 2
		h.missed /= 2
	}
}

// Evicting sets the origin of the entry rate at the first eviction after
// a block entered, as [auto.horizon] does at the first selection.
func (h *treeAuto) Evicting(now int64) {
	if !h.hasOrigin && h.entries > 0 {
		h.originEntries, h.originTick, h.hasOrigin = h.entries, now, true
	}
}

// Weight returns W for a tree of n blocks at tick now. The tree weighs
// by the odds that a reuse comes after an eviction, not by [auto]'s
// miniature caches: Request carries no block hash, by which they sample,
// nor the block's count, by which they rank.
func (h *treeAuto) Weight(now int64, n int) float64 {
	if !h.hasOrigin {
		return 0
	}
	return autoHorizon(autoOdds(h.caught, h.missed), n, now-h.originTick, h.entries-h.originEntries)
}

// Key returns the block's key: Major the score, Minor the recency, as
// autoKey's for a full block.
func (h *treeAuto) Key(lastAccess int64, requests uint32, w float64) rank.Key {
	log2r := float32(math.Log2(float64(max(requests, 1))))
	return rank.Key{Major: autoScore(lastAccess, log2r, w), Minor: lastAccess}
}

// MemoryCap returns how many evicted blocks' counts the tree may remember.
func (h *treeAuto) MemoryCap() int { return h.memoryCap }
