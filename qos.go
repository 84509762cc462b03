package kvevict

import "github.com/sagellm/kvevict/internal/rank"

// qosKey evicts lower Priority first and, within a priority, the least
// recently used. A high-priority tenant loses blocks only when no
// lower-priority sequence can be evicted.
func qosKey(c *Candidate, _ *keyParams) rank.Key {
	return rank.Key{Major: int64(c.Priority), Minor: c.LastAccess}
}
