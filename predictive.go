package kvevict

import "github.com/sagellm/kvevict/internal/rank"

// predictiveKey evicts the sequence whose KV cache will be useless soonest.
//
// Every candidate is ranked on one scale: the tick at which its KV is
// predicted to stop being useful, LastAccess + remaining, where remaining
// is, in ticks,
//   - EstimatedLifetime when the caller knows it (> 0);
//   - otherwise (1 - SeqLen/MaxLen) x horizon when MaxLen > 0: a sequence
//     near its maximum length will finish and stop being extended soon;
//   - otherwise the horizon ([WithLifetimeHorizon], 30s by default), which
//     among such candidates is plain LRU.
//
// So a known lifetime ranks before an unknown one exactly when it ends
// sooner than the horizon would, and the key does not depend on the current
// time, only on the candidate. Ties break by LastAccess, then ID.
func predictiveKey(c *Candidate, p *keyParams) rank.Key {
	if k, ok := predictiveKeyFast(c, p); ok {
		return k
	}
	return predictiveKeyGeneral(c, p)
}

// predictiveKeyGeneral is predictiveKey for every candidate, saturating
// where the ticks would overflow.
func predictiveKeyGeneral(c *Candidate, p *keyParams) rank.Key {
	var remaining int64
	switch {
	case c.EstimatedLifetime > 0:
		remaining = saturatingTicks(float64(c.EstimatedLifetime) / p.tickNanos)
	case c.MaxLen > 0:
		done := min(float64(c.SeqLen)/float64(c.MaxLen), 1)
		remaining = saturatingTicks((1 - done) * float64(p.horizonTicks))
	default:
		remaining = p.horizonTicks
	}
	return rank.Key{Major: saturatingAdd(c.LastAccess, remaining), Minor: c.LastAccess}
}

// predictiveKeyFast is predictiveKey for a candidate with a known lifetime
// or length whose remaining ticks need no saturation, kept small enough
// that the selection loop inlines it; ok is false for every other case.
// Where ok, it equals predictiveKeyGeneral.
func predictiveKeyFast(c *Candidate, p *keyParams) (k rank.Key, ok bool) {
	var remaining float64
	switch {
	case c.EstimatedLifetime > 0:
		remaining = float64(c.EstimatedLifetime) / p.tickNanos
	case c.MaxLen > 0:
		remaining = (1 - min(float64(c.SeqLen)/float64(c.MaxLen), 1)) * float64(p.horizonTicks)
	default:
		return rank.Key{}, false
	}
	if !(remaining < 1<<62) || c.LastAccess > 1<<62 {
		return rank.Key{}, false
	}
	return rank.Key{Major: c.LastAccess + int64(remaining), Minor: c.LastAccess}, true
}

// saturatingAdd returns a+b for b >= 0, clamped at math.MaxInt64.
func saturatingAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}
