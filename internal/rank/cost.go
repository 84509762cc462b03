package rank

import "math"

// CostKey ranks by retention value, the smallest evicted first:
//
//	retention = AccessCount x blocks^alpha / (1 + decay x age_seconds)
//
// A frequently reused, long sequence is both likely to be needed again and
// expensive to re-prefill, so it is kept; alpha (kvevict's WithCostAlpha,
// default 2) weighs the cost, decay (WithCostDecay, default 0) forgets idle
// sequences. age is the time since lastAccess at tick now, the call's
// current tick (time comes in on the candidates). Equal retentions, such as
// every never-reused sequence, break by LastAccess, then ID.
//
// This multiplies by the count, as vLLM RFC #23641 intends; dividing by it
// would evict the hottest prefixes first.
func CostKey(accessCount, blocks int, lastAccess, now int64, p *Params) Key {
	if k, ok := CostKeyFast(accessCount, blocks, lastAccess, p); ok {
		return k
	}
	return costKeyGeneral(accessCount, blocks, lastAccess, now, p)
}

// costKeyGeneral is CostKey for every candidate.
func costKeyGeneral(accessCount, blocks int, lastAccess, now int64, p *Params) Key {
	if accessCount == 0 {
		// Zero, not 0 x b^alpha, which is NaN when b^alpha overflows.
		return Key{Minor: lastAccess}
	}
	retention := float64(accessCount) * blockCost(blocks, p)
	if p.costDecayPerTick > 0 {
		age := float64(max(now-lastAccess, 0))
		retention /= 1 + p.costDecayPerTick*age
	}
	return Key{Major: orderedFloat(retention), Minor: lastAccess}
}

// CostKeyFast is CostKey for the common case, a reused sequence shorter
// than the power table without decay, kept small enough that a selection
// loop inlines it; ok is false for every other case. Where ok, it equals
// costKeyGeneral: the retention is not negative, so its float bits already
// order as an integer, as orderedFloat would make them.
func CostKeyFast(accessCount, blocks int, lastAccess int64, p *Params) (k Key, ok bool) {
	if blocks >= len(p.costPow) || accessCount == 0 || p.usesNow {
		return Key{}, false
	}
	return Key{Major: int64(math.Float64bits(float64(accessCount) * p.costPow[blocks])), Minor: lastAccess}, true
}

// blockCost is b^alpha, from a table for small b.
func blockCost(b int, p *Params) float64 {
	if b < len(p.costPow) {
		return p.costPow[b]
	}
	return math.Pow(float64(b), p.costAlpha)
}
