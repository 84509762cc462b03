package kvevict

import (
	"fmt"
	"math"
	"slices"

	"github.com/sagellm/kvevict/internal/dlist"
	"github.com/sagellm/kvevict/internal/lists"
)

// An Index of an adaptive strategy (ARC, S3-FIFO, SIEVE, Auto) keeps the
// strategy's history, the same one a Policy keeps. A Policy learns at each
// selection which nodes of the history are its candidates, marking them in
// O(n); the index keeps the marks between evictions instead, so an
// eviction costs what the history's own order costs, whatever the number
// of sequences.
//
// The marks follow one rule: a node is marked when the history holds its id
// as resident and the index ranks its candidate (evictable, not set apart
// by its hints). The index sets and clears them as candidates change and,
// after each call into the history, reads the nodes the history moved
// (lists.Table.Moved): into a ghost list, out of the table, or into the
// cache by a request. A held id that the history does not hold as resident waits, as
// a Policy's candidate would, to be admitted at the next eviction, oldest
// LastAccess first.
//
// The index links each held candidate and the history's node for its id
// both ways, so that neither is looked up by id while both live: the node's
// Cand is the candidate's slot (-1 for an id the index does not hold), and
// the slot's markState.node is the node (-1 for an id the history does not
// track). The history's table files each held candidate under the id the
// history knows it by (lists.Table.Hold), so that a node made for an id
// finds its candidate without a look-up of its own.

// tracked is the history of an adaptive Index and what the Index keeps of
// each slot's node. Its order ranks the marked candidates: the history's
// lists (orderlist.go) or Auto's groups (orderauto.go).
type tracked struct {
	h       lists.History
	lists   lists.ListHistory // ARC, S3-FIFO, SIEVE; nil for Auto
	auto    *auto             // Auto; nil for the lists
	t       *lists.Table
	slots   *dlist.Nodes[held] // the Index's slots
	st      []markState        // by slot
	ord     order
	fix     fixer   // nil for the lists, which no field of a candidate moves
	waiting []int32 // slots whose id the history may not hold as resident: admitted at the next eviction
	spare   []int32 // scratch: the previous waiting
	// maxTick is the largest LastAccess held, unless maxStale: Auto's
	// now, as a Policy finds it over its slice. maxStale is set when the
	// candidate holding it left or went back in time.
	maxTick  int64
	maxStale bool
}

// markState is what an adaptive Index keeps of a slot beside its
// candidate.
type markState struct {
	id      uint64 // the id the history knows the candidate by: its ID, or Auto's historyID
	node    int32  // the history's node for id, or -1
	group   int32  // Auto: 1 + the group that holds the candidate, or 0
	at      int32  // Auto: the candidate's place in its group's heap, or inList
	ranked  bool   // the candidate is ranked: marked whenever its node is resident
	waiting bool   // in waiting
	held    bool   // the slot holds a candidate
	refile  bool   // Auto: out of its group since a request, filed again at the next eviction
}

// unlinked is the markState of a slot whose id the history does not track.
var unlinked = markState{node: -1}

func newTracked(h lists.History, slots *dlist.Nodes[held]) *tracked {
	tr := &tracked{h: h, t: h.Nodes(), slots: slots, maxTick: math.MinInt64}
	if a, ok := h.(*auto); ok {
		tr.auto = a
	} else {
		tr.lists = h.(lists.ListHistory)
	}
	tr.t.Journal()
	tr.t.NextEpoch() // the one epoch of the index's marks
	return tr
}

func (tr *tracked) cand(slot int32) *Candidate { return &(*tr.slots)[slot].Val.c }

func (tr *tracked) grow(n int) {
	tr.st = slices.Grow(tr.st, n)
	tr.waiting = slices.Grow(tr.waiting, n)
	tr.t.Reserve(n)
	if tr.auto != nil {
		tr.auto.info = slices.Grow(tr.auto.info, n)
	}
}

// idOf returns the id by which the history knows c: Auto's historyID, the
// ID for the lists.
func (tr *tracked) idOf(c *Candidate) uint64 {
	if tr.auto != nil {
		return historyID(c)
	}
	return c.ID
}

// find returns the slot of the held candidate the history knows as id.
// O(1).
func (tr *tracked) find(id uint64) (int32, bool) { return tr.t.HeldSlot(id) }

// accepts refuses a candidate of Auto known to the history by the id of
// another held one: two candidates sharing a head would share one node,
// and a node marks one slot.
func (tr *tracked) accepts(slot int32, c *Candidate) error {
	id := historyID(c)
	if s, held := tr.find(id); held && s != slot {
		return fmt.Errorf("%w: ID %d is counted as %d, as ID %d in the index is (a HeadHash or an ID held twice)",
			ErrInvalidCandidate, c.ID, id, tr.cand(s).ID)
	}
	return nil
}

// add files the new candidate in slot: marked if the history holds its id
// as resident and it is ranked; else, if not resident, it waits for
// admission.
func (tr *tracked) add(slot int32) {
	if int(slot) == len(tr.st) {
		tr.st = append(tr.st, unlinked)
	}
	c := tr.cand(slot)
	tr.st[slot] = markState{id: tr.idOf(c), node: -1, held: true}
	n := tr.t.Hold(tr.st[slot].id, slot)
	if n >= 0 {
		tr.link(n, slot)
	}
	tr.seen(math.MinInt64, c.LastAccess)
	if c.ranked() {
		tr.markHeld(slot)
	}
	if n < 0 || !tr.t.Resident(n) {
		tr.wait(slot)
	}
}

// link notes that node n stands for the candidate in slot.
func (tr *tracked) link(n, slot int32) {
	tr.t.Slab[n].Cand = slot
	tr.st[slot].node = n
}

// unlink cuts the link of the candidate in slot to its node, if any.
func (tr *tracked) unlink(slot int32) {
	if n := tr.st[slot].node; n >= 0 {
		tr.t.Slab[n].Cand = -1
		tr.st[slot].node = -1
	}
}

// update files the candidate in slot again after it changed; old is its
// LastAccess before. Auto files it under a new head, and ranks it again
// when its fields changed while marked.
func (tr *tracked) update(slot int32, old int64) {
	c := tr.cand(slot)
	tr.seen(old, c.LastAccess)
	if tr.auto != nil && historyID(c) != tr.st[slot].id {
		tr.rehead(slot)
	}
	st := &tr.st[slot]
	switch was, now := st.ranked, c.ranked(); {
	case was && now:
		if tr.fix != nil && st.node >= 0 && tr.t.Marked(st.node) {
			tr.fix.fix(slot)
		}
	case was:
		tr.unmarkHeld(slot)
	case now:
		tr.markHeld(slot)
	}
}

// rehead files the candidate in slot under its new head: a pool took its
// head blocks, so Auto counts it by the next. The node of its old head
// stays in the history, as a Policy's does for a candidate that changed.
func (tr *tracked) rehead(slot int32) {
	st := &tr.st[slot]
	if n := st.node; n >= 0 {
		tr.clearMark(n)
		tr.unlink(slot)
	}
	tr.t.Unhold(st.id)
	st.id = historyID(tr.cand(slot))
	n := tr.t.Hold(st.id, slot)
	if n >= 0 {
		tr.link(n, slot)
	}
	if n < 0 || !tr.t.Resident(n) {
		tr.wait(slot)
	} else if st.ranked {
		tr.ord.insert(slot)
	}
}

// remove forgets slot, which leaves the index, and with released the
// history forgets the candidate's ID, unless the history knows it by its
// head hash: a block that other sequences may share.
func (tr *tracked) remove(slot int32, released bool) {
	st := &tr.st[slot]
	if st.ranked {
		tr.unmarkHeld(slot)
	}
	tr.unlink(slot)
	tr.t.Unhold(st.id)
	c := tr.cand(slot)
	if released && c.HeadHash == 0 {
		tr.h.Forget(c.ID)
		tr.sync()
	}
	tr.gone(c.LastAccess)
	tr.st[slot] = unlinked
}

// access records a request for id in the history; Auto's candidate of id,
// whose count changed, is ranked again.
func (tr *tracked) access(id uint64) {
	tr.h.Access(id)
	tr.sync()
	if tr.fix == nil {
		return
	}
	if slot, ok := tr.find(id); ok && tr.st[slot].node >= 0 && tr.t.Marked(tr.st[slot].node) {
		tr.fix.fix(slot)
	}
}

// begin readies the history for an eviction: a pending request that the
// index holds, which is resident, is placed before the others are
// admitted, as a Policy does; then the waiting ids are admitted.
func (tr *tracked) begin() {
	if tr.lists != nil {
		if id, ok := tr.lists.PendingID(); ok {
			if _, held := tr.find(id); held {
				tr.lists.Commit()
				tr.sync()
			}
		}
	}
	tr.admitWaiting()
}

// commit evicts from the history the victims taken wholly from the order,
// whose slots are taken, in order; freed is the blocks they free.
func (tr *tracked) commit(taken []int32, freed int, trimmed bool) {
	if tr.lists != nil {
		evictChosen(tr.lists, trimmed)
	} else {
		a := tr.auto
		a.evicted(freed)
		for i, slot := range taken {
			if !trimmed || i < len(taken)-1 {
				a.evict(tr.st[slot].node, lonePartial(tr.cand(slot)))
			}
		}
		a.Finish()
	}
	tr.sync()
}

// rollback puts the victims taken from the order back, as they were.
func (tr *tracked) rollback(taken []int32) {
	if tr.lists != nil {
		restoreChosen(tr.lists)
	} else {
		for _, slot := range taken {
			tr.ord.insert(slot)
		}
		tr.auto.Finish()
	}
	tr.sync()
}

// sync keeps the marks true to their rule after a call into the history,
// from the nodes it moved, in order. A node may be dropped and made again
// for another id within one call: each move acts on what the node and
// the slots hold once the call returned.
func (tr *tracked) sync() {
	for _, m := range tr.t.Moved() {
		switch m.Kind {
		case lists.NodeMade:
			if m.Slot >= 0 {
				tr.st[m.Slot].node = m.N
			}
		case lists.NodeLinked:
			tr.linked(m.N)
		case lists.NodeDropped:
			if m.Slot >= 0 {
				tr.st[m.Slot].node = -1
				tr.ord.remove(m.Slot) // its mark went with the node
				tr.wait(m.Slot)
			}
		}
	}
}

// linked keeps node n's mark true to the rule after the history moved it.
func (tr *tracked) linked(n int32) {
	slot := tr.t.Slab[n].Cand
	if slot < 0 || tr.st[slot].node != n {
		return // freed since, or not yet linked to its slot: a later move says
	}
	if tr.t.Resident(n) {
		if tr.st[slot].ranked {
			tr.ord.insert(slot)
		}
		return
	}
	tr.clearMark(n)
	tr.wait(slot)
}

// admitWaiting admits into the history the held ids it does not hold as
// resident, oldest LastAccess first (ties by ID), as a Policy admits its
// new candidates. One without blocks keeps waiting: a Policy skips empty
// candidates.
func (tr *tracked) admitWaiting() {
	if len(tr.waiting) == 0 {
		return
	}
	admit := tr.waiting
	tr.waiting = tr.spare[:0] // sync adds to it while admit is read
	keep := admit[:0]
	for _, slot := range admit {
		st := &tr.st[slot]
		if !st.waiting {
			continue // released since, or listed twice
		}
		if len(tr.cand(slot).Blocks) == 0 {
			tr.waiting = append(tr.waiting, slot)
			continue
		}
		st.waiting = false
		if k := st.node; k >= 0 && tr.t.Resident(k) {
			continue
		}
		keep = append(keep, slot)
	}
	slices.SortFunc(keep, func(a, b int32) int { return byRecency(tr.cand(a), tr.cand(b)) })
	for _, slot := range keep {
		tr.h.Admit(tr.st[slot].id)
	}
	tr.sync() // marks the admitted
	tr.spare = keep[:0]
}

// wait lists slot for admission at the next eviction, once.
func (tr *tracked) wait(slot int32) {
	if tr.st[slot].waiting {
		return
	}
	tr.st[slot].waiting = true
	tr.waiting = listSlot(tr.waiting, slot, len(tr.st), func(s int32) *bool { return &tr.st[s].waiting })
}

// listSlot appends slot to list, a list of slots whose flag is set, and
// keeps the list within a constant factor of the n slots: released slots
// leave stale entries behind, which a compaction drops, with the repeats
// of a slot reused since.
func listSlot(list []int32, slot int32, n int, flag func(int32) *bool) []int32 {
	list = append(list, slot)
	if len(list) <= 2*n+16 {
		return list
	}
	live := list[:0]
	for _, s := range list {
		if f := flag(s); *f {
			*f = false // so a repeat is dropped
			live = append(live, s)
		}
	}
	for _, s := range live {
		*flag(s) = true
	}
	return live
}

// markHeld notes the candidate in slot as ranked: marked if the history
// holds it as resident; otherwise it waits for admission, which marks it.
func (tr *tracked) markHeld(slot int32) {
	tr.st[slot].ranked = true
	if n := tr.st[slot].node; n >= 0 && tr.t.Resident(n) {
		tr.ord.insert(slot)
	}
}

// unmarkHeld takes the candidate in slot out of the possible victims.
func (tr *tracked) unmarkHeld(slot int32) {
	tr.st[slot].ranked = false
	if n := tr.st[slot].node; n >= 0 {
		tr.clearMark(n)
	}
}

// clearMark takes node n out of the possible victims, and its candidate
// out of the order.
func (tr *tracked) clearMark(n int32) {
	if tr.t.Marked(n) {
		tr.ord.remove(tr.t.Slab[n].Cand)
	}
}

// seen notes LastAccess of a candidate added or changed, and old, its
// LastAccess before the change (math.MinInt64 for none).
func (tr *tracked) seen(old, now int64) {
	if now >= tr.maxTick {
		tr.maxTick = now
	} else if old == tr.maxTick {
		tr.maxStale = true
	}
}

// gone notes that a candidate of LastAccess last left the index.
func (tr *tracked) gone(last int64) {
	if last == tr.maxTick {
		tr.maxStale = true
	}
}

// now returns the largest LastAccess of the held candidates, as a Policy
// finds it over its slice. O(1), or O(n) after the candidate that held it
// left.
func (tr *tracked) now() int64 {
	if tr.maxStale {
		tr.maxTick, tr.maxStale = math.MinInt64, false
		for slot := range tr.st {
			if tr.st[slot].held {
				tr.maxTick = max(tr.maxTick, tr.cand(int32(slot)).LastAccess)
			}
		}
	}
	return tr.maxTick
}

// check verifies the rule of the marks for every held candidate: its node
// is marked, as this candidate, exactly when the history holds it as
// resident and it is ranked; a held id that the history does not hold as
// resident waits for admission. It returns the number of nodes marked.
func (tr *tracked) check() (marked int, err error) {
	if err := tr.h.Check(); err != nil {
		return 0, err
	}
	t := tr.t
	held := 0
	for slot := range tr.st {
		st := &tr.st[slot]
		if !st.held {
			continue // a free slot
		}
		held++
		c := tr.cand(int32(slot))
		if s, ok := tr.find(st.id); !ok || s != int32(slot) || st.id != tr.idOf(c) {
			return 0, fmt.Errorf("ID %d in slot %d: filed under %d, found at %d %v", c.ID, slot, st.id, s, ok)
		}
		if st.ranked != c.ranked() {
			return 0, fmt.Errorf("ID %d: ranked %v, noted %v", c.ID, c.ranked(), st.ranked)
		}
		k := t.Lookup(st.id)
		if st.node != k || k >= 0 && t.Slab[k].Cand != int32(slot) {
			return 0, fmt.Errorf("ID %d in slot %d: linked to node %d, its node is %d", c.ID, slot, st.node, k)
		}
		resident := k >= 0 && t.Resident(k)
		if k >= 0 && t.Marked(k) != (resident && c.ranked()) {
			return 0, fmt.Errorf("ID %d: marked %v, resident %v, ranked %v", c.ID, t.Marked(k), resident, c.ranked())
		}
		if !resident && !st.waiting {
			return 0, fmt.Errorf("ID %d: not resident in the history and not waiting for admission", c.ID)
		}
		if st.waiting && !slices.Contains(tr.waiting, int32(slot)) {
			return 0, fmt.Errorf("ID %d: waiting but not listed", c.ID)
		}
	}
	if held != t.Held() {
		return 0, fmt.Errorf("%d candidates held, %d filed in the table", held, t.Held())
	}
	for n := range t.Slab {
		x := &t.Slab[n]
		if !t.Live(int32(n)) {
			continue // a free node
		}
		slot, ok := tr.find(x.ID)
		if !ok {
			slot = -1
		}
		if x.Cand != slot || ok && tr.st[slot].node != int32(n) {
			return 0, fmt.Errorf("node %d (id %d): linked to slot %d, its slot is %d", n, x.ID, x.Cand, slot)
		}
		if t.Marked(int32(n)) {
			marked++
		}
	}
	if t.Unread() != 0 {
		return 0, fmt.Errorf("%d moves of the history not read", t.Unread())
	}
	return marked, nil
}
