package prefix

import (
	"testing"

	"github.com/sagellm/kvevict/internal/rank"
)

// check verifies every invariant of t: the child index matches the nodes'
// links, each reference count is the number of locks ending in the node's
// subtree (so never negative, and a locked path is wholly protected), the
// evictable and protected counts partition the nodes, and the heap holds
// exactly the unreferenced leaves, in heap order, with current keys.
func check(tb testing.TB, t *Tree) {
	tb.Helper()
	t.mu.Lock()
	defer t.mu.Unlock()
	children := make(map[*node]int)
	wantRef := make(map[*node]int)
	for e, n := range t.children {
		if e.hash != n.hash || n.parent == nil || e.parent != n.parent.id {
			tb.Fatalf("edge %+v holds node %d (hash %d) whose parent does not match", e, n.id, n.hash)
		}
		if p := n.parent; p != &t.root && t.children[edge{p.parent.id, p.hash}] != p {
			tb.Fatalf("node %d has a parent %d that is not in the tree", n.id, p.id)
		}
		children[n.parent]++
		if n.ends < 0 || n.ref < 0 {
			tb.Fatalf("node %d: ends %d, ref %d: negative", n.id, n.ends, n.ref)
		}
		hard := 0
		nh, hinted := t.hints[n]
		if hinted && nh == (nodeHints{}) {
			tb.Fatalf("node %d: kept with no hint", n.id)
		}
		if nh.hardUntil != 0 {
			hard = 1 // a hard lease's hold
			if t.apart.End(n.slot) != nh.hardUntil {
				tb.Fatalf("node %d: hard lease until %d, filed under end %d", n.id, nh.hardUntil, t.apart.End(n.slot))
			}
		}
		for m := n; m != &t.root; m = m.parent {
			wantRef[m] += n.ends + hard
		}
	}
	evictable, protected := 0, 0
	leaves := 0
	for _, n := range t.children {
		if n.children != children[n] {
			tb.Fatalf("node %d counts %d children, has %d", n.id, n.children, children[n])
		}
		if n.ref != wantRef[n] {
			tb.Fatalf("node %d: ref %d, want %d (locks ending below it)", n.id, n.ref, wantRef[n])
		}
		if n.ref == 0 {
			evictable++
		} else {
			protected++
		}
		if n.slot < 0 || int(n.slot) >= len(t.bySlot) || t.bySlot[n.slot] != n {
			tb.Fatalf("node %d: slot %d does not point back at it", n.id, n.slot)
		}
		nh := t.hints[n]
		inHeap, inApart := t.heaps[0].Contains(n.slot), t.apart.Contains(n.slot)
		leaf := n.ref == 0 && n.children == 0
		if want := leaf && t.plain(n); inHeap != want || inApart != (leaf && !want) {
			tb.Fatalf("node %d (ref %d, %d children, hints %+v at %d): in heap %v, set apart %v", n.id, n.ref, n.children, nh, t.now, inHeap, inApart)
		}
		if inApart {
			r, class := rank.HintRank(&nh.hint, t.now)
			if class == rank.ClassHeld {
				r = rank.LeasedRank
			}
			k := rank.ApartKey(&nh.hint, r, n.lastAccess, t.ownKey(n))
			if e, er := t.apart.At(n.slot); e.Key != k || e.ID != n.id || er != r {
				tb.Fatalf("node %d: set apart as %+v at rank %d, want key %+v at %d", n.id, *e, er, k, r)
			}
		}
		if t.meas != nil && n.requests < 1 {
			tb.Fatalf("node %d: %d requests, want at least the Insert that made it", n.id, n.requests)
		}
		if inHeap {
			leaves++
			for i := range t.heaps {
				if !t.heaps[i].Contains(n.slot) {
					tb.Fatalf("node %d: in heap 0, not in heap %d", n.id, i)
				}
				e := t.heaps[i].At(n.slot)
				if t.meas != nil {
					checkAutoKey(tb, n, e)
				} else if k := t.keys(n)[0]; e.ID != n.id || e.Key != k {
					tb.Fatalf("node %d: heap entry %+v, want ID %d and current key %+v", n.id, *e, n.id, k)
				}
			}
		}
	}
	if t.root.children != children[&t.root] || t.root.slot != -1 {
		tb.Fatalf("root: %d children (has %d), slot %d", t.root.children, children[&t.root], t.root.slot)
	}
	if len(t.bySlot) != len(t.slots.Links) || len(t.bySlot)-t.slots.FreeLen() != len(t.children) {
		tb.Fatalf("%d slots (%d links), %d free, for %d nodes", len(t.bySlot), len(t.slots.Links), t.slots.FreeLen(), len(t.children))
	}
	if err := t.slots.CheckFree(); err != nil {
		tb.Fatalf("slots: %v", err)
	}
	if evictable != t.evictable || protected != t.protected {
		tb.Fatalf("evictable %d, protected %d; counted %d, %d", t.evictable, t.protected, evictable, protected)
	}
	if t.evictable+t.protected != len(t.children) {
		tb.Fatalf("evictable %d + protected %d != size %d", t.evictable, t.protected, len(t.children))
	}
	for i := range t.heaps {
		if leaves != t.heaps[i].Len() {
			tb.Fatalf("heap %d holds %d entries, %d unreferenced leaves", i, t.heaps[i].Len(), leaves)
		}
		if err := t.heaps[i].Check(); err != nil {
			tb.Fatalf("heap %d: %v", i, err)
		}
	}
	for n := range t.hints {
		if t.children[edge{n.parent.id, n.hash}] != n {
			tb.Fatalf("hints kept for node %d, which is not in the tree", n.id)
		}
	}
	if t.evictable > 0 && leaves == 0 && t.apart.Len() == 0 {
		tb.Fatalf("%d evictable blocks but no evictable leaf", t.evictable)
	}
	if t.meas != nil {
		if err := t.ghosts.Check(); err != nil {
			tb.Fatalf("ghosts: %v", err)
		}
		c, ok := t.meas.(interface{ Check() error })
		if !ok {
			tb.Fatalf("measurements %T have no Check", t.meas)
		}
		if err := c.Check(); err != nil {
			tb.Fatal(err)
		}
	}
}

// checkAutoKey verifies an Auto leaf's entry in one heap. Its key was
// computed with the horizon of the heap's weight at the moment the leaf was
// last touched, which the tree does not keep, so the check is of the score's form: the recency is the
// leaf's latest access, and a doubling of requests only adds to it (a leaf
// requested once scores its recency).
func checkAutoKey(tb testing.TB, n *node, e *rank.Entry) {
	tb.Helper()
	if e.ID != n.id || e.Minor != n.lastAccess || e.Major < n.lastAccess || n.requests == 1 && e.Major != n.lastAccess {
		tb.Fatalf("node %d (last access %d, %d requests): heap entry %+v", n.id, n.lastAccess, n.requests, *e)
	}
}
