package kvevict

import (
	"fmt"
	"slices"
)

// The validation every selection makes of its candidates: their counts,
// their IDs, and whether the evictable ones cover the need.

// checkCover ends a selection's pass over cands: it reports a duplicate ID
// when the IDs did not come in increasing order (unordered), or evictable
// blocks that do not cover required (when covered is false).
func (s *selector) checkCover(cands []Candidate, unordered, covered bool, required int) error {
	if unordered {
		s.ids.Reset(len(cands))
		for i := range cands {
			if s.ids.Add(cands[i].ID) {
				return duplicateID(cands, i)
			}
		}
	}
	if !covered {
		available := 0
		for i := range cands {
			if cands[i].evictable() {
				available += len(cands[i].Blocks)
			}
		}
		if available < required {
			return &InsufficientBlocksError{Required: required, Available: available}
		}
	}
	return nil
}

// validate is a selection's validation pass alone, for the calls whose
// victims come from elsewhere (an adaptive strategy's lists) or that need
// none: it reports an invalid candidate, a duplicate ID, or evictable blocks
// that cannot cover required.
func (s *selector) validate(cands []Candidate, required int) error {
	var order idOrder
	available := 0
	hinted := false
	for i := range cands {
		c := &cands[i]
		var ok bool
		if order, ok = order.check(c); !ok {
			return invalidField(c, i)
		}
		if c.hinted() {
			if err := checkHints(&c.Hints); err != nil {
				return invalidHints(c, i, err)
			}
			hinted = hinted || c.evictable()
		}
		if c.evictable() {
			available += len(c.Blocks)
		}
	}
	if hinted && required > 0 {
		if err := s.checkCover(cands, order.unordered(cands), true, 0); err != nil {
			return err
		}
		return errHinted
	}
	return s.checkCover(cands, order.unordered(cands), available >= required, required)
}

// valid reports whether none of the counts a strategy reads is negative:
// one sign test of their bitwise or, since the selection runs it n times.
func valid(c *Candidate) bool {
	return c.RefCount|c.AccessCount|c.SeqLen|c.MaxLen|int(c.EstimatedLifetime) >= 0
}

// invalidField describes candidate c, at index i of its call, which is not
// valid.
func invalidField(c *Candidate, i int) error {
	field, value := negativeField(c)
	return fmt.Errorf("%w: candidate %d (ID %d) has negative %s %v", ErrInvalidCandidate, i, c.ID, field, value)
}

// negativeField names the first negative field of a candidate that is not
// valid, and its value.
func negativeField(c *Candidate) (field string, value any) {
	switch {
	case c.RefCount < 0:
		field, value = "RefCount", c.RefCount
	case c.AccessCount < 0:
		field, value = "AccessCount", c.AccessCount
	case c.EstimatedLifetime < 0:
		field, value = "EstimatedLifetime", c.EstimatedLifetime
	case c.SeqLen < 0:
		field, value = "SeqLen", c.SeqLen
	default:
		field, value = "MaxLen", c.MaxLen
	}
	return field, value
}

// duplicateID describes candidate i, whose ID an earlier candidate has.
func duplicateID(cands []Candidate, i int) error {
	id := cands[i].ID
	j := slices.IndexFunc(cands[:i], func(c Candidate) bool { return c.ID == id })
	return fmt.Errorf("%w: candidates %d and %d share ID %d", ErrInvalidCandidate, j, i, id)
}

// idOrder is the validation pass of every selection over a slice: check
// looks at each candidate in turn, and unordered ends the pass. While each
// ID is above the one before, none can repeat, so a caller that lists its
// sequences in ID order (an allocator walking them in admission order)
// needs no duplicate table.
type idOrder struct {
	prev  uint64 // the last ID seen; 0 before the first
	drops int    // IDs not above their predecessor, counting a first ID of 0
}

// check records the ID of candidate c and reports whether its fields are
// valid; the caller describes an invalid one with invalidField. It takes
// and returns the order by value, so that a loop keeps it local, and
// counts rather than branches: shuffled IDs would make a branch guess
// wrong every other time.
func (o idOrder) check(c *Candidate) (idOrder, bool) {
	return o.see(c.ID), valid(c)
}

// see records id, the next candidate's ID.
func (o idOrder) see(id uint64) idOrder {
	o.drops += b2i(id <= o.prev)
	o.prev = id
	return o
}

// unordered ends the pass over cands: it reports whether some ID was not
// above the one before it. A first ID of 0 is not above the 0 that o starts
// from, and is the one drop that does not count.
func (o idOrder) unordered(cands []Candidate) bool {
	return o.drops > b2i(len(cands) > 0 && cands[0].ID == 0)
}
