package rank

import "time"

// PredictiveKey evicts the sequence whose KV cache will be useless soonest.
//
// Every candidate is ranked on one scale: the tick at which its KV is
// predicted to stop being useful, LastAccess + remaining, where remaining
// is, in ticks,
//   - EstimatedLifetime when the caller knows it (> 0);
//   - otherwise (1 - SeqLen/MaxLen) x horizon when MaxLen > 0: a sequence
//     near its maximum length will finish and stop being extended soon;
//   - otherwise the horizon (kvevict's WithLifetimeHorizon, 30s by
//     default), which among such candidates is plain LRU.
//
// So a known lifetime ranks before an unknown one exactly when it ends
// sooner than the horizon would, and the key does not depend on the current
// time, only on the candidate. Ties break by LastAccess, then ID.
func PredictiveKey(lastAccess int64, lifetime time.Duration, seqLen, maxLen int, p *Params) Key {
	if k, ok := PredictiveKeyFast(lastAccess, lifetime, seqLen, maxLen, p); ok {
		return k
	}
	return predictiveKeyGeneral(lastAccess, lifetime, seqLen, maxLen, p)
}

// predictiveKeyGeneral is PredictiveKey for every candidate, saturating
// where the ticks would overflow.
func predictiveKeyGeneral(lastAccess int64, lifetime time.Duration, seqLen, maxLen int, p *Params) Key {
	var remaining int64
	switch {
	case lifetime > 0:
		remaining = saturatingTicks(float64(lifetime) / p.tickNanos)
	case maxLen > 0:
		done := min(float64(seqLen)/float64(maxLen), 1)
		remaining = saturatingTicks((1 - done) * float64(p.horizonTicks))
	default:
		remaining = p.horizonTicks
	}
	return Key{Major: SaturatingAdd(lastAccess, remaining), Minor: lastAccess}
}

// PredictiveKeyFast is PredictiveKey for a candidate with a known lifetime
// or length whose remaining ticks need no saturation, kept small enough
// that a selection loop inlines it; ok is false for every other case.
// Where ok, it equals predictiveKeyGeneral.
func PredictiveKeyFast(lastAccess int64, lifetime time.Duration, seqLen, maxLen int, p *Params) (k Key, ok bool) {
	var remaining float64
	switch {
	case lifetime > 0:
		remaining = float64(lifetime) / p.tickNanos
	case maxLen > 0:
		remaining = (1 - min(float64(seqLen)/float64(maxLen), 1)) * float64(p.horizonTicks)
	default:
		return Key{}, false
	}
	if !(remaining < 1<<62) || lastAccess > 1<<62 {
		return Key{}, false
	}
	return Key{Major: lastAccess + int64(remaining), Minor: lastAccess}, true
}
