package kvevict

import (
	"fmt"
	"slices"

	"github.com/sagellm/kvevict/internal/idmap"
)

// An Index of an adaptive strategy (ARC, S3-FIFO, SIEVE, Auto) keeps the
// strategy's history, the same one a Policy keeps. A Policy learns at each
// selection which nodes of the history are its candidates, marking them in
// O(n); the index keeps the marks between evictions instead, so an
// eviction costs what the history's own order costs, whatever the number
// of sequences.
//
// The marks follow one rule: a node is marked when the history holds its id
// as resident and the index holds it evictable. marks sets and clears them
// as candidates change, and hears from the table (tableObserver) when the
// history itself moves a node: into a ghost list, out of the table, or into
// the cache by a request. A held id that the history does not hold as
// resident waits, as a Policy's candidate would, to be admitted at the next
// eviction, oldest LastAccess first.
//
// The marks link each held candidate and the history's node for its id
// both ways, so that neither is looked up by id while both live: the node's
// cand is the candidate's slot (-1 for an id the index does not hold), and
// the slot's markState.node is the node (-1 for an id the history does not
// track). A node made for an id looks the id up once; a candidate added
// looks its node up once; a node dropped or a candidate removed cuts the
// link.

// marks is what the orders of the adaptive strategies share: the marks of
// the evictable candidates in the history's table and the ids waiting for
// admission. G follows the marks: Auto's groups (orderauto.go), or nothing
// for the lists (orderlist.go).
type marks[G follower] struct {
	slab []markSlot // the Index's candidates, by slot
	// slots maps the ID of each held candidate to its slot for a history
	// that knows candidates by another id (Auto); nil for the lists, whose
	// table maps the IDs it knows to their nodes and slots both, so
	// that a request finds the two in one look-up (tableEntry).
	slots *idmap.Map[int32]
	// heads, for a history that knows a candidate by its historyID
	// (Auto), maps the head hash of each held candidate that sets one to
	// its slot; nil for the lists, which know candidates by ID.
	heads   *idmap.Map[int32]
	h       history
	t       *table
	waiting []int32 // slots whose id the history may not hold as resident: admitted at the next eviction
	spare   []int32 // scratch: the previous waiting
	follow  G
}

// follower hears of every mark set and cleared.
type follower interface {
	marked(slot, n int32)
	unmarked(slot int32)
}

// markSlot is a slot of an adaptive order: its candidate and beside it
// what the marks keep of it, where one look at the candidate finds both.
type markSlot struct {
	c  Candidate
	st markState
}

// markState is what marks keeps of a slot.
type markState struct {
	node      int32 // the history's node for the candidate's id, or -1
	evictable bool  // the candidate is evictable: marked whenever the history holds it as resident
	waiting   bool  // in marks.waiting
}

// unlinked is the markState of a slot whose id the history does not track.
var unlinked = markState{node: -1}

func newMarks[G follower](h history, slots, heads *idmap.Map[int32], follow G) marks[G] {
	m := marks[G]{slots: slots, heads: heads, h: h, t: h.nodes(), follow: follow}
	m.t.nextEpoch() // the one epoch of the index's marks
	return m
}

func (m *marks[G]) grow(n int) {
	m.slab = slices.Grow(m.slab, n)
	m.waiting = slices.Grow(m.waiting, n)
	m.t.reserve(n)
	if m.slots != nil {
		m.slots.Reserve(n)
	}
}

// add files a new candidate: marked if the history holds its id as
// resident and it is evictable; else, if not resident, it waits for
// admission.
func (m *marks[G]) add(slot int32, c Candidate) {
	if int(slot) == len(m.slab) {
		m.slab = append(m.slab, markSlot{})
	}
	m.slab[slot] = markSlot{c: c, st: unlinked}
	var n int32
	if m.slots != nil {
		m.slots.Put(c.ID, slot)
		n = m.t.lookup(m.id(slot))
	} else {
		n = m.t.hold(c.ID, slot)
	}
	if n >= 0 {
		m.link(n, slot)
	}
	if m.slab[slot].c.ranked() {
		m.markHeld(slot)
	}
	if n < 0 || !m.t.resident(n) {
		m.wait(slot)
	}
}

// link notes that node n stands for the candidate in slot.
func (m *marks[G]) link(n, slot int32) {
	m.t.slab[n].cand = slot
	m.slab[slot].st.node = n
}

// unlink cuts the link of the candidate in slot to its node, if any.
func (m *marks[G]) unlink(slot int32) {
	if n := m.slab[slot].st.node; n >= 0 {
		m.t.slab[n].cand = -1
		m.slab[slot].st.node = -1
	}
}

// update sets or clears the mark of slot as its evictability requires.
// It reports whether the candidate was and still is evictable: its fields
// changed while marked, which a follower may need to know.
func (m *marks[G]) update(slot int32) (stayed bool) {
	was, now := m.slab[slot].st.evictable, m.slab[slot].c.ranked()
	switch {
	case was && now:
		return true
	case was:
		m.unmarkHeld(slot)
	case now:
		m.markHeld(slot)
	}
	return false
}

func (m *marks[G]) cand(slot int32) *Candidate { return &m.slab[slot].c }

// id returns the id by which the history knows the candidate in slot:
// Auto's historyID, the ID for the lists.
func (m *marks[G]) id(slot int32) uint64 {
	if m.heads != nil {
		return historyID(&m.slab[slot].c)
	}
	return m.slab[slot].c.ID
}

// slotOf returns the slot of the held candidate the history knows as id.
// O(1).
func (m *marks[G]) slotOf(id uint64) (int32, bool) {
	if m.heads != nil {
		if s, ok := m.heads.Get(id); ok {
			return s, true
		}
	}
	s, ok := m.find(id)
	if ok && m.heads != nil && m.slab[s].c.HeadHash != 0 {
		return 0, false // known by its head, not its ID
	}
	return s, ok
}

// remove forgets slot, which leaves the index, and with released the
// history forgets the candidate's ID, unless the history knows it by its
// head hash: a block that other sequences may share.
func (m *marks[G]) remove(slot int32, released bool) {
	if m.slab[slot].st.evictable {
		m.unmarkHeld(slot)
	}
	m.unlink(slot)
	c := &m.slab[slot].c
	if m.slots != nil {
		m.slots.Del(c.ID)
	} else {
		m.t.unhold(c.ID)
	}
	if released && c.HeadHash == 0 {
		m.h.forget(c.ID)
	}
	m.slab[slot] = markSlot{st: unlinked}
}

// find returns the slot of the held candidate of ID id. O(1).
func (m *marks[G]) find(id uint64) (int32, bool) {
	if m.slots != nil {
		return m.slots.Get(id)
	}
	return m.t.heldSlot(id)
}

// admitWaiting admits into the history the held ids it does not hold as
// resident, oldest LastAccess first (ties by ID), as a Policy admits its
// new candidates. One without blocks keeps waiting: a Policy skips empty
// candidates.
func (m *marks[G]) admitWaiting() {
	if len(m.waiting) == 0 {
		return
	}
	slab := m.slab
	admit := m.waiting
	m.waiting = m.spare[:0] // the observer may add to it while admit is read
	keep := admit[:0]
	for _, slot := range admit {
		st := &m.slab[slot].st
		if !st.waiting {
			continue // released since, or listed twice
		}
		if len(slab[slot].c.Blocks) == 0 {
			m.waiting = append(m.waiting, slot)
			continue
		}
		st.waiting = false
		if k := st.node; k >= 0 && m.t.resident(k) {
			continue
		}
		keep = append(keep, slot)
	}
	slices.SortFunc(keep, func(a, b int32) int { return byRecency(&slab[a].c, &slab[b].c) })
	for _, slot := range keep {
		m.h.admit(m.id(slot)) // the observer marks it
	}
	m.spare = keep[:0]
}

// wait lists slot for admission at the next eviction, once.
func (m *marks[G]) wait(slot int32) {
	if m.slab[slot].st.waiting {
		return
	}
	m.slab[slot].st.waiting = true
	m.waiting = listSlot(m.waiting, slot, len(m.slab), func(s int32) *bool { return &m.slab[s].st.waiting })
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

// markHeld notes the candidate in slot as evictable: marked if the history
// holds it as resident; otherwise it waits for admission, which marks it.
func (m *marks[G]) markHeld(slot int32) {
	m.slab[slot].st.evictable = true
	if n := m.slab[slot].st.node; n >= 0 && m.t.resident(n) {
		m.setMark(n, slot)
	}
}

// unmarkHeld takes the candidate in slot out of the possible victims.
func (m *marks[G]) unmarkHeld(slot int32) {
	m.slab[slot].st.evictable = false
	if n := m.slab[slot].st.node; n >= 0 {
		m.clearMark(n)
	}
}

// setMark marks node n as the evictable candidate in slot.
func (m *marks[G]) setMark(n, slot int32) {
	m.t.mark(n, slot)
	m.follow.marked(slot, n)
}

// clearMark takes node n out of the possible victims.
func (m *marks[G]) clearMark(n int32) {
	if !m.t.marked(n) {
		return
	}
	m.follow.unmarked(m.t.slab[n].cand)
	m.t.unmark(n)
}

// made links node n, new, to the held candidate of its id, if any: the
// marks are the table's observer.
func (m *marks[G]) made(n int32) {
	m.t.slab[n].cand = -1
	if slot, ok := m.slotOf(m.t.slab[n].id); ok {
		m.link(n, slot)
	}
}

// linked keeps node n's mark true to the rule when the history moved it.
func (m *marks[G]) linked(n int32) {
	slot := m.t.slab[n].cand
	if slot < 0 {
		return
	}
	if m.t.resident(n) {
		if m.slab[slot].st.evictable {
			m.setMark(n, slot)
		}
		return
	}
	m.clearMark(n)
	m.wait(slot)
}

// dropped lists a held id whose node n the history forgot for admission,
// its mark gone with the node.
func (m *marks[G]) dropped(n int32) {
	if slot := m.t.slab[n].cand; slot >= 0 {
		m.slab[slot].st.node = -1
		m.follow.unmarked(slot)
		m.wait(slot)
	}
}

// check verifies the rule of the marks for every held candidate: its node
// is marked, as this candidate, exactly when the history holds it as
// resident and it is evictable; a held id that the history does not hold
// as resident waits for admission. It returns the number of nodes marked.
func (m *marks[G]) check() (marked int, err error) {
	if err := m.h.check(); err != nil {
		return 0, err
	}
	held, indexed := 0, m.t.onlyHeld
	if m.slots != nil {
		if err := m.slots.Check(); err != nil {
			return 0, err
		}
		indexed = m.slots.Len()
	}
	for slot := range m.slab {
		c := &m.slab[slot].c
		if s, ok := m.find(c.ID); !ok || s != int32(slot) {
			continue // a free slot
		}
		held++
		st := &m.slab[slot].st
		if st.evictable != c.ranked() {
			return 0, fmt.Errorf("ID %d: evictable %v, noted %v", c.ID, c.ranked(), st.evictable)
		}
		k := m.t.lookup(m.id(int32(slot)))
		if st.node != k || k >= 0 && m.t.slab[k].cand != int32(slot) {
			return 0, fmt.Errorf("ID %d in slot %d: linked to node %d, its node is %d", c.ID, slot, st.node, k)
		}
		resident := k >= 0 && m.t.resident(k)
		if k >= 0 && m.t.marked(k) != (resident && c.ranked()) {
			return 0, fmt.Errorf("ID %d: marked %v, resident %v, evictable %v", c.ID, m.t.marked(k), resident, c.ranked())
		}
		if k >= 0 && m.t.marked(k) && m.t.slab[k].cand != int32(slot) {
			return 0, fmt.Errorf("ID %d: marked as slot %d, held in %d", c.ID, m.t.slab[k].cand, slot)
		}
		if !resident && !st.waiting {
			return 0, fmt.Errorf("ID %d: not resident in the history and not waiting for admission", c.ID)
		}
		if st.waiting && !slices.Contains(m.waiting, int32(slot)) {
			return 0, fmt.Errorf("ID %d: waiting but not listed", c.ID)
		}
	}
	for n := range m.t.slab {
		x := &m.t.slab[n]
		if e, ok := m.t.index.Get(x.id); !ok || e.node != int32(n) {
			continue // a free node
		}
		if m.slots == nil && x.cand >= 0 {
			indexed++ // its entry finds the candidate too
		}
		slot, held := m.slotOf(x.id)
		if !held {
			slot = -1
		}
		if x.cand != slot || held && m.slab[slot].st.node != int32(n) {
			return 0, fmt.Errorf("node %d (id %d): linked to slot %d, its slot is %d", n, x.id, x.cand, slot)
		}
		if m.t.marked(int32(n)) {
			marked++
		}
	}
	if held != indexed {
		return 0, fmt.Errorf("%d candidates held, %d indexed", held, indexed)
	}
	return marked, nil
}
