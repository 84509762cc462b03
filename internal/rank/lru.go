package rank

// LRUKey evicts the least recently used sequence first: the one whose
// LastAccess is oldest. The classic choice when reuse is recent-biased, as
// in multi-turn chat.
func LRUKey(lastAccess int64) Key { return Key{Major: lastAccess} }

// MRUKey evicts the most recently used sequence first. It suits cyclic
// scans larger than the cache, where the newest entry is the one needed
// last. ^x is -x-1: order-reversing without overflow at math.MinInt64.
func MRUKey(lastAccess int64) Key { return Key{Major: ^lastAccess} }
