package kvevict

import "github.com/sagellm/kvevict/internal/rank"

// lruKey evicts the least recently used sequence first: the one whose
// LastAccess is oldest. The classic choice when reuse is recent-biased, as
// in multi-turn chat.
func lruKey(c *Candidate, _ *keyParams) rank.Key {
	return rank.Key{Major: c.LastAccess}
}

// mruKey evicts the most recently used sequence first. It suits cyclic scans
// larger than the cache, where the newest entry is the one needed last.
// ^x is -x-1: order-reversing without overflow at math.MinInt64.
func mruKey(c *Candidate, _ *keyParams) rank.Key {
	return rank.Key{Major: ^c.LastAccess}
}
