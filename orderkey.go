package kvevict

import (
	"fmt"

	"github.com/sagellm/kvevict/internal/dlist"
	"github.com/sagellm/kvevict/internal/rank"
)

// keyOrder is the order of an Index of a key strategy: the evictable
// candidates split between the run, a doubly linked list through the
// slots ascending by (key, ID), to which a candidate whose key sorts after
// every key in it is appended in O(1), as every touch under LRU is, and an
// indexed heap of the others (see Order structure in docs/index.md). A
// candidate's key while in the run and its run links live in its slot,
// beside the candidate: a touch that moves a candidate to the run's back
// reads and writes them where it reads the candidate, not in arrays of
// their own.
type keyOrder struct {
	params keyParams
	slots  *dlist.Nodes[held] // the Index's
	run    dlist.List
	heap   rank.Heap
}

// keyPlace is where a keyOrder keeps a slot's candidate. The slot's links
// say it, so that it takes no byte beside them: a slot in the heap, in no
// list, has the Prev link inHeapLink; one in the run is linked or the
// run's front; the others are unlinked.
type keyPlace uint8

const (
	outOfOrder keyPlace = iota // not ranked, taken as a victim, or a free slot
	inRun
	inHeap
)

// inHeapLink is the Prev link of a slot in the heap, which no list uses.
const inHeapLink = dlist.None - 1

// place returns where the candidate in slot is kept. O(1).
func (o *keyOrder) place(slot int32) keyPlace {
	switch n := &(*o.slots)[slot]; {
	case n.Prev == inHeapLink:
		return inHeap
	case n.Prev != dlist.None || o.run.Front == slot:
		return inRun
	}
	return outOfOrder
}

func newKeyOrder(params keyParams, slots *dlist.Nodes[held]) *keyOrder {
	return &keyOrder{params: params, slots: slots, run: dlist.Empty()}
}

func (o *keyOrder) cand(slot int32) *Candidate { return &(*o.slots)[slot].Val.c }

// remove takes the candidate in slot out of the run or the heap, if it is
// in either. O(1) from the run, O(log n) from the heap.
func (o *keyOrder) remove(slot int32) {
	if o.place(slot) != outOfOrder {
		o.detach(slot)
	}
}

// next takes the smaller of the run's front and the heap's root. O(1) from
// the run, O(log n) from the heap.
func (o *keyOrder) next() int32 {
	slot := o.first()
	o.detach(slot)
	return slot
}

// first returns the slot of the next victim: the smaller of the run's
// front and the heap's root. There must be one. O(1).
func (o *keyOrder) first() int32 {
	h := o.run.Front
	if o.heap.Len() == 0 {
		return h
	}
	root := o.heap.Min()
	if h == dlist.None {
		return root.Slot
	}
	if before((*o.slots)[h].Val.key, o.cand(h).ID, root.Key, root.ID) {
		return h
	}
	return root.Slot
}

// afterRun reports whether (k, id) sorts after the run's back, so that it
// may be appended; true for an empty run. O(1).
func (o *keyOrder) afterRun(k rank.Key, id uint64) bool {
	b := o.run.Back
	return b == dlist.None || before((*o.slots)[b].Val.key, o.cand(b).ID, k, id)
}

// insert files the ranked candidate in slot, if it is in neither the run
// nor the heap: at the run's back if its key sorts after the back's, O(1),
// else in the heap, O(log n).
func (o *keyOrder) insert(slot int32) {
	if o.place(slot) != outOfOrder {
		return
	}
	c := o.cand(slot)
	k := o.params.keyOf(c)
	if o.afterRun(k, c.ID) {
		o.appendRun(slot, k)
		return
	}
	o.push(slot, k)
}

// fix restores the order after the ranked candidate in slot changed (its
// key may have). A candidate whose new key sorts after the run's back
// moves there, in O(1) plus, from the heap, O(log n); one still between its
// run neighbours stays; the rest go to the heap, O(log n).
func (o *keyOrder) fix(slot int32) {
	c := o.cand(slot)
	k, id := o.params.keyOf(c), c.ID
	if o.place(slot) == inHeap {
		if o.afterRun(k, id) {
			o.heap.Remove(slot)
			o.appendRun(slot, k)
			return
		}
		blocks := rank.SaturatedBlocks(len(c.Blocks))
		if e := o.heap.At(slot); e.Key != k || e.Blocks != blocks { // a touch under FIFO changes neither
			o.heap.Fix(slot, k, blocks)
		}
		return
	}
	if slot != o.run.Back && o.afterRun(k, id) {
		o.unlink(slot)
		o.appendRun(slot, k)
		return
	}
	link := &(*o.slots)[slot]
	if p := link.Prev; p != dlist.None && !before((*o.slots)[p].Val.key, o.cand(p).ID, k, id) {
		o.unlink(slot)
		o.push(slot, k)
		return
	}
	if q := link.Next; q != dlist.None && !before(k, id, (*o.slots)[q].Val.key, o.cand(q).ID) {
		o.unlink(slot)
		o.push(slot, k)
		return
	}
	(*o.slots)[slot].Val.key = k
}

// detach takes the evictable candidate in slot out of the run or the heap.
func (o *keyOrder) detach(slot int32) {
	if o.place(slot) == inHeap {
		o.heap.Remove(slot)
		(*o.slots)[slot].Prev = dlist.None
		return
	}
	o.unlink(slot)
}

// appendRun adds the candidate in slot, of key k, at the run's back. O(1).
func (o *keyOrder) appendRun(slot int32, k rank.Key) {
	(*o.slots)[slot].Val.key = k
	(*o.slots).PushBack(&o.run, slot)
}

// unlink takes the candidate in slot out of the run, leaving its links
// None: out of the order. O(1).
func (o *keyOrder) unlink(slot int32) { (*o.slots).Remove(&o.run, slot) }

// push adds the candidate in slot, of key k, to the heap. O(log n).
func (o *keyOrder) push(slot int32, k rank.Key) {
	o.heap.Push(newEntry(o.cand(slot), k, slot))
	(*o.slots)[slot].Prev = inHeapLink
}

// check verifies that the run and the heap hold exactly the evictable
// candidates, with current keys, the run strictly ascending and the heap
// in heap order.
func (o *keyOrder) check() error {
	inRunCount, inHeapCount := 0, 0
	for slot := range *o.slots {
		c, at := &(*o.slots)[slot].Val.c, o.place(int32(slot))
		if o.heap.Contains(int32(slot)) != (at == inHeap) {
			return fmt.Errorf("ID %d: kept at %d, in the heap %v", c.ID, at, o.heap.Contains(int32(slot)))
		}
		switch at {
		case inRun:
			inRunCount++
		case inHeap:
			inHeapCount++
			e := o.heap.At(int32(slot))
			if want := o.params.keyOf(c); e.Key != want || e.ID != c.ID || int(e.Blocks) != len(c.Blocks) {
				return fmt.Errorf("ID %d: heap entry %+v is stale, want key %+v, %d blocks", c.ID, *e, want, len(c.Blocks))
			}
		}
		if c.ranked() != (at != outOfOrder) {
			return fmt.Errorf("ID %d: evictable %v but kept at %d", c.ID, c.ranked(), at)
		}
	}
	if inHeapCount != o.heap.Len() {
		return fmt.Errorf("%d candidates in the heap, heap holds %d", inHeapCount, o.heap.Len())
	}
	if err := o.heap.Check(); err != nil {
		return err
	}
	prev := dlist.None
	err := (*o.slots).Check(&o.run, func(slot int32) error {
		st := &(*o.slots)[slot].Val
		c := &st.c
		if at := o.place(slot); at != inRun {
			return fmt.Errorf("run slot %d: kept at %d", slot, at)
		}
		if k := o.params.keyOf(c); st.key != k {
			return fmt.Errorf("run ID %d: key %+v is stale, want %+v", c.ID, st.key, k)
		}
		if prev != dlist.None && !before((*o.slots)[prev].Val.key, o.cand(prev).ID, st.key, c.ID) {
			return fmt.Errorf("run order broken between IDs %d and %d", o.cand(prev).ID, c.ID)
		}
		prev = slot
		return nil
	})
	if err != nil {
		return err
	}
	if o.run.Len != inRunCount {
		return fmt.Errorf("run of %d nodes, %d kept in it", o.run.Len, inRunCount)
	}
	return nil
}
