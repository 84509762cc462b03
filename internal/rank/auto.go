package rank

import "math"

// Auto's score, written once: kvevict's Auto over a Policy's or an Index's
// sequences and package prefix's tree over its blocks both rank by Score,
// measure the turnover with [Turnover] and choose the weight with
// [Weights].

// Turnover measures the pool's turnover, Auto's W for a weight of
// one: the ticks in which the pool evicts as many blocks as it holds, the
// time a block requested once stays in an LRU pool of that size. Its clock
// is the blocks evicted, counted from the first eviction, the origin. It
// is counted in blocks whatever a candidate is (a block, a sequence, a
// tail) and whatever names it, so that the pool's size and its clock are
// in one unit.
type Turnover struct {
	evicted, originTick int64
	hasOrigin           bool
}

// Evicted counts an eviction of blocks at tick now; the first sets the
// origin. O(1).
func (t *Turnover) Evicted(now int64, blocks int) {
	if !t.hasOrigin {
		t.originTick, t.hasOrigin = now, true
	}
	t.evicted += int64(blocks)
}

// Horizon returns Auto's W at tick now: weight times the ticks in which
// the pool evicts n blocks at the rate measured since the origin, for a
// pool that holds n evictable blocks. It is 0, ranking by recency alone,
// until the clock has moved past an eviction. O(1).
func (t *Turnover) Horizon(weight float64, n int, now int64) float64 {
	if !t.hasOrigin {
		return 0
	}
	dt := now - t.originTick
	if t.evicted <= 0 || dt <= 0 {
		return 0
	}
	return weight * float64(n) * float64(dt) / float64(t.evicted)
}

// AddRequest returns requests + 1, saturating at math.MaxUint32: how Auto
// counts a request, over sequences and over a tree's blocks.
func AddRequest(requests uint32) uint32 {
	if requests < math.MaxUint32 {
		requests++
	}
	return requests
}

// Log2Requests is log2(requests) for a count of at least one: the score's
// measure of frequency.
func Log2Requests(requests uint32) float32 {
	if requests < uint32(len(log2Small)) {
		return log2Small[requests]
	}
	return log2Requests(requests)
}

func log2Requests(requests uint32) float32 {
	return float32(math.Log2(float64(max(requests, 1))))
}

// log2Small holds Log2Requests of the small counts that nearly every
// request has: a load where math.Log2 took a tenth of Auto's UpdateAccess.
var log2Small = func() (t [1024]float32) {
	for r := range t {
		t[r] = log2Requests(uint32(r))
	}
	return t
}()

// Score is Auto's score of an id last accessed at lastAccess and
// requested 2^log2r times, under horizon w: lastAccess + w x log2r,
// saturating at math.MaxInt64.
func Score(lastAccess int64, log2r float32, w float64) int64 {
	bonus := w * float64(log2r)
	if bonus >= 1<<62 {
		return math.MaxInt64
	}
	return SaturatingAdd(lastAccess, int64(bonus))
}
