package rank

// SLRUKey is segmented LRU as SGLang's radix cache ranks it: sequences
// seen fewer than threshold times (probationary) go before those seen at
// least threshold times (protected), and each segment is LRU. One-hit
// sequences, like a scan, cannot push out the reused ones.
func SLRUKey(accessCount int, lastAccess int64, p *Params) Key {
	var protected int64
	if accessCount >= p.slruThreshold {
		protected = 1
	}
	return Key{Major: protected, Minor: lastAccess}
}
