package kvevict

import (
	"cmp"
	"slices"
)

// history is the state an adaptive strategy keeps of the ids it has seen,
// in a table: ARC's, S3-FIFO's and SIEVE's lists ([listHistory]), and
// Auto's request counts ([auto]). The policy's mutex guards it.
type history interface {
	// nodes returns the table of ids the history tracks.
	nodes() *table
	// access records a request for id: the paper's access. O(1).
	access(id uint64)
	// admit adds id, which the history does not hold as resident, as new.
	// The cache may exceed its capacity until finish.
	admit(id uint64)
	// finish ends a selection, refused or not: it commits any pending
	// request and restores the capacity bounds.
	finish()
	// forget drops id, resident or a ghost, and keeps no ghost of it: the
	// caller released its sequence (Hints.Released), which will not be
	// requested again. Called outside a selection. O(1).
	forget(id uint64)
	// check reports a broken invariant, for tests.
	check() error
}

// listHistory is the history of a strategy whose lists order the victims
// (ARC, S3-FIFO, SIEVE), rather than a key. Its selection
// (selector.selectAdaptive) validates candidates, admits and marks them in
// the table, then asks victim for one victim at a time until they cover
// the need. Once their blocks are known to be distinct it evicts those
// taken wholly (evict), in order; one that kept a head of its blocks stays
// resident.
type listHistory interface {
	history
	// pendingID returns the id of a request not yet placed in the cache: a
	// miss waiting for the eviction that makes room for it.
	pendingID() (uint64, bool)
	// commit places the pending request in the cache, evicting from the
	// history (not from the pool) if the cache is full.
	commit()
	// victim returns the node of the next victim among the marked nodes, by
	// the strategy's rule, or -1 if no node is marked. The victims chosen
	// before are unmarked but still in their lists: a rule that reads a
	// list's length reads the table's live.
	victim() int32
	// evict removes victim node n from the cache: to a ghost list or away.
	// A selection evicts its victims after choosing them all, in the order
	// chosen.
	evict(n int32)
}

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
func (s *selector) selectAdaptive(cands []Candidate, required int, h listHistory, txn *transaction, src *listSource) (Result, error) {
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
	if cap(s.listVictims) > admitShrinkAbove && cap(s.listVictims) > 8*len(cands) {
		s.listVictims = nil
	}
	return res, err
}

// beginAdaptive readies h to choose victims among cands, which a
// selection validated, and src to hand them out: the pending request
// placed, the candidates admitted and the evictable ones marked.
func (s *selector) beginAdaptive(cands []Candidate, h listHistory, src *listSource) {
	// A pending request that already holds blocks is resident: place it
	// before the others are admitted, so that nothing admitted is pushed out.
	if id, ok := h.pendingID(); ok {
		for i := range cands {
			if cands[i].ID == id {
				h.commit()
				break
			}
		}
	}
	h.nodes().nextEpoch()
	s.admitCandidates(h, cands)
	*src = listSource{h: h, cands: cands}
}

// listSource is a transaction's source over the lists of h, whose marked
// nodes are candidates of cands: a Policy's candidate slice, or an Index's
// slots.
type listSource struct {
	h     listHistory
	cands []Candidate
}

func (s *listSource) next() (*Candidate, error) {
	t := s.h.nodes()
	return &s.cands[t.slab[nextListVictim(s.h)].cand], nil
}

func (s *listSource) commit(_ []Victim, trimmed bool) { evictChosen(s.h, trimmed) }

func (s *listSource) rollback() { restoreChosen(s.h) }

// nextListVictim takes the next victim of h's lists out of the marked
// nodes and chooses it, to be evicted once the selection commits. The
// evictable candidates must cover the need.
func nextListVictim(h listHistory) int32 {
	n := h.victim()
	if n < 0 {
		panic("kvevict: an adaptive selection lost an evictable candidate")
	}
	t := h.nodes()
	t.unmark(n)
	t.choose(n)
	return n
}

// evictChosen commits the victims chosen from h's lists: it evicts them
// from the history in the order chosen, all but the last when trimmed (it
// keeps a head of its blocks and stays resident), and restores the
// history's bounds.
func evictChosen(h listHistory, trimmed bool) {
	chosen := h.nodes().endChoice()
	if trimmed {
		chosen = chosen[:len(chosen)-1]
	}
	for _, n := range chosen {
		h.evict(n)
	}
	h.finish()
}

// restoreChosen rolls back the victims chosen from h's lists: they are
// marked again, possible victims as before, and nothing is evicted.
func restoreChosen(h listHistory) {
	t := h.nodes()
	for _, n := range t.endChoice() {
		t.mark(n, t.slab[n].cand)
	}
	h.finish()
}

// admitCandidates admits into h the candidates holding blocks that it does
// not hold as resident, oldest LastAccess first (ties by ID), as every
// adaptive strategy learns of the sequences a pool holds, and marks each
// evictable candidate, resident before or admitted, as a possible victim
// of this selection. O(n + a log a) for a admitted.
func (s *selector) admitCandidates(h listHistory, cands []Candidate) {
	t := h.nodes()
	admit := s.admitting[:0]
	for i := range cands {
		c := &cands[i]
		if len(c.Blocks) == 0 {
			continue
		}
		n := t.lookup(c.ID)
		if n < 0 || !t.resident(n) {
			admit = append(admit, int32(i))
			continue
		}
		if c.evictable() {
			t.mark(n, int32(i))
		}
	}
	slices.SortFunc(admit, func(a, b int32) int { return byRecency(&cands[a], &cands[b]) })
	for _, i := range admit {
		c := &cands[i]
		h.admit(c.ID)
		if c.evictable() {
			t.mark(t.lookup(c.ID), i)
		}
	}
	s.admitting = admit[:0]
	if cap(s.admitting) > admitShrinkAbove && cap(s.admitting) > 8*len(cands) {
		s.admitting = nil
	}
}
