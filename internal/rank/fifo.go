package rank

// FIFOKey evicts the sequence that entered the cache first (CreatedAt
// oldest), whatever happened since: cheap and scan-resistant in the sense
// that a reuse never promotes.
func FIFOKey(createdAt int64) Key { return Key{Major: createdAt} }

// FILOKey evicts the sequence that entered the cache last, protecting the
// oldest residents (long-lived shared prefixes).
func FILOKey(createdAt int64) Key { return Key{Major: ^createdAt} }
