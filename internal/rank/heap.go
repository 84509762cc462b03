package rank

import (
	"fmt"
	"math"
)

// Entry is one ranked candidate: its key and ID, the slot its owner keeps
// it in, and how many blocks it holds.
type Entry struct {
	Key
	ID     uint64
	Slot   int32 // the owner's index for the candidate
	Blocks int32 // blocks held, saturated at math.MaxInt32
}

// Less orders entries by key, then ID.
func Less(a, b *Entry) bool { return Before(a.Key, a.ID, b.Key, b.ID) }

// SaturatedBlocks is n as an Entry's Blocks.
func SaturatedBlocks(n int) int32 { return int32(min(n, math.MaxInt32)) }

// Heap is an indexed min-heap of entries by (key, ID): the one heap of the
// structures that keep candidates ordered between evictions (kvevict's
// Index, package prefix's tree). It records where each slot's entry sits,
// so an entry whose key changed is fixed in place and any entry is removed
// in O(log n), as container/heap's Fix and Remove, without the interface
// calls. Keys may move either way (MRU, FILO), and nothing is rebuilt to
// stay correct.
//
// It has four children per node: half the depth of a binary heap, and a
// node's children (32 bytes each) span two cache lines. The zero value is
// an empty heap. A Heap is not safe for concurrent use.
type Heap struct {
	entries []Entry
	pos     []int32 // pos[slot]: position of slot's entry, or -1
}

const arity = 4

// shrinkAbove is the capacity above which a heap that emptied to a quarter
// moves to a smaller array, so that one burst does not pin its memory.
const shrinkAbove = 1 << 12

// Len returns the number of entries. O(1).
func (h *Heap) Len() int { return len(h.entries) }

// Min returns the smallest entry; the heap must not be empty. O(1).
func (h *Heap) Min() *Entry { return &h.entries[0] }

// Contains reports whether slot has an entry in the heap. O(1).
func (h *Heap) Contains(slot int32) bool {
	return slot >= 0 && int(slot) < len(h.pos) && h.pos[slot] >= 0
}

// Push adds e, whose slot must not be in the heap. O(log n).
func (h *Heap) Push(e Entry) {
	for int(e.Slot) >= len(h.pos) {
		h.pos = append(h.pos, -1)
	}
	j := int32(len(h.entries))
	h.entries = append(h.entries, e)
	h.pos[e.Slot] = j
	h.up(j)
}

// Remove takes slot's entry out of the heap. O(log n).
func (h *Heap) Remove(slot int32) {
	j := h.pos[slot]
	last := int32(len(h.entries) - 1)
	h.pos[slot] = -1
	if j != last {
		h.entries[j] = h.entries[last]
		h.pos[h.entries[j].Slot] = j
	}
	h.entries[last] = Entry{}
	h.entries = h.entries[:last]
	if j != last {
		h.fix(j)
	}
	if cap(h.entries) > shrinkAbove && len(h.entries) < cap(h.entries)/4 {
		h.entries = append([]Entry(nil), h.entries...)
	}
}

// Fix sets slot's key and blocks and restores the order. O(log n).
func (h *Heap) Fix(slot int32, k Key, blocks int32) {
	j := h.pos[slot]
	h.entries[j].Key, h.entries[j].Blocks = k, blocks
	h.fix(j)
}

// Replace removes slot's entry and adds e in its place, in one sift: the
// common step of leaf-first eviction, where the parent of the evicted leaf
// becomes a leaf with a key close to its child's. e's slot must not be in
// the heap unless it is slot. O(log n).
func (h *Heap) Replace(slot int32, e Entry) {
	j := h.pos[slot]
	h.pos[slot] = -1
	for int(e.Slot) >= len(h.pos) {
		h.pos = append(h.pos, -1)
	}
	h.entries[j] = e
	h.pos[e.Slot] = j
	h.fix(j)
}

// Rekey replaces every entry's key by key(entry) and restores the order,
// for keys that changed wholesale (they depend on the current tick). O(n).
func (h *Heap) Rekey(key func(*Entry) Key) {
	for i := range h.entries {
		h.entries[i].Key = key(&h.entries[i])
	}
	if len(h.entries) < 2 {
		return
	}
	for j := (len(h.entries) - 2) / arity; j >= 0; j-- { // the last parent down
		h.down(int32(j))
	}
}

func (h *Heap) fix(j int32) {
	if !h.down(j) {
		h.up(j)
	}
}

// up sifts the entry at j toward the root, moving parents down into a hole
// rather than swapping.
func (h *Heap) up(j int32) {
	es := h.entries
	e := es[j]
	for j > 0 {
		parent := (j - 1) / arity
		if !Less(&e, &es[parent]) {
			break
		}
		es[j] = es[parent]
		h.pos[es[j].Slot] = j
		j = parent
	}
	es[j] = e
	h.pos[e.Slot] = j
}

// down sifts the entry at j toward the leaves and reports whether it moved.
func (h *Heap) down(j int32) bool {
	es := h.entries
	n := len(es)
	e := es[j]
	start := j
	for {
		first := arity*int(j) + 1
		if first >= n {
			break
		}
		child := first
		for c := first + 1; c < min(first+arity, n); c++ {
			if Less(&es[c], &es[child]) {
				child = c
			}
		}
		if !Less(&es[child], &e) {
			break
		}
		es[j] = es[child]
		h.pos[es[j].Slot] = j
		j = int32(child)
	}
	es[j] = e
	h.pos[e.Slot] = j
	return j != start
}

// At returns slot's entry, which must be in the heap. O(1).
func (h *Heap) At(slot int32) *Entry { return &h.entries[h.pos[slot]] }

// Check verifies the heap order and the positions, for tests.
func (h *Heap) Check() error {
	for j := range h.entries {
		e := &h.entries[j]
		if j > 0 && Less(e, &h.entries[(j-1)/arity]) {
			return fmt.Errorf("rank.Heap: entry %d (ID %d) sorts before its parent", j, e.ID)
		}
		if int(e.Slot) >= len(h.pos) || h.pos[e.Slot] != int32(j) {
			return fmt.Errorf("rank.Heap: slot %d's position does not point at its entry %d", e.Slot, j)
		}
	}
	n := 0
	for _, p := range h.pos {
		if p >= 0 {
			n++
		}
	}
	if n != len(h.entries) {
		return fmt.Errorf("rank.Heap: %d positions set for %d entries", n, len(h.entries))
	}
	return nil
}
