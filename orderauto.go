package kvevict

import (
	"fmt"

	"github.com/sagellm/kvevict/internal/dlist"
	"github.com/sagellm/kvevict/internal/lists"
)

// An Index of [Auto] ranks as Auto's Policy does, by score = LastAccess +
// W x log2(requests) with W set at each eviction, but without scoring every
// candidate. Two candidates requested as often (the same log2(requests))
// and both lone partial blocks or both not keep their order whatever W
// is: by LastAccess, then ID. So the index keeps the marked candidates in
// groups of equal (partial, log2(requests)), each in that order, and an
// eviction walks each group in order from its smallest only while the
// score is below the largest of the victims chosen so far: the same greedy
// selection over the same scores, offered O(groups + victims) entries
// instead of every candidate.
//
// A candidate joins its group when it is marked and leaves when it is
// unmarked. When its fields change (LastAccess, a partial last block) or
// the history counts a request for it, it leaves its group until the next
// eviction files it again, because the allocator usually acquires or
// touches a requested sequence more than once before then: acquiring
// keeps it out. Filed again, it lands in O(1) at the back of its group's
// sorted list, as a touched candidate does under a clock that only grows,
// or at its front, or right after the candidate filed last there; a
// candidate whose place is elsewhere in the list (a request counted for a
// sequence that keeps its old LastAccess lands in the middle of the group
// of its new count) goes to the group's min-heap instead, O(log n), where
// a walk of the list would be O(n). An eviction reads a group by merging
// its list's front with its heap's smallest.

// autoOrder is the order of an Index of Auto: the groups of its marked
// candidates.
type autoOrder struct {
	a      *auto
	t      *lists.Table           // a's
	slots  *dlist.Nodes[held]     // the Index's: the candidates, and the groups' links
	st     *[]markState           // the Index's: each candidate's node, group and place in it
	byKey  map[autoGroupKey]int32 // group of each (partial, log2r) held
	groups []autoGroup            // by number; an empty one is free
	live   []int32                // the groups that hold candidates
	free   []int32                // numbers of empty groups, for reuse
	refile []int32                // slots out of their group since they changed
	walk   []int32                // places in a group's heap an eviction offers next
	sel    selector               // the greedy selection over the groups' fronts
	ranked []entry                // the victims of the eviction under way, smallest first
	taken  int                    // how many of ranked next handed out
}

func newAutoOrder(a *auto, slots *dlist.Nodes[held], st *[]markState) *autoOrder {
	return &autoOrder{a: a, t: &a.Table, slots: slots, st: st, byKey: make(map[autoGroupKey]int32)}
}

type autoGroupKey struct {
	partial bool
	log2r   float32
}

type autoGroup struct {
	key  autoGroupKey
	list dlist.List  // ascending by (LastAccess, ID)
	heap []autoEntry // the rest: a min-heap by (LastAccess, ID), autoArity children a node
	at   int32       // index in live
	// last is the slot filed last in list, or dlist.None: an eviction
	// admits its waiting candidates oldest first, each after the one
	// before (on a tier of Auto, whose history drops a long-held block
	// that no request touched and admits it again, thousands a run), so
	// the place right after it is tried before the heap.
	last int32
}

// inList is the markState.at of a grouped candidate in its group's list,
// not its heap.
const inList = -1

// autoEntry is a candidate in its group's heap: its LastAccess when it was
// filed, which stays its LastAccess while it is there (a change takes it
// out), and its slot.
type autoEntry struct {
	last int64
	slot int32
}

// autoArity is the number of children of a node of a group's heap: half
// the depth of a binary heap, as the key orders' heap (package rank).
const autoArity = 4

func (o *autoOrder) cand(slot int32) *Candidate { return &(*o.slots)[slot].Val.c }

// insert marks the node of the candidate in slot and files the candidate
// in its group: in O(1) in its list at the back, the front or right after
// the slot filed last there, or else in its heap, O(log n).
func (o *autoOrder) insert(slot int32) {
	st := &(*o.st)[slot]
	n := st.node
	o.t.Mark(n, slot)
	if st.group != 0 {
		return
	}
	key := autoGroupKey{partial: lonePartial(o.cand(slot)), log2r: o.a.info[n].log2Requests}
	gi, ok := o.byKey[key]
	if !ok {
		gi = o.open(key)
	}
	st.group = gi + 1
	grp, links := &o.groups[gi], *o.slots
	at := grp.list.Back
	switch {
	case at == dlist.None || o.sortsBefore(at, slot): // the newest: last
	case !o.sortsBefore(grp.list.Front, slot): // the oldest: first
		at = dlist.None
	case grp.last != dlist.None && o.sortsBefore(grp.last, slot) && o.sortsBefore(slot, links.Next(grp.last)):
		at = grp.last // right after the one filed last
	default: // in the middle: the heap
		st.at = int32(len(grp.heap))
		grp.heap = append(grp.heap, autoEntry{last: o.cand(slot).LastAccess, slot: slot})
		o.up(grp.heap, len(grp.heap)-1)
		return
	}
	links.InsertAfter(&grp.list, at, slot)
	grp.last = slot
	st.at = inList
}

// sortsBefore reports whether the candidate in slot a sorts before the one
// in slot b within a group: by LastAccess, then ID.
func (o *autoOrder) sortsBefore(a, b int32) bool { return byRecency(o.cand(a), o.cand(b)) < 0 }

// before reports whether a sorts before b within a group: by LastAccess,
// then ID.
func (o *autoOrder) before(a, b autoEntry) bool {
	if a.last != b.last {
		return a.last < b.last
	}
	return o.cand(a.slot).ID < o.cand(b.slot).ID
}

// put stores e at place j of h and notes the place in its slot's state.
func (o *autoOrder) put(h []autoEntry, j int, e autoEntry) {
	h[j] = e
	(*o.st)[e.slot].at = int32(j)
}

// up moves the entry at place j of h toward the root while it sorts
// before its parent.
func (o *autoOrder) up(h []autoEntry, j int) {
	e := h[j]
	for j > 0 {
		p := (j - 1) / autoArity
		if !o.before(e, h[p]) {
			break
		}
		o.put(h, j, h[p])
		j = p
	}
	o.put(h, j, e)
}

// down moves the entry at place j of h toward the leaves while a child
// sorts before it.
func (o *autoOrder) down(h []autoEntry, j int) {
	e := h[j]
	for {
		c := autoArity*j + 1
		if c >= len(h) {
			break
		}
		m := c
		for k := c + 1; k < min(c+autoArity, len(h)); k++ {
			if o.before(h[k], h[m]) {
				m = k
			}
		}
		if !o.before(h[m], e) {
			break
		}
		o.put(h, j, h[m])
		j = m
	}
	o.put(h, j, e)
}

// remove unmarks the node of the candidate in slot, if it has one, and
// takes the candidate out of its group, if it is in one.
func (o *autoOrder) remove(slot int32) {
	if n := (*o.st)[slot].node; n >= 0 {
		o.t.Unmark(n)
	}
	o.ungroup(slot)
}

// ungroup takes the candidate in slot out of its group, if it is in one:
// O(1) from its list, O(log n) from its heap.
func (o *autoOrder) ungroup(slot int32) {
	st := &(*o.st)[slot]
	if st.group == 0 {
		return
	}
	gi, j := st.group-1, int(st.at)
	st.group = 0
	grp := &o.groups[gi]
	if j == inList {
		if grp.last == slot {
			grp.last = o.slots.Prev(slot)
		}
		o.slots.Remove(&grp.list, slot)
	} else {
		last := len(grp.heap) - 1
		moved := grp.heap[last]
		grp.heap = grp.heap[:last]
		if j != last {
			o.put(grp.heap, j, moved)
			o.up(grp.heap, j)
			o.down(grp.heap, int((*o.st)[moved.slot].at))
		}
	}
	if grp.list.Len == 0 && len(grp.heap) == 0 {
		o.close(gi)
	}
}

// fix takes the marked candidate in slot, whose fields or count of
// requests changed, out of its group until the next eviction files it
// again: O(1) from its group's list, O(log n) from its heap.
func (o *autoOrder) fix(slot int32) {
	st := &(*o.st)[slot]
	if st.group == 0 {
		return // out of its group already
	}
	o.ungroup(slot)
	if !st.refile { // once per slot between evictions
		st.refile = true
		o.refile = listSlot(o.refile, slot, len(*o.st), func(s int32) *bool { return &(*o.st)[s].refile })
	}
}

// open starts a group of key and returns its number. A free group's heap
// keeps its array for the next group that takes its number.
func (o *autoOrder) open(key autoGroupKey) int32 {
	var gi int32
	if n := len(o.free); n > 0 {
		gi = o.free[n-1]
		o.free = o.free[:n-1]
	} else {
		gi = int32(len(o.groups))
		o.groups = append(o.groups, autoGroup{})
	}
	o.groups[gi] = autoGroup{key: key, list: dlist.Empty(), heap: o.groups[gi].heap[:0], at: int32(len(o.live)), last: dlist.None}
	o.live = append(o.live, gi)
	o.byKey[key] = gi
	return gi
}

// close frees empty group gi, so that an eviction walks only the groups
// that hold candidates.
func (o *autoOrder) close(gi int32) {
	at, last := o.groups[gi].at, o.live[len(o.live)-1]
	o.live[at] = last
	o.groups[last].at = at
	o.live = o.live[:len(o.live)-1]
	delete(o.byKey, o.groups[gi].key)
	o.free = append(o.free, gi)
}

// prepare ranks for an eviction of required blocks among candidates
// holding available, at now, the largest LastAccess held: the candidates
// out of their group are filed again, then each group offers its
// candidates in order, from its smallest, to Auto's greedy selection while
// the score stays below the bound of the victims chosen so far. A group
// offers them by merging a walk of its list from the front with a walk of
// its heap that keeps the places whose parent it offered in a small heap
// of its own: O(m log m) for m offered from the heap, O(1) each from the
// list.
func (o *autoOrder) prepare(required, available int, now int64) {
	for _, slot := range o.refile {
		st := &(*o.st)[slot]
		if !st.refile {
			continue // released since
		}
		st.refile = false
		if n := st.node; n >= 0 && o.t.Marked(n) {
			o.ungroup(slot)
			o.insert(slot)
		}
	}
	o.refile = o.refile[:0]
	o.a.begin(now, available)
	o.sel.begin(required, len(*o.st))
	bounded := false
	var bound entry
	links := *o.slots
	for _, gi := range o.live {
		grp := &o.groups[gi]
		h, ls := grp.heap, grp.list.Front
		o.walk = o.walk[:0]
		if len(h) > 0 {
			o.walk = append(o.walk, 0)
		}
		for {
			var slot int32
			j := -1 // the place in h offered, or -1 for the list's
			switch {
			case ls != dlist.None && (len(o.walk) == 0 || o.sortsBefore(ls, h[o.walk[0]].slot)):
				slot = ls
			case len(o.walk) > 0:
				j = o.popWalk(h)
				slot = h[j].slot
			default:
				slot = dlist.None
			}
			if slot == dlist.None {
				break // the group is offered whole
			}
			c := o.cand(slot)
			e := newEntry(c, o.a.keyOf(c), slot)
			if bounded && !less(&e, &bound) {
				break // the rest of the group scores higher still
			}
			bounded = o.sel.offer(e, &bound)
			if j < 0 {
				ls = links.Next(ls)
				continue
			}
			for k := autoArity*j + 1; k < min(autoArity*j+1+autoArity, len(h)); k++ {
				o.pushWalk(h, k)
			}
		}
	}
	o.ranked, o.taken = o.sel.victims(), 0
}

// pushWalk adds place j of h to the walk, a binary min-heap of places by
// their entries.
func (o *autoOrder) pushWalk(h []autoEntry, j int) {
	w := append(o.walk, int32(j))
	i := len(w) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !o.before(h[w[i]], h[w[p]]) {
			break
		}
		w[i], w[p] = w[p], w[i]
		i = p
	}
	o.walk = w
}

// popWalk takes the place of the smallest entry out of the walk.
func (o *autoOrder) popWalk(h []autoEntry) int {
	w := o.walk
	top := w[0]
	last := len(w) - 1
	w[0] = w[last]
	w = w[:last]
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(w) {
			break
		}
		if c+1 < len(w) && o.before(h[w[c+1]], h[w[c]]) {
			c++
		}
		if !o.before(h[w[c]], h[w[i]]) {
			break
		}
		w[i], w[c] = w[c], w[i]
		i = c
	}
	o.walk = w
	return int(top)
}

// next hands out the victims prepare ranked, in order, each taken out of
// the order.
func (o *autoOrder) next() int32 {
	if o.taken == len(o.ranked) {
		panic("kvevict: the index's groups lost an evictable candidate")
	}
	o.taken++
	slot := o.ranked[o.taken-1].Slot
	o.remove(slot)
	return slot
}

// check verifies the groups: each live group holds candidates of its key,
// in ascending (LastAccess, ID) in its list and in a heap by (LastAccess,
// ID) whose places their states record, every candidate in a group is
// marked, and every marked one, marked of them, is in a group or waits to
// be filed again.
func (o *autoOrder) check(marked int) error {
	grouped := 0
	links := *o.slots
	for i, gi := range o.live {
		grp := &o.groups[gi]
		size := grp.list.Len + len(grp.heap)
		if grp.at != int32(i) || size == 0 || o.byKey[grp.key] != gi {
			return fmt.Errorf("group %d: at %d (live %d), %d members, key maps to %d", gi, grp.at, i, size, o.byKey[grp.key])
		}
		member := func(slot int32, at int32) error {
			c := o.cand(slot)
			st := &(*o.st)[slot]
			n := st.node
			switch {
			case st.group != gi+1 || st.at != at:
				return fmt.Errorf("ID %d at %d in group %d says %d at %d", c.ID, at, gi+1, st.group, st.at)
			case n < 0 || !o.t.Marked(n):
				return fmt.Errorf("ID %d in a group is not marked", c.ID)
			case (autoGroupKey{lonePartial(c), o.a.info[n].log2Requests}) != grp.key:
				return fmt.Errorf("ID %d in group %+v belongs elsewhere", c.ID, grp.key)
			}
			return nil
		}
		prev, lastSeen := dlist.None, grp.last == dlist.None
		err := links.Check(&grp.list, func(slot int32) error {
			if err := member(slot, inList); err != nil {
				return err
			}
			if prev != dlist.None && !o.sortsBefore(prev, slot) {
				return fmt.Errorf("group %+v: ID %d after ID %d out of order", grp.key, o.cand(slot).ID, o.cand(prev).ID)
			}
			lastSeen = lastSeen || slot == grp.last
			prev = slot
			return nil
		})
		if err != nil {
			return err
		}
		if !lastSeen {
			return fmt.Errorf("group %+v: the slot filed last, %d, is not in its list", grp.key, grp.last)
		}
		for j, e := range grp.heap {
			if err := member(e.slot, int32(j)); err != nil {
				return err
			}
			c := o.cand(e.slot)
			switch {
			case e.last != c.LastAccess:
				return fmt.Errorf("ID %d filed at LastAccess %d, now %d", c.ID, e.last, c.LastAccess)
			case j > 0 && o.before(e, grp.heap[(j-1)/autoArity]):
				return fmt.Errorf("group %+v: ID %d sorts before its parent", grp.key, c.ID)
			}
		}
		grouped += size
	}
	if len(o.byKey) != len(o.live) {
		return fmt.Errorf("%d group keys, %d live groups", len(o.byKey), len(o.live))
	}
	for _, slot := range o.refile {
		if st := &(*o.st)[slot]; st.held && st.refile && st.group == 0 {
			grouped++ // counted once: filed again at the next eviction
		}
	}
	if grouped < marked {
		return fmt.Errorf("%d candidates grouped or waiting, %d marked", grouped, marked)
	}
	return nil
}
