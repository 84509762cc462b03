package prefix

import (
	"testing"

	"github.com/sagellm/kvevict"
)

// TestAdmit is a hand-computed script of a pool of three blocks under LRU:
// a hit locks its prefix while a leaf makes room, a request longer than
// the pool is cut short, a fully resident request evicts nothing, and the
// tree never holds more than the capacity.
func TestAdmit(t *testing.T) {
	tr := newTree(t, kvevict.LRU, 3)
	for i, step := range []struct {
		hashes     []uint64
		hits, size int
		resident   []uint64 // paths that must be wholly resident after
	}{
		{[]uint64{1, 2, 3}, 0, 3, nil},
		{[]uint64{1, 2, 4}, 2, 3, []uint64{1, 2, 4}},    // 3 evicted, 1 and 2 locked meanwhile
		{[]uint64{5, 6, 7, 8}, 0, 3, []uint64{5, 6, 7}}, // all three evicted, 8 cut
		{[]uint64{5, 6, 7, 8}, 3, 3, []uint64{5, 6, 7}}, // nothing evictable: 8 cut again
		{nil, 0, 3, []uint64{5, 6, 7}},                  // nothing to admit
		{[]uint64{5, 9}, 1, 3, []uint64{5, 9}},          // 7, the LRU leaf, makes room
	} {
		hits, err := tr.Admit(step.hashes, at(int64(i+1)))
		if err != nil || hits != step.hits || tr.Len() != step.size {
			t.Fatalf("Admit(%v) = %d, %v with %d resident; want %d hits, %d resident", step.hashes, hits, err, tr.Len(), step.hits, step.size)
		}
		if step.resident != nil && tr.Peek(step.resident) != len(step.resident) {
			t.Fatalf("after Admit(%v): %v not resident", step.hashes, step.resident)
		}
		if tr.Protected() != 0 {
			t.Fatalf("after Admit(%v): %d blocks still locked", step.hashes, tr.Protected())
		}
		check(t, tr)
	}
}
