package kvevict

import (
	"fmt"
	"slices"

	"github.com/google/btree"
	"github.com/sagellm/kvevict/internal/rank"
)

// btreeOrder is an order of an Index of a key strategy that keeps every
// evictable candidate in one B-tree by (key, ID): github.com/google/btree,
// beside the run and heap of keyOrder. Every change is a delete and an
// insert, O(log n) whatever the order in which keys arrive, and the next
// victim is the tree's minimum.
type btreeOrder struct {
	params keyParams
	cands  *[]Candidate // the Index's candidates, by slot
	state  []btreeState // by slot
	tree   *btree.BTreeG[btreeItem]
	taken  []int32 // the victims of the eviction under way
}

// btreeDegree is the tree's minimum number of children per inner node:
// a node holds up to 2*btreeDegree-1 items of 32 bytes.
const btreeDegree = 32

// btreeItem is a candidate as the tree files it.
type btreeItem struct {
	key  rank.Key
	id   uint64
	slot int32
}

// btreeState is what a btreeOrder keeps of a slot: the key the candidate
// was filed under, to find its item again when it changes.
type btreeState struct {
	key   rank.Key
	filed bool // in the tree: evictable and not taken as a victim
}

func newBTreeOrder(params keyParams, cands *[]Candidate) *btreeOrder {
	less := func(a, b btreeItem) bool { return before(a.key, a.id, b.key, b.id) }
	return &btreeOrder{params: params, cands: cands, tree: btree.NewG(btreeDegree, less)}
}

func (o *btreeOrder) grow(n int) { o.state = slices.Grow(o.state, n) }

func (o *btreeOrder) add(slot int32) {
	for int(slot) >= len(o.state) {
		o.state = append(o.state, btreeState{})
	}
	o.state[slot] = btreeState{}
	if c := &(*o.cands)[slot]; c.evictable() {
		o.file(slot, o.params.keyOf(c))
	}
}

// update files the candidate again under its new key, if it changed.
// O(log n).
func (o *btreeOrder) update(slot int32, _ int64) {
	c, st := &(*o.cands)[slot], &o.state[slot]
	if !c.evictable() {
		if st.filed {
			o.detach(slot)
		}
		return
	}
	k := o.params.keyOf(c)
	if st.filed {
		if st.key == k {
			return
		}
		o.detach(slot)
	}
	o.file(slot, k)
}

func (o *btreeOrder) remove(slot int32) {
	if o.state[slot].filed {
		o.detach(slot)
	}
}

// access: a key strategy ranks by the candidates' fields alone.
func (o *btreeOrder) access(uint64) {}

func (o *btreeOrder) begin(int) { o.taken = o.taken[:0] }

// next takes the tree's minimum. O(log n).
func (o *btreeOrder) next() int32 {
	it, _ := o.tree.DeleteMin()
	o.state[it.slot].filed = false
	o.taken = append(o.taken, it.slot)
	return it.slot
}

func (o *btreeOrder) commit(bool) { o.taken = o.taken[:0] }

// rollback files the victims again under the keys they were taken with.
func (o *btreeOrder) rollback() {
	for _, slot := range o.taken {
		o.tree.ReplaceOrInsert(o.item(slot))
		o.state[slot].filed = true
	}
	o.taken = o.taken[:0]
}

// item is the tree's item of the candidate in slot, under the key it was
// filed with.
func (o *btreeOrder) item(slot int32) btreeItem {
	return btreeItem{key: o.state[slot].key, id: (*o.cands)[slot].ID, slot: slot}
}

// file puts the evictable candidate in slot in the tree under key k.
func (o *btreeOrder) file(slot int32, k rank.Key) {
	o.state[slot] = btreeState{key: k, filed: true}
	o.tree.ReplaceOrInsert(o.item(slot))
}

// detach takes the candidate in slot out of the tree.
func (o *btreeOrder) detach(slot int32) {
	o.tree.Delete(o.item(slot))
	o.state[slot].filed = false
}

// check verifies that the tree holds exactly the evictable candidates,
// each once, under its current key, in (key, ID) order.
func (o *btreeOrder) check() error {
	cands := *o.cands
	if len(o.state) != len(cands) {
		return fmt.Errorf("%d states for %d slots", len(o.state), len(cands))
	}
	filed := 0
	for slot := range cands {
		c, st := &cands[slot], &o.state[slot]
		if c.evictable() != st.filed {
			return fmt.Errorf("ID %d: evictable %v, filed %v", c.ID, c.evictable(), st.filed)
		}
		if !st.filed {
			continue
		}
		filed++
		if k := o.params.keyOf(c); st.key != k {
			return fmt.Errorf("ID %d: filed under key %+v, want %+v", c.ID, st.key, k)
		}
	}
	if o.tree.Len() != filed {
		return fmt.Errorf("%d candidates filed, the tree holds %d", filed, o.tree.Len())
	}
	var err error
	var prev *btreeItem
	o.tree.Ascend(func(it btreeItem) bool {
		switch {
		case it.slot < 0 || int(it.slot) >= len(cands) || !o.state[it.slot].filed:
			err = fmt.Errorf("tree item %+v: slot not filed", it)
		case it != o.item(it.slot):
			err = fmt.Errorf("tree item %+v is stale, want %+v", it, o.item(it.slot))
		case prev != nil && !before(prev.key, prev.id, it.key, it.id):
			err = fmt.Errorf("tree order broken between IDs %d and %d", prev.id, it.id)
		}
		prev = &it
		return err == nil
	})
	return err
}
