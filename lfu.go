package kvevict

import (
	"math"

	"github.com/sagellm/kvevict/internal/rank"
)

// lfuKey evicts the least frequently used sequence first: (AccessCount,
// LastAccess), so equal counts fall back to LRU.
//
// With a half-life h (see [WithLFUHalfLife]) the count decays: a sequence
// idle for t is worth AccessCount x 2^(-t/h). Comparing that at a common
// "now" is comparing log2(AccessCount) + LastAccess/h, which does not depend
// on now, so the key is stable between calls. The count is aged from
// LastAccess as a whole, an approximation that needs no per-access history.
func lfuKey(c *Candidate, p *keyParams) rank.Key {
	if k, ok := lfuKeyFast(c, p); ok {
		return k
	}
	return decayedLFUKey(c, p)
}

// lfuKeyFast is lfuKey without decay, small enough to inline into the
// selection's loop; ok is false when keys decay.
func lfuKeyFast(c *Candidate, p *keyParams) (k rank.Key, ok bool) {
	return rank.Key{Major: int64(c.AccessCount), Minor: c.LastAccess}, p.lfuHalfLifeTicks == 0
}

// decayedLFUKey is lfuKey with a half-life, kept apart so that the plain
// key stays small enough to inline.
func decayedLFUKey(c *Candidate, p *keyParams) rank.Key {
	score := math.Inf(-1) // never accessed: below any decayed count
	if c.AccessCount > 0 {
		score = math.Log2(float64(c.AccessCount)) + float64(c.LastAccess)/p.lfuHalfLifeTicks
	}
	return rank.Key{Major: orderedFloat(score), Minor: c.LastAccess}
}
