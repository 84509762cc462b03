package sim

// rePrefillCounter is the re-prefill accounting every run shares (replay,
// Belady and serve): it counts the blocks evicted, remembers each until it
// is referenced again, and counts those references, the re-prefilled
// blocks. Memory is one entry per evicted block not yet referenced again.
type rePrefillCounter struct {
	rePrefills int64             // evicted blocks referenced again
	evicted    int64             // blocks evicted
	gone       map[uint64]uint64 // evicted hash -> the owner it was evicted from, until referenced again
}

// evict records that the block of hash, owned by owner (0 where blocks have
// no owner), was evicted. O(1).
func (c *rePrefillCounter) evict(hash, owner uint64) {
	c.gone[hash] = owner
	c.evicted++
}

// reference records that hash is needed again and reports whether it had
// been evicted since (a re-prefill) and from which owner. O(1).
func (c *rePrefillCounter) reference(hash uint64) (owner uint64, again bool) {
	owner, again = c.forget(hash)
	if again {
		c.rePrefills++
	}
	return owner, again
}

// forget is reference without counting a re-prefill, for a block computed
// again that a run does not count (serve mode counts first admissions).
func (c *rePrefillCounter) forget(hash uint64) (owner uint64, again bool) {
	owner, again = c.gone[hash]
	if again {
		delete(c.gone, hash)
	}
	return owner, again
}
