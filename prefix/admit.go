package prefix

import (
	"fmt"

	"github.com/sagellm/kvevict"
)

// Admit serves one request on a pool of capacity blocks, as an engine's
// prefix cache does, and returns how many of its blocks were resident (its
// hits): the resident prefix of hashes is locked while room is made, the
// room comes from evicting leaves (Evict), the rest of the prompt is
// inserted, cut short if the pool cannot hold it, and the prefix is
// unlocked. So a tree that only Admit changes never holds more than
// capacity blocks, and every block stored hangs under a resident parent.
// Empty hashes admit nothing. Admit is a sequence of the tree's other
// calls, each atomic but not the whole: a pool that admits from several
// goroutines serialises its Admits. A capacity below 1 returns an error
// matching [kvevict.ErrInvalidArgument]. O(len(hashes) + k log n) for k
// blocks evicted.
func (t *Tree) Admit(hashes []uint64, a Access, capacity int) (hits int, err error) {
	if capacity < 1 {
		return 0, fmt.Errorf("prefix: %w: capacity must be at least 1, got %d", kvevict.ErrInvalidArgument, capacity)
	}
	if len(hashes) == 0 {
		return 0, nil
	}
	matched, err := t.MatchLocked(hashes, a)
	if err != nil {
		return 0, err
	}
	if need := len(hashes) - matched - (capacity - t.Len()); need > 0 {
		if _, err := t.Evict(min(need, t.EvictableBlocks())); err != nil {
			return matched, err
		}
	}
	if fit := matched + capacity - t.Len(); fit > matched {
		if _, err := t.Insert(hashes[:min(fit, len(hashes))], a); err != nil {
			return matched, err
		}
	}
	if matched > 0 {
		return matched, t.Unlock(hashes[:matched])
	}
	return 0, nil
}
