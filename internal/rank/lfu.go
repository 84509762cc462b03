package rank

import "math"

// LFUKey evicts the least frequently used sequence first: (AccessCount,
// LastAccess), so equal counts fall back to LRU.
//
// With a half-life h (kvevict's WithLFUHalfLife) the count decays: a
// sequence idle for t is worth AccessCount x 2^(-t/h). Comparing that at a
// common "now" is comparing log2(AccessCount) + LastAccess/h, which does
// not depend on now, so the key is stable between calls. The count is aged
// from LastAccess as a whole, an approximation that needs no per-access
// history.
func LFUKey(accessCount int, lastAccess int64, p *Params) Key {
	if k, ok := LFUKeyFast(accessCount, lastAccess, p); ok {
		return k
	}
	return decayedLFUKey(accessCount, lastAccess, p)
}

// LFUKeyFast is LFUKey without decay, small enough to inline into a
// selection's loop; ok is false when keys decay.
func LFUKeyFast(accessCount int, lastAccess int64, p *Params) (k Key, ok bool) {
	return Key{Major: int64(accessCount), Minor: lastAccess}, p.lfuHalfLifeTicks == 0
}

// decayedLFUKey is LFUKey with a half-life, kept apart so that the plain
// key stays small enough to inline.
func decayedLFUKey(accessCount int, lastAccess int64, p *Params) Key {
	score := math.Inf(-1) // never accessed: below any decayed count
	if accessCount > 0 {
		score = math.Log2(float64(accessCount)) + float64(lastAccess)/p.lfuHalfLifeTicks
	}
	return Key{Major: orderedFloat(score), Minor: lastAccess}
}
