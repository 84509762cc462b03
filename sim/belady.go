package sim

import (
	"container/heap"
	"math"

	"github.com/sagellm/kvevict/internal/unitcache"
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
// unbounded ceiling as capacity grows. O(R log R) for R block references.
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
	t := newTally(w, computeCeiling(w))
	resident := make(map[uint64]int, residentBound(w, capacity)) // hash -> its next use
	h := &futureHeap{}
	isResident := func(b uint64) bool { _, ok := resident[b]; return ok }
	for r := range w.Requests {
		req := &w.Requests[r]
		t.request(r, prefixHits(req.HashIDs, isResident))
		for j, b := range req.HashIDs {
			if _, again := t.reference(b); again {
				t.reprefillTokens += int64(blockTokens(req, j, w.BlockTokens))
			}
		}
		missing := 0
		for _, b := range uniq[r] {
			if !isResident(b) {
				missing++
			}
		}
		// This request's resident blocks have their next use at r, the
		// nearest of all, so they leave the heap only after every other
		// block; the truncation to capacity means that never happens.
		for need := missing - (capacity - len(resident)); need > 0; {
			e := heap.Pop(h).(future)
			if at, ok := resident[e.hash]; !ok || at != e.at {
				continue // stale: evicted or referenced since
			}
			delete(resident, e.hash)
			t.evict(e.hash, 0)
			need--
		}
		t.loads += int64(missing)
		for j, b := range uniq[r] {
			resident[b] = next[r][j]
			heap.Push(h, future{at: next[r][j], hash: b})
		}
		t.utilization(len(resident), capacity)
		if h.Len() > 4*capacity {
			h.compact(resident)
		}
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
	seen := make(map[uint64]struct{})
	for r := range w.Requests {
		uniq[r] = unitcache.Distinct(w.Requests[r].HashIDs, capacity, nil, seen)
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

// future is a resident block and the request that will next reference it.
type future struct {
	at   int
	hash uint64
}

// futureHeap is a max-heap on (at, -hash) with lazy deletion: entries whose
// at no longer matches the resident map are stale and skipped.
type futureHeap []future

func (h futureHeap) Len() int { return len(h) }
func (h futureHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at > h[j].at
	}
	return h[i].hash < h[j].hash
}
func (h futureHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *futureHeap) Push(x any)   { *h = append(*h, x.(future)) }
func (h *futureHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// compact drops stale entries, bounding the heap at O(capacity).
func (h *futureHeap) compact(resident map[uint64]int) {
	live := (*h)[:0]
	for _, e := range *h {
		if at, ok := resident[e.hash]; ok && at == e.at {
			live = append(live, e)
		}
	}
	*h = live
	heap.Init(h)
}
