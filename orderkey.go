package kvevict

import (
	"fmt"
	"slices"

	"github.com/sagellm/kvevict/internal/dlist"
	"github.com/sagellm/kvevict/internal/rank"
)

// keyOrder is the order of an Index of a key strategy: the evictable
// candidates split between the run, a doubly linked list through the
// slots ascending by (key, ID), to which a candidate whose key sorts after
// every key in it is appended in O(1), as every touch under LRU is, and an
// indexed heap of the others (see Order structure on [Index]).
type keyOrder struct {
	params keyParams
	cands  *[]Candidate // the Index's candidates, by slot
	// nodes holds, by slot, the run's links and beside them where the
	// candidate is and its key: a touch that moves a candidate to the
	// run's back reads and writes all three, in one cache line.
	nodes dlist.Nodes[keyState]
	run   dlist.List
	heap  rank.Heap
}

// keyState is where a keyOrder keeps a slot's candidate, and its key while
// in the run.
type keyState struct {
	key rank.Key
	at  keyPlace
}

// keyPlace is where a keyOrder keeps a slot's candidate.
type keyPlace uint8

const (
	outOfOrder keyPlace = iota // not evictable, taken as a victim, or a free slot
	inRun
	inHeap
)

func newKeyOrder(params keyParams, cands *[]Candidate) *keyOrder {
	return &keyOrder{params: params, cands: cands, run: dlist.Empty()}
}

func (o *keyOrder) grow(n int) {
	o.nodes = slices.Grow(o.nodes, n)
}

// add files a new slot: O(1) in the run, else O(log n).
func (o *keyOrder) add(slot int32) {
	for int(slot) >= len(o.nodes) {
		o.nodes = append(o.nodes, dlist.Node[keyState]{Prev: dlist.None, Next: dlist.None})
	}
	o.nodes[slot].Val = keyState{}
	if (*o.cands)[slot].evictable() {
		o.insert(slot)
	}
}

// update moves the candidate in slot into, out of or within the order as
// its evictability and key require: O(1) when it stays in the run or
// moves to its back, else O(log n).
func (o *keyOrder) update(slot int32, _ int64) {
	was, now := o.nodes[slot].Val.at != outOfOrder, (*o.cands)[slot].evictable()
	switch {
	case was && now:
		o.refile(slot)
	case was:
		o.detach(slot)
	case now:
		o.insert(slot)
	}
}

func (o *keyOrder) remove(slot int32) {
	if o.nodes[slot].Val.at != outOfOrder {
		o.detach(slot)
	}
}

// access: a key strategy ranks by the candidates' fields alone.
func (o *keyOrder) access(uint64) {}

// begin: the run and the heap are ready for an eviction at any time.
func (o *keyOrder) begin(int) {}

// next takes the smaller of the run's front and the heap's root. O(1) from
// the run, O(log n) from the heap.
func (o *keyOrder) next() int32 {
	slot := o.first()
	o.detach(slot)
	return slot
}

// commit: the victims are out of the run and the heap already.
func (o *keyOrder) commit([]int32, bool) {}

func (o *keyOrder) rollback(taken []int32) {
	for _, slot := range taken {
		o.insert(slot)
	}
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
	if before(o.nodes[h].Val.key, (*o.cands)[h].ID, root.Key, root.ID) {
		return h
	}
	return root.Slot
}

// afterRun reports whether (k, id) sorts after the run's back, so that it
// may be appended; true for an empty run. O(1).
func (o *keyOrder) afterRun(k rank.Key, id uint64) bool {
	b := o.run.Back
	return b == dlist.None || before(o.nodes[b].Val.key, (*o.cands)[b].ID, k, id)
}

// insert files the evictable candidate in slot, which is in neither the run
// nor the heap: at the run's back if its key sorts after the back's, O(1),
// else in the heap, O(log n).
func (o *keyOrder) insert(slot int32) {
	c := &(*o.cands)[slot]
	k := o.params.keyOf(c)
	if o.afterRun(k, c.ID) {
		o.appendRun(slot, k)
		return
	}
	o.push(slot, k)
}

// refile restores the order after the evictable candidate in slot changed
// (its key may have). A candidate whose new key sorts after the run's back
// moves there, in O(1) plus, from the heap, O(log n); one still between its
// run neighbours stays; the rest go to the heap, O(log n).
func (o *keyOrder) refile(slot int32) {
	c := &(*o.cands)[slot]
	k, id := o.params.keyOf(c), c.ID
	if o.nodes[slot].Val.at == inHeap {
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
	link := &o.nodes[slot]
	if p := link.Prev; p != dlist.None && !before(o.nodes[p].Val.key, (*o.cands)[p].ID, k, id) {
		o.unlink(slot)
		o.push(slot, k)
		return
	}
	if q := link.Next; q != dlist.None && !before(k, id, o.nodes[q].Val.key, (*o.cands)[q].ID) {
		o.unlink(slot)
		o.push(slot, k)
		return
	}
	o.nodes[slot].Val.key = k
}

// detach takes the evictable candidate in slot out of the run or the heap.
func (o *keyOrder) detach(slot int32) {
	if o.nodes[slot].Val.at == inHeap {
		o.heap.Remove(slot)
		o.nodes[slot].Val.at = outOfOrder
		return
	}
	o.unlink(slot)
}

// appendRun adds the candidate in slot, of key k, at the run's back. O(1).
func (o *keyOrder) appendRun(slot int32, k rank.Key) {
	o.nodes[slot].Val = keyState{key: k, at: inRun}
	o.nodes.PushBack(&o.run, slot)
}

// unlink takes the candidate in slot out of the run. O(1).
func (o *keyOrder) unlink(slot int32) {
	o.nodes.Remove(&o.run, slot)
	o.nodes[slot].Val.at = outOfOrder
}

// push adds the candidate in slot, of key k, to the heap. O(log n).
func (o *keyOrder) push(slot int32, k rank.Key) {
	o.heap.Push(newEntry(&(*o.cands)[slot], k, slot))
	o.nodes[slot].Val.at = inHeap
}

// check verifies that the run and the heap hold exactly the evictable
// candidates, with current keys, the run strictly ascending and the heap
// in heap order.
func (o *keyOrder) check() error {
	cands := *o.cands
	if len(o.nodes) != len(cands) {
		return fmt.Errorf("%d nodes for %d slots", len(o.nodes), len(cands))
	}
	inRunCount, inHeapCount := 0, 0
	for slot := range cands {
		c, at := &cands[slot], o.nodes[slot].Val.at
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
		if c.evictable() != (at != outOfOrder) {
			return fmt.Errorf("ID %d: evictable %v but kept at %d", c.ID, c.evictable(), at)
		}
	}
	if inHeapCount != o.heap.Len() {
		return fmt.Errorf("%d candidates in the heap, heap holds %d", inHeapCount, o.heap.Len())
	}
	if err := o.heap.Check(); err != nil {
		return err
	}
	prev := dlist.None
	err := o.nodes.Check(&o.run, func(slot int32) error {
		st, c := &o.nodes[slot].Val, &cands[slot]
		if st.at != inRun {
			return fmt.Errorf("run slot %d: kept at %d", slot, st.at)
		}
		if k := o.params.keyOf(c); st.key != k {
			return fmt.Errorf("run ID %d: key %+v is stale, want %+v", c.ID, st.key, k)
		}
		if prev != dlist.None && !before(o.nodes[prev].Val.key, cands[prev].ID, st.key, c.ID) {
			return fmt.Errorf("run order broken between IDs %d and %d", cands[prev].ID, c.ID)
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
