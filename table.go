package kvevict

import (
	"fmt"
	"math"
	"slices"

	"github.com/sagellm/kvevict/internal/dlist"
	"github.com/sagellm/kvevict/internal/idmap"
)

// node is one id an adaptive strategy tracks, resident or ghost, linked into
// one of the strategy's lists.
type node struct {
	id uint64
	// cand is the candidate the node stands for: in a Policy's selection
	// the index of the call's candidate, valid when mark is the call's
	// epoch; in an Index the slot of the held candidate the history knows
	// by id, or -1, always (see indexhistory.go).
	cand int32
	mark uint32
	list uint8
	bits uint8 // S3-FIFO's frequency, SIEVE's visited bit
}

// nodeList is one of a strategy's lists. The papers call its newest node
// (most recently used or inserted) the head and its oldest the tail: the
// list's Back and Front. The table's methods keep the papers' words.
type nodeList struct {
	dlist.List
	marked int // nodes marked in the current selection
}

// maxLists is the most lists a strategy uses (ARC's t1, t2, b1, b2).
const maxLists = 4

// table holds the nodes of an adaptive strategy in a slab, indexed by id,
// with the strategy's lists threaded through them. Freed nodes are reused,
// so the slab never holds more nodes than were alive at once.
type table struct {
	slab          []node
	links         dlist.Slots // the lists' links, indexed like slab, and the free nodes
	index         idmap.Map[tableEntry]
	onlyHeld      int // ids in index with no node: held by an Index (see hold)
	lists         [maxLists]nodeList
	residentLists uint8 // bit l set: list l holds resident ids
	epoch         uint32

	// A selection evicts its victims from the history only once their
	// blocks are known to be distinct, so that one refused evicts nothing.
	// Until then chosen holds the nodes of the victims taken wholly, in
	// order, and taken counts them per list: a strategy that chooses by
	// its lists' lengths counts them gone (live).
	chosen []int32
	taken  [maxLists]int

	// moves, once journal is set, lists the nodes made, linked into a
	// list and forgotten, in order: an [Index] reads them after each call
	// into the history (moved) to keep its marks across selections,
	// where a Policy marks anew at every call.
	moves   []move
	journal bool
}

// tableEntry is what the table's index keeps of an id: its node, and, in
// the table of an Index, the slot of the Index's candidate the history
// knows by that id (its ID; Auto's, its historyID): a node made for the
// id finds its candidate at once, and an Index of ARC, S3-FIFO or SIEVE
// finds its candidates by ID here, so that one look-up finds both, where
// two tables would take two, each a cache miss in a large index.
type tableEntry struct {
	node int32 // -1: the history does not track the id
	held int32 // 1 + the slot of the Index's candidate of this id; 0: none
}

// move is one change a history made to a node of its table: what an
// Index reads to keep its marks true.
type move struct {
	n    int32 // the node
	slot int32 // made, dropped: the slot of the Index's candidate of the node's id, or -1
	kind moveKind
}

type moveKind uint8

const (
	nodeMade    moveKind = iota // made for an id, then linked
	nodeLinked                  // linked at the head of a list
	nodeDropped                 // unlinked, its id forgotten, the node freed
)

// admitShrinkAbove is the scratch size above which a selection much smaller
// than the scratch frees it, so that one huge call does not pin its memory
// forever.
const admitShrinkAbove = 1 << 16

func newTable(residentLists ...uint8) table {
	var t table
	for i := range t.lists {
		t.lists[i] = nodeList{List: dlist.Empty()}
	}
	for _, l := range residentLists {
		t.residentLists |= 1 << l
	}
	return t
}

// reserve makes room for n more nodes without reallocating.
func (t *table) reserve(n int) {
	t.slab = slices.Grow(t.slab, n)
	t.links.Links = slices.Grow(t.links.Links, n)
	t.index.Reserve(n)
}

// lookup returns id's node, or -1. O(1).
func (t *table) lookup(id uint64) int32 {
	if e := t.index.Ref(id); e != nil {
		return e.node
	}
	return -1
}

// hold notes that an Index holds in slot the candidate the history knows
// as id, and returns id's node, or -1. O(1).
func (t *table) hold(id uint64, slot int32) int32 {
	if e := t.index.Ref(id); e != nil {
		e.held = slot + 1
		return e.node
	}
	t.index.Put(id, tableEntry{node: -1, held: slot + 1})
	t.onlyHeld++
	return -1
}

// unhold notes that the Index no longer holds a candidate known as id.
// O(1).
func (t *table) unhold(id uint64) {
	e := t.index.Ref(id)
	if e.node >= 0 {
		e.held = 0
		return
	}
	t.index.Del(id)
	t.onlyHeld--
}

// heldSlot returns the slot in which the Index holds the candidate known
// as id. O(1).
func (t *table) heldSlot(id uint64) (int32, bool) {
	if e := t.index.Ref(id); e != nil && e.held != 0 {
		return e.held - 1, true
	}
	return 0, false
}

// tracked returns how many ids the history tracks. O(1).
func (t *table) tracked() int { return t.index.Len() - t.onlyHeld }

// resident reports whether node n is in the cache rather than a ghost.
func (t *table) resident(n int32) bool {
	return t.residentLists&(1<<t.slab[n].list) != 0
}

// add makes a node for id at the head of list l and returns it. O(1).
func (t *table) add(id uint64, l uint8) int32 {
	n := t.alloc(id)
	t.pushHead(l, n)
	return n
}

// alloc makes a node for id in no list, for a history that sets what it
// keeps beside the node before linking it. O(1).
func (t *table) alloc(id uint64) int32 {
	n, grown := t.links.Alloc()
	if grown {
		t.slab = append(t.slab, node{})
	}
	t.slab[n] = node{id: id}
	e := t.index.Upsert(id)
	if e.held != 0 {
		t.onlyHeld-- // an id held, untracked until now
	}
	e.node = n
	if t.journal {
		t.slab[n].cand = e.held - 1 // an Index's node stands for the candidate held under its id
		t.moves = append(t.moves, move{n: n, slot: e.held - 1, kind: nodeMade})
	}
	return n
}

// drop unlinks node n and forgets its id. O(1).
func (t *table) drop(n int32) {
	t.unlink(n)
	id := t.slab[n].id
	if e := t.index.Ref(id); e.held != 0 {
		e.node = -1 // the Index still finds its candidate by the entry
		t.onlyHeld++
	} else {
		t.index.Del(id)
	}
	if t.journal {
		t.moves = append(t.moves, move{n: n, slot: t.slab[n].cand, kind: nodeDropped})
	}
	t.slab[n] = node{cand: -1}
	t.links.Free(n)
}

// pushHead links unlinked node n at the head of list l.
func (t *table) pushHead(l uint8, n int32) {
	ls := &t.lists[l]
	t.slab[n].list = l
	t.links.PushBack(&ls.List, n)
	if t.marked(n) {
		ls.marked++
	}
	if t.journal {
		t.moves = append(t.moves, move{n: n, kind: nodeLinked})
	}
}

// unlink removes node n from its list.
func (t *table) unlink(n int32) {
	ls := &t.lists[t.slab[n].list]
	t.links.Remove(&ls.List, n)
	if t.marked(n) {
		ls.marked--
	}
}

// moveHead moves node n to the head of list l. O(1).
func (t *table) moveHead(l uint8, n int32) {
	t.unlink(n)
	t.pushHead(l, n)
}

// moved returns the moves since the last call, in order, and forgets
// them: valid until the history moves a node again. O(1).
func (t *table) moved() []move {
	m := t.moves
	t.moves = m[:0]
	return m
}

// size returns the length of list l.
func (t *table) size(l uint8) int { return t.lists[l].Len }

// live returns the length of list l without the victims chosen from it
// and not yet evicted: its size as the victims chosen so far left it.
func (t *table) live(l uint8) int { return t.lists[l].Len - t.taken[l] }

// choose notes unmarked node n as a victim taken wholly, to be evicted
// once the selection's victims are known to free distinct blocks.
func (t *table) choose(n int32) {
	t.chosen = append(t.chosen, n)
	t.taken[t.slab[n].list]++
}

// endChoice returns the nodes chosen since the last call, in order, and
// forgets them: valid until the next choose.
func (t *table) endChoice() []int32 {
	chosen := t.chosen
	t.chosen, t.taken = chosen[:0], [maxLists]int{}
	if cap(t.chosen) > admitShrinkAbove && len(chosen) < admitShrinkAbove/8 {
		t.chosen = nil
	}
	return chosen
}

// tail returns the oldest node of list l, or -1 if it is empty.
func (t *table) tail(l uint8) int32 { return t.lists[l].Front }

// newer returns the neighbour of node n toward its list's head, or -1 at
// the head.
func (t *table) newer(n int32) int32 { return t.links.Next(n) }

// nextEpoch starts a selection: no node is marked.
func (t *table) nextEpoch() {
	t.epoch++
	if t.epoch == 0 { // wrapped: clear the marks of 2^32 calls ago
		for i := range t.slab {
			t.slab[i].mark = 0
		}
		t.epoch = 1
	}
	for i := range t.lists {
		t.lists[i].marked = 0
	}
}

// mark makes node n a possible victim of this selection: candidate i.
func (t *table) mark(n, i int32) {
	x := &t.slab[n]
	if x.mark != t.epoch {
		t.lists[x.list].marked++
	}
	x.mark, x.cand = t.epoch, i
}

// unmark takes node n out of this selection's possible victims.
func (t *table) unmark(n int32) {
	if t.marked(n) {
		t.lists[t.slab[n].list].marked--
		t.slab[n].mark = 0
	}
}

// marked reports whether node n may be a victim of this selection.
func (t *table) marked(n int32) bool {
	return t.slab[n].mark == t.epoch && t.epoch != 0
}

// scan returns the first marked node of list l from node from toward the
// head, or -1. It is how victims skip the pinned, the referenced and the
// ids that are not among the call's candidates.
func (t *table) scan(from int32) int32 {
	for n := from; n >= 0; n = t.links.Next(n) {
		if t.marked(n) {
			return n
		}
	}
	return -1
}

// checkTable verifies the links, lengths, marks and index of t, for tests.
func (t *table) checkTable() error {
	if len(t.links.Links) != len(t.slab) {
		return fmt.Errorf("%d links for %d nodes", len(t.links.Links), len(t.slab))
	}
	seen := 0
	for l := range t.lists {
		ls := &t.lists[l]
		marked := 0
		err := t.links.Check(&ls.List, func(n int32) error {
			x := &t.slab[n]
			if x.list != uint8(l) {
				return fmt.Errorf("node %d (id %d) in list %d says list %d", n, x.id, l, x.list)
			}
			if got, _ := t.index.Get(x.id); got.node != n {
				return fmt.Errorf("list %d: id %d indexed at %d, want %d", l, x.id, got.node, n)
			}
			if t.marked(n) {
				marked++
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("list %d: %w", l, err)
		}
		if t.epoch != 0 && marked != ls.marked {
			return fmt.Errorf("list %d: marked %d, counted %d", l, ls.marked, marked)
		}
		seen += ls.Len
	}
	if seen != t.tracked() {
		return fmt.Errorf("%d ids tracked, %d in lists", t.tracked(), seen)
	}
	if err := t.links.CheckFree(); err != nil {
		return err
	}
	if seen+t.links.FreeLen() != len(t.slab) {
		return fmt.Errorf("%d nodes in lists + %d free != %d nodes", seen, t.links.FreeLen(), len(t.slab))
	}
	if err := t.index.Check(); err != nil {
		return err
	}
	if len(t.slab) > math.MaxInt32 {
		return fmt.Errorf("slab of %d nodes", len(t.slab))
	}
	return nil
}
