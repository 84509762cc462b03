package kvevict

import (
	"errors"
	"fmt"
)

// The one cover-and-commit transaction of every selection: a Policy's
// exact, sampled and adaptive ones and an Index's eviction over any order.
// A source hands out victims in eviction order; the transaction takes
// their blocks until they cover the need, checks that no block is freed
// twice, and then has the source commit the victims, or roll them back so
// that a refused selection changes nothing.

// source is where a transaction takes its victims from, smallest first.
// The transaction calls next until the victims cover the need, then
// exactly one of commit and rollback.
type source interface {
	// next returns the next victim's candidate and takes it out of the
	// possible victims of this transaction. It returns errGaveUp when an
	// approximate source cannot go on (the caller then selects exactly),
	// or an error matching ErrInvalidCandidate for a candidate it found
	// invalid. A source whose evictable blocks cover the need never runs
	// out.
	next() (*Candidate, error)
	// commit makes the victims final: they free distinct blocks. When
	// trimmed is set the last victim frees only a tail of its blocks
	// and keeps its head.
	commit(victims []Victim, trimmed bool)
	// rollback puts the victims taken by next back, as they were.
	rollback()
}

// blockLister is a source that counts the candidates listing each block,
// an Index: its check that no block is freed twice also sees the blocks
// of the candidates that are not victims.
type blockLister interface {
	// sharedBlock reports an error matching ErrInvalidCandidate if the
	// victims would free a block that another candidate lists, or that
	// they list twice.
	sharedBlock(victims []Victim) error
}

// errGaveUp is a sampled source's way of asking for the exact selection.
var errGaveUp = errors.New("kvevict: sampling gave up")

// transaction is the scratch of cover, kept between calls so that a
// steady-state selection allocates only what it returns.
type transaction struct {
	blocks  blockSet // checks that no block is freed twice
	partial int      // victims of the last committed transaction that kept a head of their blocks
}

// cover takes victims from src until their blocks cover required > 0 and
// appends them to dst, in the order taken: all of each victim's blocks, or,
// for the last one when it allows partial eviction and holds more than the
// need left, its last blocks (the tail, so the head a returning request
// matches stays). If the victims would free a block twice (by the
// source's own check when it is a blockLister), or src fails,
// nothing is appended and src rolls back; otherwise src commits. It returns
// the blocks freed.
func (t *transaction) cover(dst []Victim, required int, src source) (_ []Victim, freed int, err error) {
	first, trimmed := len(dst), false
	t.partial = 0
	for freed < required {
		c, err := src.next()
		if err != nil {
			src.rollback()
			clear(dst[first:])
			return dst[:first], 0, err
		}
		var blocks []int
		blocks, trimmed = take(c, required-freed)
		dst = append(dst, Victim{ID: c.ID, Blocks: blocks})
		freed += len(blocks)
	}
	check := t.blocks.distinct
	if o, ok := src.(blockLister); ok {
		check = o.sharedBlock
	}
	if err := check(dst[first:]); err != nil {
		src.rollback()
		clear(dst[first:]) // drop the references to the candidates' blocks
		return dst[:first], 0, err
	}
	t.partial = b2i(trimmed)
	src.commit(dst[first:], trimmed)
	return dst, freed, nil
}

// take returns the blocks a selection frees from victim c while need blocks
// are still needed: all of them, or, when c allows partial eviction and
// holds more than need, its last need blocks. partial reports the second
// case, which ends a selection: the need is then met.
func take(c *Candidate, need int) (blocks []int, partial bool) {
	if c.AllowPartial && len(c.Blocks) > need {
		return c.Blocks[len(c.Blocks)-need:], true
	}
	return c.Blocks, false
}

// checkArgs is the check every selection over a caller's slice makes
// first: a need that is not negative, and a count of candidates whose
// indices fit an int32.
func checkArgs(n, required int) error {
	if err := checkRequired(required); err != nil {
		return err
	}
	if n > maxCandidates {
		return fmt.Errorf("%w: %d candidates, more than %d", ErrInvalidArgument, n, maxCandidates)
	}
	return nil
}

// checkRequired refuses a negative need, for every selection: a Policy's
// and an Index's.
func checkRequired(required int) error {
	if required < 0 {
		return fmt.Errorf("%w: requiredBlocks must not be negative, got %d", ErrInvalidArgument, required)
	}
	return nil
}
