package rank

import "math"

// Auto's score, written once: kvevict's Auto over a Policy's or an Index's
// sequences and package prefix's tree over its blocks both rank by Score,
// measure the turnover with [Turnover] and choose the weight with
// [Weights].

// Turnover measures the pool's turnover, Auto's W for a weight of
// one: the ticks in which as many ids enter the pool as it holds. Its
// clock is the entries, the requests for ids not resident; their rate is
// measured from the first eviction after one, the origin (entries, tick).
type Turnover struct {
	entries, originEntries, originTick int64
	hasOrigin                          bool
}

// Enter counts an id entering the pool. O(1).
func (t *Turnover) Enter() { t.entries++ }

// Evicting sets the origin at tick now, at the first eviction after an id
// entered. O(1).
func (t *Turnover) Evicting(now int64) {
	if !t.hasOrigin && t.entries > 0 {
		t.originEntries, t.originTick, t.hasOrigin = t.entries, now, true
	}
}

// Horizon returns Auto's W at tick now: weight times the ticks in which n
// ids enter the pool at the rate measured since the origin. It is 0,
// ranking by recency alone, until the clock and the entries have both
// moved. O(1).
func (t *Turnover) Horizon(weight float64, n int, now int64) float64 {
	if !t.hasOrigin {
		return 0
	}
	dt, de := now-t.originTick, t.entries-t.originEntries
	if de <= 0 || dt <= 0 {
		return 0
	}
	return weight * float64(n) * float64(dt) / float64(de)
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
	return float32(math.Log2(float64(max(requests, 1))))
}

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
