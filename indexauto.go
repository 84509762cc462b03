package kvevict

import (
	"math"

	"github.com/sagellm/kvevict/internal/dlist"
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

// autoGroups are the groups of an Index of Auto.
type autoGroups struct {
	byKey   map[autoGroupKey]int32 // group of each (partial, log2r) held
	groups  []autoGroup            // by number; an empty one is free
	live    []int32                // the groups that hold candidates
	free    []int32                // numbers of empty groups, for reuse
	links   dlist.Links            // the groups' lists, indexed like the index's slots
	refile  []int32                // slots out of their group since a request was counted
	maxTick int64                  // the largest LastAccess held, unless maxStale
	// maxStale is set when the candidate holding maxTick left or went
	// back in time: the next eviction finds the largest again.
	maxStale bool
}

type autoGroupKey struct {
	partial bool
	log2r   float32
}

type autoGroup struct {
	key  autoGroupKey
	list dlist.List // ascending by (LastAccess, ID)
	at   int32      // index in live
}

func newAutoGroups() *autoGroups {
	return &autoGroups{byKey: make(map[autoGroupKey]int32), maxTick: math.MinInt64}
}

// join files the candidate in slot, marked as node n, in its group.
func (x *Index) join(slot, n int32) {
	g, a := x.groups, x.auto
	nd := &x.nodes[slot]
	if nd.group != 0 {
		return
	}
	for len(g.links) < len(x.nodes) {
		g.links = append(g.links, dlist.Link{Prev: dlist.None, Next: dlist.None})
	}
	key := autoGroupKey{partial: lonePartial(&nd.c), log2r: a.info[n].log2Requests}
	gi, ok := g.byKey[key]
	if !ok {
		gi = g.open(key)
	}
	l := &g.groups[gi].list
	at := l.Back
	for at != dlist.None && !x.sortsBefore(at, slot) {
		at = g.links.Prev(at)
	}
	g.links.InsertAfter(l, at, slot)
	nd.group = gi + 1
}

// sortsBefore reports whether the candidate in slot a sorts before the one
// in slot b within a group: by LastAccess, then ID.
func (x *Index) sortsBefore(a, b int32) bool {
	return byRecency(&x.nodes[a].c, &x.nodes[b].c) < 0
}

// leave takes the candidate in slot out of its group, if it is in one.
func (x *Index) leave(slot int32) {
	nd := &x.nodes[slot]
	if nd.group == 0 {
		return
	}
	g := x.groups
	gi := nd.group - 1
	g.links.Remove(&g.groups[gi].list, slot)
	nd.group = 0
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
	g.groups[gi] = autoGroup{key: key, list: dlist.Empty(), at: int32(len(g.live))}
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
func (x *Index) regroup(slot int32) {
	x.leave(slot)
	t := x.hist.nodes()
	if n := t.lookup(x.nodes[slot].c.ID); n >= 0 && t.marked(n) {
		x.join(slot, n)
	}
}

// requested takes id's candidate out of its group after the history
// counted a request for it, until the next eviction files it again.
func (x *Index) requested(id uint64) {
	slot, ok := x.slots.Get(id)
	if !ok || x.nodes[slot].group == 0 {
		return
	}
	x.leave(slot)
	if !x.nodes[slot].refile { // once per slot between evictions
		x.nodes[slot].refile = true
		x.groups.refile = x.listSlot(x.groups.refile, slot, func(n *indexNode) *bool { return &n.refile })
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
func (x *Index) now() int64 {
	g := x.groups
	if g.maxStale {
		g.maxTick, g.maxStale = math.MinInt64, false
		for slot := range x.nodes {
			if x.nodes[slot].at != slotFree {
				g.maxTick = max(g.maxTick, x.nodes[slot].c.LastAccess)
			}
		}
	}
	return g.maxTick
}

// rankAuto is Auto's selection for an index: the candidates out of their
// group are filed again, then each group offers its front to the
// selection while the score stays below the bound of the victims chosen
// so far. It returns the victims, smallest first (Slot: the index's slot),
// valid until the next selection.
func (x *Index) rankAuto(required int) []entry {
	g, a := x.groups, x.auto
	for _, slot := range g.refile {
		if x.nodes[slot].refile { // not released since
			x.nodes[slot].refile = false
			x.regroup(slot)
		}
	}
	g.refile = g.refile[:0]
	a.begin(x.now(), x.Len())
	x.sel.begin(required, x.Len())
	bounded := false
	var bound entry
	for _, gi := range g.live {
		for slot := g.groups[gi].list.Front; slot != dlist.None; slot = g.links.Next(slot) {
			c := &x.nodes[slot].c
			e := newEntry(c, a.keyOf(c), slot)
			if bounded && !less(&e, &bound) {
				break // the rest of the group scores higher still
			}
			bounded = x.sel.offer(e, &bound)
		}
	}
	return x.sel.victims()
}
