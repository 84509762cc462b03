package prefix

// Admit serves one request on the tree's pool, as an engine's prefix cache
// does, and returns how many of its blocks were resident (its hits): the
// resident prefix of hashes is locked while room is made, the room comes
// from evicting leaves (Evict), the rest of the prompt is inserted, cut
// short if the pool's capacity (given to [New]) cannot hold it, and the
// prefix is unlocked. So a tree that only Admit changes never holds more
// than its capacity, and every block stored hangs under a resident parent.
// Empty hashes admit nothing. Admit is a sequence of the tree's other
// calls, each atomic but not the whole: a pool that admits from several
// goroutines serialises its Admits. O(len(hashes) + k log n) for k blocks
// evicted.
func (t *Tree) Admit(hashes []uint64, a Access) (hits int, err error) {
	if len(hashes) == 0 {
		return 0, nil
	}
	matched, err := t.MatchLocked(hashes, a)
	if err != nil {
		return 0, err
	}
	if need := len(hashes) - matched - (t.capacity - t.Len()); need > 0 {
		if _, err := t.Evict(min(need, t.EvictableBlocks())); err != nil {
			return matched, err
		}
	}
	if fit := matched + t.capacity - t.Len(); fit > matched {
		if _, err := t.Insert(hashes[:min(fit, len(hashes))], a); err != nil {
			return matched, err
		}
	}
	if matched > 0 {
		return matched, t.Unlock(hashes[:matched])
	}
	return 0, nil
}
