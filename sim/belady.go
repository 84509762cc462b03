package sim

import (
	"math"

	"github.com/sagellm/kvevict/internal/dlist"
	"github.com/sagellm/kvevict/internal/idmap"
	"github.com/sagellm/kvevict/internal/rank"
)

// Belady replays w like [Replay] but evicts, offline, the resident block
// whose next reference is furthest in the future (never referenced again
// counts as furthest; ties evict the smaller hash first): Belady's MIN,
// the bound every report shows beside the strategies.
//
// MIN loads the fewest blocks of any eviction order under the same replay
// rules; that is what it provably optimises. Hits here count only the
// longest resident prefix, so a strategy that evicts leaves first can keep
// a block MIN drops and score a prefix hit MIN misses: auto does on the
// multiturn workload at small pools (docs/workloads.md). On the Mooncake
// trace MIN's hit ratio is far above every online strategy and meets the
// unbounded ceiling as capacity grows. O(R log c) for R block references
// at capacity c.
func Belady(w *Workload, cfg Config) (Report, error) {
	return belady(w, cfg, nil)
}

// belady is Belady, also storing the blocks it loaded in loads if not nil.
func belady(w *Workload, cfg Config, loads *int64) (Report, error) {
	if err := cfg.validate(w); err != nil {
		return Report{}, err
	}
	capacity := cfg.Capacity
	uniq, next := nextUses(w, capacity)
	ceil := computeCeiling(w)
	t := newTally(w, ceil)
	// The resident blocks, in the one indexed heap, keyed so that the
	// smallest is the furthest next use (ties: the smaller hash); sized for
	// the most the pool can hold, which keeps memory with the workload.
	resident := make(map[uint64]int32, min(capacity, ceil.distinct)) // hash -> its slot in h
	var h rank.Heap
	var slots dlist.Slots
	isResident := func(b uint64) bool { _, ok := resident[b]; return ok }
	for r := range w.Requests {
		req := &w.Requests[r]
		t.request(r, prefixHits(req.HashIDs, isResident))
		for j, b := range req.HashIDs {
			if _, again := t.evictions.Access(b); again {
				t.rePrefillTokens += int64(blockTokens(req, j, w.BlockTokens))
			}
		}
		missing := 0
		for _, b := range uniq[r] {
			if !isResident(b) {
				missing++
			}
		}
		// This request's resident blocks still have their next use at r,
		// the nearest of all, so they leave the heap only after every
		// other block; the truncation to capacity means that never happens.
		for need := missing - (capacity - len(resident)); need > 0; need-- {
			e := *h.Min()
			h.Remove(e.Slot)
			delete(resident, e.ID)
			slots.Free(e.Slot)
			t.evictions.Evict(e.ID, 0)
		}
		t.loads += int64(missing)
		for j, b := range uniq[r] {
			k := rank.Key{Major: -int64(next[r][j])}
			if slot, ok := resident[b]; ok {
				h.Fix(slot, k, 1)
				continue
			}
			slot, _ := slots.Alloc()
			resident[b] = slot
			h.Push(rank.Entry{Key: k, ID: b, Slot: slot, Blocks: 1})
		}
		t.utilization(len(resident), capacity)
		cfg.progress(r+1, len(w.Requests))
	}
	if loads != nil {
		*loads = t.loads
	}
	return t.report(BeladyName, "replay", capacity), nil
}

// nextUses returns each request's distinct blocks (at most capacity, as
// Replay keeps them) and, for each, the index of the next request that
// references it, or math.MaxInt.
func nextUses(w *Workload, capacity int) (uniq [][]uint64, next [][]int) {
	uniq = make([][]uint64, len(w.Requests))
	next = make([][]int, len(w.Requests))
	var seen idmap.Map[struct{}]
	for r := range w.Requests {
		uniq[r] = idmap.Distinct(w.Requests[r].HashIDs, capacity, nil, &seen)
	}
	last := make(map[uint64]int)
	for r := len(w.Requests) - 1; r >= 0; r-- {
		next[r] = make([]int, len(uniq[r]))
		for j, b := range uniq[r] {
			at, ok := last[b]
			if !ok {
				at = math.MaxInt
			}
			next[r][j] = at
		}
		// A request references all of HashIDs, not only the kept ones.
		for _, b := range w.Requests[r].HashIDs {
			last[b] = r
		}
	}
	return uniq, next
}
