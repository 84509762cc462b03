package kvevict

import (
	"fmt"
	"slices"
)

// blockSet is the scratch of distinct, kept between calls so that a
// steady-state check allocates nothing.
type blockSet struct {
	bits   []uint64 // a bitmap of freed blocks, all zero between calls
	sorted []int    // a copy of freed blocks, when they are too sparse for bits
}

// distinct reports an error matching [ErrInvalidCandidate] when the
// victims free some block twice: listed twice by one candidate, or by two.
// An allocator that freed it twice would hand one block to two sequences.
// Only the blocks a selection frees are checked, not every candidate's:
// that is O(f) for f freed blocks, where checking the candidates would
// be O(blocks held) on every call. A selection checks before it changes
// anything, so a refused one evicts nothing.
func (s *blockSet) distinct(victims []Victim) error {
	lo, hi, f := 0, -1, 0
	for i := range victims {
		for _, b := range victims[i].Blocks {
			if f == 0 || b < lo {
				lo = b
			}
			hi = max(hi, b)
			f++
		}
	}
	if f < 2 {
		return nil
	}
	// A bitmap over [lo, hi] when it is no larger than a few words per
	// freed block, as block ids from one pool are; else a sorted copy.
	if words := (hi-lo)>>6 + 1; lo <= hi && words > 0 && words <= 4*f+64 {
		if cap(s.bits) < words {
			s.bits = make([]uint64, words)
		}
		bits := s.bits[:words]
		var again uint64 // nonzero once a block was seen twice
		for i := range victims {
			for _, b := range victims[i].Blocks {
				o := uint(b - lo)
				w, m := &bits[o>>6], uint64(1)<<(o&63)
				again |= *w & m
				*w |= m
			}
		}
		clear(bits)
		if again == 0 {
			return nil
		}
	}
	// A duplicate, or blocks too sparse for a bitmap: sort them.
	all := s.sorted[:0]
	for i := range victims {
		all = append(all, victims[i].Blocks...)
	}
	slices.Sort(all)
	s.sorted = all[:0]
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			return duplicateBlock(victims, all[i])
		}
	}
	return nil
}

// duplicateBlock describes block b, which victims free twice.
func duplicateBlock(victims []Victim, b int) error {
	var ids []uint64
	for i := range victims {
		for _, x := range victims[i].Blocks {
			if x == b {
				ids = append(ids, victims[i].ID)
			}
		}
	}
	slices.Sort(ids) // the same message whatever order the victims came in
	if ids[0] != ids[len(ids)-1] {
		return fmt.Errorf("%w: candidates ID %d and ID %d both list block %d", ErrInvalidCandidate, ids[0], ids[len(ids)-1], b)
	}
	return fmt.Errorf("%w: candidate ID %d lists block %d twice", ErrInvalidCandidate, ids[0], b)
}
