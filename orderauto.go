package kvevict

import (
	"fmt"
	"math"
	"slices"

	"github.com/sagellm/kvevict/internal/dlist"
	"github.com/sagellm/kvevict/internal/idmap"
)

// An Index of [Auto] ranks as Auto's Policy does, by score = LastAccess +
// W x log2(requests) with W set at each eviction, but without scoring every
// candidate. Two candidates requested as often (the same log2(requests))
// and both lone partial blocks or both not keep their order whatever W
// is: by LastAccess, then ID. So the index keeps the marked candidates in
// groups of equal (partial, log2(requests)), each a list in that order,
// and an eviction walks each group from its front only while the score is
// below the largest of the victims chosen so far: the same greedy
// selection over the same scores, offered O(groups + victims) entries
// instead of every candidate.
//
// A candidate joins its group when it is marked, leaves when it is
// unmarked, and moves when its fields change (LastAccess, a partial last
// block) or the history counts a request for it. A move lands in its
// place by a walk from the group's back: one step under a clock that only
// grows, as a touch always lands last; a candidate added or updated with
// an older LastAccess walks further. A request counted by UpdateAccess
// takes the candidate out of its group until the next eviction files it
// again, because the allocator usually acquires or touches a requested
// sequence before then: acquiring keeps it out, and touching files it at
// its group's back, one step.

// autoOrder is the order of an Index of Auto: its history's marks, and
// the groups that follow them.
type autoOrder struct {
	marks[*autoGroups]
	// heads are the held candidates that set a HeadHash, by it: Auto
	// knows them by it (the marks' heads); the others by their ID.
	heads  idmap.Map[int32]
	ids    idmap.Map[int32] // the held candidates, by ID: the marks' slots
	a      *auto
	g      *autoGroups // marks.follow
	sel    selector    // the greedy selection over the groups' fronts
	ranked []entry     // the victims of the eviction under way, smallest first
	taken  int         // how many of ranked next handed out
}

func newAutoOrder(a *auto) *autoOrder {
	g := &autoGroups{byKey: make(map[autoGroupKey]int32), maxTick: math.MinInt64, a: a}
	o := &autoOrder{a: a, g: g}
	o.marks = newMarks(a, &o.ids, &o.heads, g)
	g.cands = &o.slab
	o.t.observer = &o.marks
	return o
}

func (o *autoOrder) grow(n int) {
	o.marks.grow(n)
	o.a.info = slices.Grow(o.a.info, n)
	o.g.slots = slices.Grow(o.g.slots, n)
	o.g.links = slices.Grow(o.g.links, n)
}

func (o *autoOrder) add(slot int32, c Candidate) {
	g := o.g
	if int(slot) == len(g.slots) {
		g.slots = append(g.slots, autoSlot{})
		g.links = append(g.links, dlist.Link{Prev: dlist.None, Next: dlist.None})
	}
	g.slots[slot] = autoSlot{held: true, id: historyID(&c)}
	if c.HeadHash != 0 {
		o.heads.Put(c.HeadHash, slot)
	}
	g.seen(math.MinInt64, c.LastAccess)
	o.marks.add(slot, c)
}

// accepts refuses a candidate known to the history by the id of another
// held one: two candidates sharing a head would share one node, and a
// node marks one slot.
func (o *autoOrder) accepts(slot int32, id, head uint64) error {
	s, held := o.heads.Get(id) // a head equal to this ID; the Index refuses a held ID itself
	if head != 0 {
		s, held = o.slotOf(head)
	}
	if held && s != slot {
		return fmt.Errorf("%w: ID %d is counted as %d, as ID %d in the index is (a HeadHash or an ID held twice)",
			ErrInvalidCandidate, id, headOr(head, id), o.slab[s].c.ID)
	}
	return nil
}

// update files a candidate that stayed marked again: its group follows
// LastAccess and a partial last block.
func (o *autoOrder) update(slot int32, tick int64) {
	o.g.seen(tick, o.slab[slot].c.LastAccess)
	if id := historyID(&o.slab[slot].c); id != o.g.slots[slot].id {
		o.rehead(slot, id)
	}
	if o.marks.update(slot) {
		o.regroup(slot)
	}
}

// rehead files the candidate in slot under id, its new head: a pool took
// its head blocks, so Auto counts it by the next. The node of its old head
// stays in the history, as a Policy's does for a candidate that changed.
func (o *autoOrder) rehead(slot int32, id uint64) {
	st := &o.g.slots[slot]
	if n := o.slab[slot].st.node; n >= 0 {
		o.clearMark(n)
		o.unlink(slot)
	}
	o.dropHead(slot, st.id)
	if h := o.slab[slot].c.HeadHash; h != 0 {
		o.heads.Put(h, slot)
	}
	st.id = id
	n := o.t.lookup(id)
	if n >= 0 {
		o.link(n, slot)
	}
	if n < 0 || !o.t.resident(n) {
		o.wait(slot)
	} else if o.slab[slot].st.evictable {
		o.setMark(n, slot)
	}
}

// dropHead forgets that the candidate in slot is known by head id, if it
// was.
func (o *autoOrder) dropHead(slot int32, id uint64) {
	if s, ok := o.heads.Get(id); ok && s == slot {
		o.heads.Del(id)
	}
}

func (o *autoOrder) remove(slot int32, released bool) {
	last := o.slab[slot].c.LastAccess
	o.dropHead(slot, o.g.slots[slot].id)
	o.marks.remove(slot, released)
	o.g.gone(last)
	o.g.slots[slot] = autoSlot{}
}

// access counts the request in the history, and takes id's candidate out
// of its group until the next eviction files it again.
func (o *autoOrder) access(id uint64) {
	o.a.access(id)
	o.requested(id)
}

// accessHashes counts a request for each block of hashes, as a Policy of
// Auto does, taking each held candidate of those heads out of its group.
func (o *autoOrder) accessHashes(hashes []uint64) {
	o.a.weights.Cautious = true
	for _, h := range hashes {
		o.access(h)
	}
}

// begin admits the waiting ids and ranks: the greedy selection by Auto's
// key over the groups.
func (o *autoOrder) begin(required, available int) {
	o.admitWaiting()
	o.ranked, o.taken = o.greedy(required, available), 0
}

func (o *autoOrder) next() (int32, *Candidate) {
	if o.taken == len(o.ranked) {
		panic("kvevict: the index's groups lost an evictable candidate")
	}
	o.taken++
	slot := o.ranked[o.taken-1].Slot
	return slot, &o.slab[slot].c
}

// commit evicts the victims taken wholly from the history; a trimmed one
// keeps its head and is a possible victim of the next eviction again.
func (o *autoOrder) commit(taken []int32, freed int, trimmed bool) {
	a, cands := o.a, o.slab
	a.evicted(freed)
	for i, slot := range taken {
		c := &cands[slot].c
		n := o.slab[slot].st.node // marked when taken, so linked
		o.clearMark(n)
		if !trimmed || i < len(taken)-1 {
			a.evict(n, lonePartial(c))
		}
	}
	a.finish()
	if trimmed {
		o.markHeld(taken[len(taken)-1])
	}
}

// rollback evicts nothing; the history's bounds hold again after the
// admissions of begin.
func (o *autoOrder) rollback([]int32) { o.a.finish() }

// autoGroups are the groups of an Index of Auto.
type autoGroups struct {
	a       *auto
	cands   *[]markSlot            // the order's candidates, by slot (marks.slab)
	slots   []autoSlot             // by slot
	byKey   map[autoGroupKey]int32 // group of each (partial, log2r) held
	groups  []autoGroup            // by number; an empty one is free
	live    []int32                // the groups that hold candidates
	free    []int32                // numbers of empty groups, for reuse
	links   dlist.Links            // the groups' lists, by slot
	refile  []int32                // slots out of their group since a request was counted
	maxTick int64                  // the largest LastAccess held, unless maxStale
	// maxStale is set when the candidate holding maxTick left or went
	// back in time: the next eviction finds the largest again.
	maxStale bool
}

// autoSlot is what the groups keep of a slot.
type autoSlot struct {
	group  int32  // 1 + the group that holds the candidate, or 0
	refile bool   // in autoGroups.refile
	held   bool   // the slot holds a candidate
	id     uint64 // the candidate's historyID, as filed in heads
}

type autoGroupKey struct {
	partial bool
	log2r   float32
}

type autoGroup struct {
	key  autoGroupKey
	list dlist.List // ascending by (LastAccess, ID)
	at   int32      // index in live
	// last is the slot filed last, or dlist.None: where a walk to file the
	// next starts when that one is neither the newest nor the oldest. An
	// eviction admits its waiting candidates oldest first, each after the
	// one before; a walk from the back would pass the group for each (on
	// a tier of Auto, whose history drops a long-held block that no
	// request touched and admits it again, thousands of steps a block).
	last int32
}

// marked files the candidate in slot, marked as node n, in its group.
func (g *autoGroups) marked(slot, n int32) {
	st := &g.slots[slot]
	if st.group != 0 {
		return
	}
	key := autoGroupKey{partial: lonePartial(&(*g.cands)[slot].c), log2r: g.a.info[n].log2Requests}
	gi, ok := g.byKey[key]
	if !ok {
		gi = g.open(key)
	}
	grp := &g.groups[gi]
	at := grp.list.Back
	switch {
	case at == dlist.None || g.sortsBefore(at, slot): // the newest: last
	case !g.sortsBefore(grp.list.Front, slot): // the oldest: first
		at = dlist.None
	case grp.last != dlist.None && g.sortsBefore(grp.last, slot):
		// Forward from the one filed last; the back ends the walk.
		at = grp.last
		for n := g.links.Next(at); g.sortsBefore(n, slot); n = g.links.Next(n) {
			at = n
		}
	default: // back from the back; the front ends the walk
		for !g.sortsBefore(at, slot) {
			at = g.links.Prev(at)
		}
	}
	g.links.InsertAfter(&grp.list, at, slot)
	grp.last = slot
	st.group = gi + 1
}

// sortsBefore reports whether the candidate in slot a sorts before the one
// in slot b within a group: by LastAccess, then ID.
func (g *autoGroups) sortsBefore(a, b int32) bool {
	return byRecency(&(*g.cands)[a].c, &(*g.cands)[b].c) < 0
}

// unmarked takes the candidate in slot out of its group, if it is in one.
func (g *autoGroups) unmarked(slot int32) {
	st := &g.slots[slot]
	if st.group == 0 {
		return
	}
	gi := st.group - 1
	if g.groups[gi].last == slot {
		g.groups[gi].last = g.links.Prev(slot)
	}
	g.links.Remove(&g.groups[gi].list, slot)
	st.group = 0
	if g.groups[gi].list.Len == 0 {
		g.close(gi)
	}
}

// open starts a group of key and returns its number.
func (g *autoGroups) open(key autoGroupKey) int32 {
	var gi int32
	if n := len(g.free); n > 0 {
		gi = g.free[n-1]
		g.free = g.free[:n-1]
	} else {
		gi = int32(len(g.groups))
		g.groups = append(g.groups, autoGroup{})
	}
	g.groups[gi] = autoGroup{key: key, list: dlist.Empty(), at: int32(len(g.live)), last: dlist.None}
	g.live = append(g.live, gi)
	g.byKey[key] = gi
	return gi
}

// close frees empty group gi, so that an eviction walks only the groups
// that hold candidates.
func (g *autoGroups) close(gi int32) {
	at, last := g.groups[gi].at, g.live[len(g.live)-1]
	g.live[at] = last
	g.groups[last].at = at
	g.live = g.live[:len(g.live)-1]
	delete(g.byKey, g.groups[gi].key)
	g.free = append(g.free, gi)
}

// regroup files a marked candidate again after its fields changed.
func (o *autoOrder) regroup(slot int32) {
	o.g.unmarked(slot)
	if n := o.slab[slot].st.node; n >= 0 && o.t.marked(n) {
		o.g.marked(slot, n)
	}
}

// requested takes id's candidate out of its group after the history
// counted a request for it, until the next eviction files it again.
func (o *autoOrder) requested(id uint64) {
	g := o.g
	slot, ok := o.slotOf(id)
	if !ok || g.slots[slot].group == 0 {
		return
	}
	g.unmarked(slot)
	if !g.slots[slot].refile { // once per slot between evictions
		g.slots[slot].refile = true
		g.refile = listSlot(g.refile, slot, len(g.slots), func(s int32) *bool { return &g.slots[s].refile })
	}
}

// seen notes LastAccess of a candidate added or changed, and old, its
// LastAccess before the change (math.MinInt64 for none).
func (g *autoGroups) seen(old, now int64) {
	if now >= g.maxTick {
		g.maxTick = now
	} else if old == g.maxTick {
		g.maxStale = true
	}
}

// gone notes that a candidate of LastAccess last left the index.
func (g *autoGroups) gone(last int64) {
	if last == g.maxTick {
		g.maxStale = true
	}
}

// now returns the largest LastAccess of the held candidates, as a Policy
// finds it over its slice. O(1), or O(n) after the candidate that held it
// left.
func (g *autoGroups) now() int64 {
	if g.maxStale {
		g.maxTick, g.maxStale = math.MinInt64, false
		for slot := range g.slots {
			if g.slots[slot].held {
				g.maxTick = max(g.maxTick, (*g.cands)[slot].c.LastAccess)
			}
		}
	}
	return g.maxTick
}

// greedy is Auto's selection for an index: the candidates out of their
// group are filed again, then each group offers its front to the
// selection while the score stays below the bound of the victims chosen
// so far. It returns the victims, smallest first (Slot: the index's slot),
// valid until the next selection.
func (o *autoOrder) greedy(required, available int) []entry {
	g, a, cands := o.g, o.a, o.slab
	for _, slot := range g.refile {
		if g.slots[slot].refile { // not released since
			g.slots[slot].refile = false
			o.regroup(slot)
		}
	}
	g.refile = g.refile[:0]
	a.begin(g.now(), available)
	o.sel.begin(required, o.ids.Len())
	bounded := false
	var bound entry
	for _, gi := range g.live {
		for slot := g.groups[gi].list.Front; slot != dlist.None; slot = g.links.Next(slot) {
			c := &cands[slot].c
			e := newEntry(c, a.keyOf(c), slot)
			if bounded && !less(&e, &bound) {
				break // the rest of the group scores higher still
			}
			bounded = o.sel.offer(e, &bound)
		}
	}
	return o.sel.victims()
}

// check verifies the marks and the groups: each live group holds
// candidates of its key in ascending (LastAccess, ID), every candidate in
// a group is marked, and every marked one is in a group or waits to be
// filed again.
func (o *autoOrder) check() error {
	marked, err := o.marks.check()
	if err != nil {
		return err
	}
	g, a, cands := o.g, o.a, o.slab
	grouped := 0
	for i, gi := range g.live {
		grp := &g.groups[gi]
		if grp.at != int32(i) || grp.list.Len == 0 || g.byKey[grp.key] != gi {
			return fmt.Errorf("group %d: at %d (live %d), %d members, key maps to %d", gi, grp.at, i, grp.list.Len, g.byKey[grp.key])
		}
		prev := dlist.None
		err := g.links.Check(&grp.list, func(slot int32) error {
			c := &cands[slot].c
			n := o.t.lookup(o.id(slot))
			switch {
			case g.slots[slot].group != gi+1:
				return fmt.Errorf("ID %d in group %d says %d", c.ID, gi+1, g.slots[slot].group)
			case n < 0 || !o.t.marked(n):
				return fmt.Errorf("ID %d in a group is not marked", c.ID)
			case (autoGroupKey{lonePartial(c), a.info[n].log2Requests}) != grp.key:
				return fmt.Errorf("ID %d in group %+v belongs elsewhere", c.ID, grp.key)
			case prev != dlist.None && !g.sortsBefore(prev, slot):
				return fmt.Errorf("group %+v: ID %d after ID %d out of order", grp.key, c.ID, cands[prev].c.ID)
			}
			prev = slot
			return nil
		})
		if err != nil {
			return err
		}
		grouped += grp.list.Len
	}
	if len(g.byKey) != len(g.live) {
		return fmt.Errorf("%d group keys, %d live groups", len(g.byKey), len(g.live))
	}
	for _, slot := range g.refile {
		if g.slots[slot].held && g.slots[slot].group == 0 {
			grouped++ // counted once: filed again at the next eviction
		}
	}
	if grouped < marked {
		return fmt.Errorf("%d candidates grouped or waiting, %d marked", grouped, marked)
	}
	return nil
}
