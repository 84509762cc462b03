package kvevict

import (
	"cmp"
	"slices"

	"github.com/sagellm/kvevict/internal/lists"
)

// byRecency orders candidates oldest LastAccess first, ties by ID: the
// order in which a history admits candidates it does not hold, and Auto's
// order among candidates requested as often.
func byRecency(a, b *Candidate) int {
	if c := cmp.Compare(a.LastAccess, b.LastAccess); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// selectAdaptive is the selection of a strategy whose lists order the
// victims, for required > 0: the same validation, atomicity and Result as
// the exact selection, with the victims chosen by h. A selection refused
// for invalid input or too few evictable blocks leaves h unchanged. One
// refused because its victims would free a block twice evicts nothing from
// h either, but h keeps what the call taught it: the candidates it
// admitted, and what a search changes on its way (S3-FIFO's promotions,
// SIEVE's cleared bits and hand), as any selection over those candidates
// would.
func (s *selector) selectAdaptive(cands []Candidate, required int, h lists.ListHistory, txn *transaction, src *listSource) (Result, error) {
	if err := s.validate(cands, required); err != nil {
		return Result{}, err
	}
	s.beginAdaptive(cands, h, src)
	victims, freed, err := txn.cover(s.listVictims[:0], required, src)
	*src = listSource{} // drop the view of the caller's slice
	var res Result
	if err == nil {
		res = Result{Victims: slices.Clone(victims), FreedBlocks: freed}
	}
	clear(victims) // drop the references to the caller's blocks
	s.listVictims = victims[:0]
	if cap(s.listVictims) > lists.ShrinkAbove && cap(s.listVictims) > 8*len(cands) {
		s.listVictims = nil
	}
	return res, err
}

// beginAdaptive readies h to choose victims among cands, which a
// selection validated, and src to hand them out: the pending request
// placed, the candidates admitted and the evictable ones marked.
func (s *selector) beginAdaptive(cands []Candidate, h lists.ListHistory, src *listSource) {
	// A pending request that already holds blocks is resident: place it
	// before the others are admitted, so that nothing admitted is pushed out.
	if id, ok := h.PendingID(); ok {
		for i := range cands {
			if cands[i].ID == id {
				h.Commit()
				break
			}
		}
	}
	h.Nodes().NextEpoch()
	s.admitCandidates(h, cands)
	*src = listSource{h: h, cands: cands}
}

// listSource is a transaction's source over the lists of h, whose marked
// nodes are candidates of cands: a Policy's candidate slice, or an Index's
// slots.
type listSource struct {
	h     lists.ListHistory
	cands []Candidate
}

func (s *listSource) next() (*Candidate, error) {
	t := s.h.Nodes()
	return &s.cands[t.Slab[nextListVictim(s.h)].Cand], nil
}

func (s *listSource) commit(_ []Victim, trimmed bool) { evictChosen(s.h, trimmed) }

func (s *listSource) rollback() { restoreChosen(s.h) }

// nextListVictim takes the next victim of h's lists out of the marked
// nodes and chooses it, to be evicted once the selection commits. The
// evictable candidates must cover the need.
func nextListVictim(h lists.ListHistory) int32 {
	n := h.Victim()
	if n < 0 {
		panic("kvevict: an adaptive selection lost an evictable candidate")
	}
	t := h.Nodes()
	t.Unmark(n)
	t.Choose(n)
	return n
}

// evictChosen commits the victims chosen from h's lists: it evicts them
// from the history in the order chosen, all but the last when trimmed (it
// keeps a head of its blocks and stays resident), and restores the
// history's bounds.
func evictChosen(h lists.ListHistory, trimmed bool) {
	chosen := h.Nodes().EndChoice()
	if trimmed {
		chosen = chosen[:len(chosen)-1]
	}
	for _, n := range chosen {
		h.Evict(n)
	}
	h.Finish()
}

// restoreChosen rolls back the victims chosen from h's lists: they are
// marked again, possible victims as before, and nothing is evicted.
func restoreChosen(h lists.ListHistory) {
	t := h.Nodes()
	for _, n := range t.EndChoice() {
		t.Mark(n, t.Slab[n].Cand)
	}
	h.Finish()
}

// admitCandidates admits into h the candidates holding blocks that it does
// not hold as resident, oldest LastAccess first (ties by ID), as every
// adaptive strategy learns of the sequences a pool holds, and marks each
// evictable candidate, resident before or admitted, as a possible victim
// of this selection. O(n + a log a) for a admitted.
func (s *selector) admitCandidates(h lists.ListHistory, cands []Candidate) {
	t := h.Nodes()
	admit := s.admitting[:0]
	for i := range cands {
		c := &cands[i]
		if len(c.Blocks) == 0 {
			continue
		}
		n := t.Lookup(c.ID)
		if n < 0 || !t.Resident(n) {
			admit = append(admit, int32(i))
			continue
		}
		if c.evictable() {
			t.Mark(n, int32(i))
		}
	}
	slices.SortFunc(admit, func(a, b int32) int { return byRecency(&cands[a], &cands[b]) })
	for _, i := range admit {
		c := &cands[i]
		h.Admit(c.ID)
		if c.evictable() {
			t.Mark(t.Lookup(c.ID), i)
		}
	}
	s.admitting = admit[:0]
	if cap(s.admitting) > lists.ShrinkAbove && cap(s.admitting) > 8*len(cands) {
		s.admitting = nil
	}
}
