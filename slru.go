package kvevict

import "github.com/sagellm/kvevict/internal/rank"

// slruKey is segmented LRU as SGLang's radix cache ranks it: sequences seen
// fewer than threshold times (probationary) go before those seen at least
// threshold times (protected), and each segment is LRU. One-hit sequences,
// like a scan, cannot push out the reused ones.
func slruKey(c *Candidate, p *keyParams) rank.Key {
	var protected int64
	if c.AccessCount >= p.slruThreshold {
		protected = 1
	}
	return rank.Key{Major: protected, Minor: c.LastAccess}
}
