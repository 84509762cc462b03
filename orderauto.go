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
// groups of equal (partial, log2(requests)), each a list in that order,
// and an eviction walks each group from its front only while the score is
// below the largest of the victims chosen so far: the same greedy
// selection over the same scores, offered O(groups + victims) entries
// instead of every candidate.
//
// A candidate joins its group when it is marked and leaves when it is
// unmarked. When its fields change (LastAccess, a partial last block) or
// the history counts a request for it, it leaves its group until the next
// eviction files it again, because the allocator usually acquires or
// touches a requested sequence more than once before then: acquiring
// keeps it out, and each touch costs O(1). Filed again, it lands in its
// place by a walk from the group's back: one step under a clock that only
// grows, as a touched candidate lands last; a candidate added or updated
// with an older LastAccess walks further.

// autoOrder is the order of an Index of Auto: the groups of its marked
// candidates.
type autoOrder struct {
	a      *auto
	t      *lists.Table           // a's
	slots  *dlist.Nodes[held]     // the Index's: the candidates, and the groups' links
	st     *[]markState           // the Index's: each candidate's node and group
	byKey  map[autoGroupKey]int32 // group of each (partial, log2r) held
	groups []autoGroup            // by number; an empty one is free
	live   []int32                // the groups that hold candidates
	free   []int32                // numbers of empty groups, for reuse
	refile []int32                // slots out of their group since they changed
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

func (o *autoOrder) cand(slot int32) *Candidate { return &(*o.slots)[slot].Val.c }

// insert marks the node of the candidate in slot and files the candidate
// in its group, by a walk from the group's back or from the slot filed
// last.
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
	grp, links := &o.groups[gi], *o.slots
	at := grp.list.Back
	switch {
	case at == dlist.None || o.sortsBefore(at, slot): // the newest: last
	case !o.sortsBefore(grp.list.Front, slot): // the oldest: first
		at = dlist.None
	case grp.last != dlist.None && o.sortsBefore(grp.last, slot):
		// Forward from the one filed last; the back ends the walk.
		at = grp.last
		for n := links.Next(at); o.sortsBefore(n, slot); n = links.Next(n) {
			at = n
		}
	default: // back from the back; the front ends the walk
		for !o.sortsBefore(at, slot) {
			at = links.Prev(at)
		}
	}
	links.InsertAfter(&grp.list, at, slot)
	grp.last = slot
	st.group = gi + 1
}

// sortsBefore reports whether the candidate in slot a sorts before the one
// in slot b within a group: by LastAccess, then ID.
func (o *autoOrder) sortsBefore(a, b int32) bool { return byRecency(o.cand(a), o.cand(b)) < 0 }

// remove unmarks the node of the candidate in slot, if it has one, and
// takes the candidate out of its group, if it is in one.
func (o *autoOrder) remove(slot int32) {
	if n := (*o.st)[slot].node; n >= 0 {
		o.t.Unmark(n)
	}
	o.ungroup(slot)
}

// ungroup takes the candidate in slot out of its group, if it is in one.
func (o *autoOrder) ungroup(slot int32) {
	st := &(*o.st)[slot]
	if st.group == 0 {
		return
	}
	gi := st.group - 1
	if o.groups[gi].last == slot {
		o.groups[gi].last = o.slots.Prev(slot)
	}
	o.slots.Remove(&o.groups[gi].list, slot)
	st.group = 0
	if o.groups[gi].list.Len == 0 {
		o.close(gi)
	}
}

// fix takes the marked candidate in slot, whose fields or count of
// requests changed, out of its group until the next eviction files it
// again. O(1).
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

// open starts a group of key and returns its number.
func (o *autoOrder) open(key autoGroupKey) int32 {
	var gi int32
	if n := len(o.free); n > 0 {
		gi = o.free[n-1]
		o.free = o.free[:n-1]
	} else {
		gi = int32(len(o.groups))
		o.groups = append(o.groups, autoGroup{})
	}
	o.groups[gi] = autoGroup{key: key, list: dlist.Empty(), at: int32(len(o.live)), last: dlist.None}
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
// out of their group are filed again, then each group offers its front to
// Auto's greedy selection while the score stays below the bound of the
// victims chosen so far.
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
		for slot := o.groups[gi].list.Front; slot != dlist.None; slot = links.Next(slot) {
			c := o.cand(slot)
			e := newEntry(c, o.a.keyOf(c), slot)
			if bounded && !less(&e, &bound) {
				break // the rest of the group scores higher still
			}
			bounded = o.sel.offer(e, &bound)
		}
	}
	o.ranked, o.taken = o.sel.victims(), 0
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

// check verifies the groups: each live group holds candidates of its key
// in ascending (LastAccess, ID), every candidate in a group is marked, and
// every marked one, marked of them, is in a group or waits to be filed
// again.
func (o *autoOrder) check(marked int) error {
	grouped := 0
	links := *o.slots
	for i, gi := range o.live {
		grp := &o.groups[gi]
		if grp.at != int32(i) || grp.list.Len == 0 || o.byKey[grp.key] != gi {
			return fmt.Errorf("group %d: at %d (live %d), %d members, key maps to %d", gi, grp.at, i, grp.list.Len, o.byKey[grp.key])
		}
		prev := dlist.None
		err := links.Check(&grp.list, func(slot int32) error {
			c := o.cand(slot)
			st := &(*o.st)[slot]
			n := st.node
			switch {
			case st.group != gi+1:
				return fmt.Errorf("ID %d in group %d says %d", c.ID, gi+1, st.group)
			case n < 0 || !o.t.Marked(n):
				return fmt.Errorf("ID %d in a group is not marked", c.ID)
			case (autoGroupKey{lonePartial(c), o.a.info[n].log2Requests}) != grp.key:
				return fmt.Errorf("ID %d in group %+v belongs elsewhere", c.ID, grp.key)
			case prev != dlist.None && !o.sortsBefore(prev, slot):
				return fmt.Errorf("group %+v: ID %d after ID %d out of order", grp.key, c.ID, o.cand(prev).ID)
			}
			prev = slot
			return nil
		})
		if err != nil {
			return err
		}
		grouped += grp.list.Len
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
