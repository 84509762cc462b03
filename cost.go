package kvevict

import (
	"math"

	"github.com/sagellm/kvevict/internal/rank"
)

// costKey ranks by retention value, the smallest evicted first:
//
//	retention = AccessCount x len(Blocks)^alpha / (1 + decay x age_seconds)
//
// A frequently reused, long sequence is both likely to be needed again and
// expensive to re-prefill, so it is kept; alpha ([WithCostAlpha], default 2)
// weighs the cost, decay ([WithCostDecay], default 0) forgets idle
// sequences. age is the time since LastAccess at the call's current tick,
// the largest LastAccess among its candidates (time comes in on the
// candidates). Equal retentions, such as every never-reused sequence, break
// by LastAccess, then ID.
//
// This multiplies by the count, as vLLM RFC #23641 intends; dividing by it
// would evict the hottest prefixes first.
func costKey(c *Candidate, p *keyParams) rank.Key {
	if k, ok := costKeyFast(c, p); ok {
		return k
	}
	return costKeyGeneral(c, p)
}

// costKeyGeneral is costKey for every candidate.
func costKeyGeneral(c *Candidate, p *keyParams) rank.Key {
	if c.AccessCount == 0 {
		// Zero, not 0 x b^alpha, which is NaN when b^alpha overflows.
		return rank.Key{Minor: c.LastAccess}
	}
	retention := float64(c.AccessCount) * blockCost(len(c.Blocks), p)
	if p.costDecayPerTick > 0 {
		age := float64(max(p.now-c.LastAccess, 0))
		retention /= 1 + p.costDecayPerTick*age
	}
	return rank.Key{Major: orderedFloat(retention), Minor: c.LastAccess}
}

// costKeyFast is costKey for the common case, a reused sequence shorter
// than the power table without decay, kept small enough that the selection
// loop inlines it; ok is false for every other case. Where ok, it equals
// costKeyGeneral: the retention is not negative, so its float bits already
// order as an integer, as orderedFloat would make them.
func costKeyFast(c *Candidate, p *keyParams) (k rank.Key, ok bool) {
	b := len(c.Blocks)
	if b >= len(p.costPow) || c.AccessCount == 0 || p.usesNow {
		return rank.Key{}, false
	}
	return rank.Key{Major: int64(math.Float64bits(float64(c.AccessCount) * p.costPow[b])), Minor: c.LastAccess}, true
}

// blockCost is b^alpha, from a table for small b.
func blockCost(b int, p *keyParams) float64 {
	if b < len(p.costPow) {
		return p.costPow[b]
	}
	return math.Pow(float64(b), p.costAlpha)
}
