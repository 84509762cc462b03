package kvevict

import (
	"errors"
	"fmt"

	"github.com/sagellm/kvevict/internal/rank"
)

// Hints is what the caller knows of a sequence's future and no history can
// learn: a lease (a TTL), a retention priority, or that the sequence will
// not be continued. The zero value means none. A hint is an input like
// Pinned or RefCount: every strategy, the [Policy] (exact and sampled),
// the [Index] and package prefix's tree honour it the same way, by the
// order of the classes below (package tier's Cache gives a request's to
// its blocks, and its Hierarchy carries them down the tiers).
//
// # The order of the classes
//
// A selection takes, first to last:
//
//  1. released candidates (Released);
//  2. candidates without a live lease, by retention priority, lowest
//     first: Retention while the selection's now is before RetainUntil,
//     else [DefaultRetention];
//  3. candidates under a live soft lease, the lease ending first taken
//     first.
//
// A candidate under a live hard lease is never taken, as if Pinned. Within
// the class of the candidates without hints (no live lease, the default
// retention priority, not released) the strategy orders the candidates as it
// always does. Within a class of another retention priority a key
// strategy orders them by its key too, and the adaptive strategies (ARC,
// S3-FIFO, SIEVE, Auto) and a key that reads the current tick
// ([WithCostDecay]) by recency (LastAccess); released candidates go by
// recency, leased ones by the end of their lease. Equal keys break by ID,
// as everywhere.
//
// # Now
//
// A lease is live, and a retention priority applies, while now is before
// its end tick; past it the hint is spent, not an error. A Policy's now is
// the latest LastAccess among the candidates of the call, as [WithCostDecay]
// reads it; an Index's is the latest tick it has been told (a candidate's
// LastAccess in Add or Update, a Touch's tick); a tree's the latest
// Access.Tick. An allocator that evicts later than every candidate's last
// access tells the time on a referenced candidate (the request being
// admitted, say). A lease that ends costs an Index or a tree O(log n)
// once, never a pass over its candidates.
//
// A sampled Policy ([WithSampling]) selects a call exactly once its
// sample meets a candidate with hints.
//
// # Released victims
//
// An adaptive strategy's history (ARC, S3-FIFO, SIEVE, Auto) forgets a
// released victim taken whole, in a Policy and an Index alike: it keeps no
// ghost of a sequence that will not be requested again. A candidate that
// sets a HeadHash is known to Auto by that block, which other sequences
// may share: Auto keeps it.
type Hints struct {
	// LeaseUntil is the tick at which a lease on the sequence ends; 0
	// means no lease. A soft lease (the default) defers the sequence
	// behind every candidate without a live lease; a hard one (HardLease)
	// keeps it as Pinned until it ends.
	LeaseUntil int64
	// RetainUntil is the tick until which Retention applies; 0 means no
	// retention priority.
	RetainUntil int64
	// Retention is a retention priority from 0 to [MaxRetention], as
	// TensorRT-LLM's retention config has it: lower is taken first. It
	// needs RetainUntil.
	Retention uint8
	// HardLease makes the lease hard. It needs LeaseUntil.
	HardLease bool
	// Released says the caller knows the sequence will not be continued:
	// an agent's final turn, a closed chat, a turn its continuation
	// superseded. It is taken before every other class.
	Released bool
}

// Retention priorities: the range of [Hints.Retention], and the priority of
// a candidate that sets none or whose RetainUntil has passed.
const (
	MaxRetention     = rank.MaxRetention
	DefaultRetention = rank.DefaultRetention
)

// hintRank is rank.HintRank, the one place the order of the classes is
// written, for candidate c at tick now.
func hintRank(c *Candidate, now int64) (int64, rank.Class) {
	return rank.HintRank(c.rankHint(), now)
}

// apartEntry is the entry of candidate c, in slot, set apart at rank r:
// rank.ApartKey's key within the class, the strategy's own order by kp's
// key; or recency for an adaptive strategy, whose order is its history's
// and no key of a candidate, and for a key that reads the current tick,
// which a class kept between calls could not follow.
func apartEntry(kp *keyParams, c *Candidate, r int64, slot int32) entry {
	own := rank.LRUKey(c.LastAccess)
	if !kp.usesNow && !kp.kind.Adaptive() {
		own = kp.keyOf(c)
	}
	return newEntry(c, rank.ApartKey(c.rankHint(), r, c.LastAccess, own), slot)
}

// rankHint is c's hints as rank reads them: the same fields.
func (c *Candidate) rankHint() *rank.Hint { return (*rank.Hint)(&c.Hints) }

// hinted reports whether c carries any hint.
func (c *Candidate) hinted() bool {
	// Written out: the struct's comparison loads each field's zero from
	// memory, and every candidate of a selection pays for it.
	h := &c.Hints
	return h.LeaseUntil|h.RetainUntil != 0 || h.Retention != 0 || h.HardLease || h.Released
}

// checkHints reports hints no class can hold: rank.CheckHint.
func checkHints(h *Hints) error { return rank.CheckHint((*rank.Hint)(h)) }

// Validate reports hints that no class can hold, which every structure
// refuses (a Retention above MaxRetention, or without RetainUntil; a
// HardLease without LeaseUntil), as an error matching
// [ErrInvalidCandidate]: for a caller that checks hints before it starts
// work they are part of. O(1).
func (h Hints) Validate() error {
	if err := checkHints(&h); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidCandidate, err)
	}
	return nil
}

// invalidHints describes candidate c, at index i of its call (-1: an
// Index's), whose hints checkHints refused with err.
func invalidHints(c *Candidate, i int, err error) error {
	if i < 0 {
		return fmt.Errorf("%w: ID %d: %v", ErrInvalidCandidate, c.ID, err)
	}
	return fmt.Errorf("%w: candidate %d (ID %d): %v", ErrInvalidCandidate, i, c.ID, err)
}

// errHinted is a selection's way of saying that an evictable candidate
// carries hints: the Policy then selects by class (selectClasses).
var errHinted = errors.New("kvevict: a candidate carries hints")

// classes is the scratch of a Policy's selection by class, kept between
// calls.
type classes struct {
	view  []Candidate // the call's candidates as the strategy sees them
	apart rank.Apart  // the candidates set apart
	src   classSource
}

// selectClasses is the selection of a Policy whose evictable candidates
// carry hints: the candidates set apart below the plain class, then the
// strategy's own selection among the plain class, then those set apart
// above it, in one transaction. The strategy sees a view of the
// candidates in which those set apart or held are pinned and no hint is
// left, and selects exactly.
func (p *policy) selectClasses(cands []Candidate, required int) (Result, error) {
	if err := p.sel.validate(cands, 0); err != nil {
		return Result{}, err
	}
	now := maxLastAccess(cands)
	cl := &p.classes
	view, apart := cl.view[:0], &cl.apart
	below, plain, above, leased := 0, 0, 0, 0
	for i := range cands {
		c := &cands[i]
		view = append(view, *c)
		view[i].Hints = Hints{}
		if !c.evictable() || !c.hinted() {
			if c.evictable() {
				plain += len(c.Blocks)
			}
			continue
		}
		r, class := hintRank(c, now)
		n := len(c.Blocks)
		switch class {
		case rank.ClassPlain:
			plain += n
			continue
		case rank.ClassApart:
			apart.Push(r, apartEntry(&p.params, c, r, int32(i)))
			if r < rank.PlainRank {
				below += n
			} else {
				above += n
			}
			if r == rank.LeasedRank {
				leased += n
			}
		case rank.ClassHeld:
			leased += n
		}
		view[i].Pinned = true
	}
	cl.view = view
	defer func() { // drop the views of the caller's blocks
		clear(cl.view)
		apart.Clear()
	}()
	if below+plain+above < required {
		return Result{}, &InsufficientBlocksError{Required: required, Available: below + plain + above}
	}
	src := &cl.src
	*src = classSource{cands: cands, apart: apart, need: min(plain, max(0, required-below))}
	if src.need > 0 {
		switch {
		case p.lists != nil:
			p.sel.beginAdaptive(view, p.lists, &p.listSrc)
			src.inner = &p.listSrc
		default:
			victims, err := p.sel.greedy(view, src.need, &p.params)
			if err != nil {
				return Result{}, err
			}
			p.ranked = ranked{cands: view, victims: victims, auto: p.params.auto}
			src.inner = &p.ranked
		}
	}
	res := Result{Victims: make([]Victim, 0, 8)}
	var err error
	res.Victims, res.FreedBlocks, err = p.txn.cover(res.Victims, required, src)
	p.ranked, p.listSrc = ranked{}, listSource{}
	if err == nil {
		for j, i := range src.taken {
			if i < 0 {
				continue
			}
			c := &cands[i]
			p.stats.hinted(c, now)
			// A released victim taken whole leaves no ghost: it will not
			// be requested again. One known by its head hash stays, as
			// in an Index: other sequences may share that block.
			if h := p.history(); h != nil && c.Hints.Released && c.HeadHash == 0 && len(res.Victims[j].Blocks) == len(c.Blocks) {
				h.Forget(c.ID)
			}
		}
		p.stats.leasedBlocks = leased
	}
	*src = classSource{taken: src.taken[:0], innerVictims: src.innerVictims[:0]}
	return res, err
}

// classSource is the source of a selection by class: the candidates set
// apart below the plain class, then need blocks from the strategy's
// source, then those set apart above it.
type classSource struct {
	cands []Candidate
	apart *rank.Apart // the candidates set apart not taken yet
	inner source
	need  int // blocks the strategy gives
	freed int // blocks it gave
	// taken is each victim's index in cands if set apart, -1 if the
	// strategy's; innerVictims the strategy's victims, for its commit.
	taken        []int
	innerVictims []Victim
}

func (s *classSource) next() (*Candidate, error) {
	if s.apart.Len() > 0 {
		if e, r := s.apart.Min(); r < rank.PlainRank || s.freed >= s.need {
			i := e.Slot
			s.apart.Remove(i)
			s.taken = append(s.taken, int(i))
			return &s.cands[i], nil
		}
	}
	c, err := s.inner.next()
	if err != nil {
		return nil, err
	}
	s.freed += len(c.Blocks)
	s.taken = append(s.taken, -1)
	return c, nil
}

func (s *classSource) commit(victims []Victim, trimmed bool) {
	if s.inner == nil {
		return
	}
	s.innerVictims = s.innerVictims[:0]
	for i, v := range victims {
		if s.taken[i] < 0 {
			s.innerVictims = append(s.innerVictims, v)
		}
	}
	s.inner.commit(s.innerVictims, trimmed && s.taken[len(s.taken)-1] < 0)
	clear(s.innerVictims)
}

func (s *classSource) rollback() {
	if s.inner != nil {
		s.inner.rollback()
	}
}
