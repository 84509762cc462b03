package kvevict

// fifoKey evicts the sequence that entered the cache first (CreatedAt
// oldest), whatever happened since: cheap and scan-resistant in the sense
// that a reuse never promotes.
func fifoKey(c *Candidate, _ *keyParams) Key {
	return Key{Major: c.CreatedAt}
}

// filoKey evicts the sequence that entered the cache last, protecting the
// oldest residents (long-lived shared prefixes).
func filoKey(c *Candidate, _ *keyParams) Key {
	return Key{Major: ^c.CreatedAt}
}
