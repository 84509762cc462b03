package sim

import (
	"math"

	"github.com/sagellm/kvevict/internal/dlist"
	"github.com/sagellm/kvevict/internal/rank"
)

// PooledBound returns an upper bound on the hit ratio that any set of
// caches holding cfg.Capacity blocks in all can reach on w, however its
// requests are routed among them and whatever they evict: the hit ratio
// of Belady's MIN on one pool of that many blocks, with two changes that
// make it a bound where [Belady] is not. Every block of a request found in
// the pool counts as a hit, not only the longest resident prefix; and a
// block need not be cached when it is referenced (bypass), so after each
// request the pool keeps, of what it held and the request's blocks, those
// whose next reference comes soonest. That choice is optimal for
// same-size blocks by Belady's exchange argument, and a cluster of engines
// is one such pool: its engines together hold at most Capacity blocks, a
// block enters one only when a request routed there references it, and a
// prefix hit there is a block held before the request. [ClusterReport]'s
// HitRatio is therefore never above it. O(R log c) for R block references
// at capacity c.
func PooledBound(w *Workload, cfg Config) (float64, error) {
	if err := cfg.validate(w); err != nil {
		return 0, err
	}
	capacity := cfg.Capacity
	uniq, next := nextUses(w, math.MaxInt32)
	// The pool, in the one indexed heap, keyed so that the smallest is the
	// furthest next use (ties: the smaller hash).
	resident := make(map[uint64]int32)
	var h rank.Heap
	var slots dlist.Slots
	var hits, refs int64
	for r := range w.Requests {
		req := &w.Requests[r]
		for _, b := range req.HashIDs {
			if _, ok := resident[b]; ok {
				hits++
			}
		}
		refs += int64(len(req.HashIDs))
		for j, b := range uniq[r] {
			k := rank.Key{Major: -int64(next[r][j])}
			if slot, ok := resident[b]; ok {
				h.Fix(slot, k, 1)
				continue
			}
			if next[r][j] == math.MaxInt {
				continue // never referenced again: bypassed
			}
			if len(resident) == capacity {
				far := h.Min()
				if -far.Major <= int64(next[r][j]) {
					continue // every block held comes back sooner: bypassed
				}
				delete(resident, far.ID)
				slots.Free(far.Slot)
				h.Remove(far.Slot)
			}
			slot, _ := slots.Alloc()
			resident[b] = slot
			h.Push(rank.Entry{Key: k, ID: b, Slot: slot, Blocks: 1})
		}
		cfg.progress(r+1, len(w.Requests))
	}
	if refs == 0 {
		return 0, nil
	}
	return float64(hits) / float64(refs), nil
}
