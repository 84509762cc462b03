package kvevict

import "github.com/sagellm/kvevict/internal/rank"

// fifoKey evicts the sequence that entered the cache first (CreatedAt
// oldest), whatever happened since: cheap and scan-resistant in the sense
// that a reuse never promotes.
func fifoKey(c *Candidate, _ *keyParams) rank.Key {
	return rank.Key{Major: c.CreatedAt}
}

// filoKey evicts the sequence that entered the cache last, protecting the
// oldest residents (long-lived shared prefixes).
func filoKey(c *Candidate, _ *keyParams) rank.Key {
	return rank.Key{Major: ^c.CreatedAt}
}
