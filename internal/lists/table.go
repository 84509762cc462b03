package lists

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/sagellm/kvevict/internal/dlist"
	"github.com/sagellm/kvevict/internal/idmap"
)

// Node is one id an adaptive strategy tracks, resident or ghost, linked
// into one of the strategy's lists.
type Node struct {
	ID uint64
	// Cand is the candidate the node stands for: in a Policy's selection
	// the index of the call's candidate, valid when Mark is the call's
	// epoch; in an Index the slot of the held candidate the history knows
	// by ID, or -1, always (the root's indexhistory.go).
	Cand int32
	Mark uint32 // the epoch of the selection that marked the node
	List uint8  // the list that holds the node
	Bits uint8  // S3-FIFO's frequency, SIEVE's visited bit
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

// Table holds the nodes of an adaptive strategy in a slab, indexed by id,
// with the strategy's lists threaded through them. Freed nodes are reused,
// so the slab never holds more nodes than were alive at once. A history
// embeds its Table; the root package reads and marks its nodes.
type Table struct {
	Slab          []Node      // the nodes, by node number; a freed one is reused
	links         dlist.Slots // the lists' links, indexed like Slab, and the free nodes
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

	// moves, once journal is set (Journal), lists the nodes made, linked
	// into a list and forgotten, in order: an Index reads them after each
	// call into the history (Moved) to keep its marks across selections,
	// where a Policy marks anew at every call.
	moves   []Move
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

// Move is one change a history made to a node of its table: what an
// Index reads to keep its marks true.
type Move struct {
	N    int32 // the node
	Slot int32 // made, dropped: the slot of the Index's candidate of the node's id, or -1
	Kind MoveKind
}

// MoveKind says what a [Move] did to its node.
type MoveKind uint8

// The kinds of [Move].
const (
	NodeMade    MoveKind = iota // made for an id, then linked
	NodeLinked                  // linked at the head of a list
	NodeDropped                 // unlinked, its id forgotten, the node freed
)

// ShrinkAbove is the scratch size above which a selection much smaller
// than the scratch frees it, so that one huge call does not pin its memory
// forever: for every scratch of a selection, here and in the root package.
const ShrinkAbove = 1 << 16

// NewTable returns an empty table whose lists residentLists hold resident
// ids; the others hold ghosts.
func NewTable(residentLists ...uint8) Table {
	var t Table
	for i := range t.lists {
		t.lists[i] = nodeList{List: dlist.Empty()}
	}
	for _, l := range residentLists {
		t.residentLists |= 1 << l
	}
	return t
}

// Reserve makes room for n more nodes without reallocating.
func (t *Table) Reserve(n int) {
	t.Slab = slices.Grow(t.Slab, n)
	t.links.Links = slices.Grow(t.links.Links, n)
	t.index.Reserve(n)
}

// Lookup returns id's node, or -1. O(1).
func (t *Table) Lookup(id uint64) int32 {
	if e := t.index.Ref(id); e != nil {
		return e.node
	}
	return -1
}

// Hold notes that an Index holds in slot the candidate the history knows
// as id, and returns id's node, or -1. O(1).
func (t *Table) Hold(id uint64, slot int32) int32 {
	if e := t.index.Ref(id); e != nil {
		e.held = slot + 1
		return e.node
	}
	t.index.Put(id, tableEntry{node: -1, held: slot + 1})
	t.onlyHeld++
	return -1
}

// Unhold notes that the Index no longer holds a candidate known as id.
// O(1).
func (t *Table) Unhold(id uint64) {
	e := t.index.Ref(id)
	if e.node >= 0 {
		e.held = 0
		return
	}
	t.index.Del(id)
	t.onlyHeld--
}

// HeldSlot returns the slot in which the Index holds the candidate known
// as id. O(1).
func (t *Table) HeldSlot(id uint64) (int32, bool) {
	if e := t.index.Ref(id); e != nil && e.held != 0 {
		return e.held - 1, true
	}
	return 0, false
}

// Slots returns the slots of the table's index: the ids it holds before
// it grows. O(1).
func (t *Table) Slots() int { return t.index.Slots() }

// Tracked returns how many ids the history tracks. O(1).
func (t *Table) Tracked() int { return t.index.Len() - t.onlyHeld }

// Resident reports whether node n is in the cache rather than a ghost.
func (t *Table) Resident(n int32) bool {
	return t.residentLists&(1<<t.Slab[n].List) != 0
}

// add makes a node for id at the head of list l and returns it. O(1).
func (t *Table) add(id uint64, l uint8) int32 {
	n := t.Alloc(id)
	t.PushHead(l, n)
	return n
}

// Alloc makes a node for id in no list, for a history that sets what it
// keeps beside the node before linking it. O(1).
func (t *Table) Alloc(id uint64) int32 {
	n, grown := t.links.Alloc()
	if grown {
		t.Slab = append(t.Slab, Node{})
	}
	t.Slab[n] = Node{ID: id}
	e := t.index.Upsert(id)
	if e.held != 0 {
		t.onlyHeld-- // an id held, untracked until now
	}
	e.node = n
	if t.journal {
		t.Slab[n].Cand = e.held - 1 // an Index's node stands for the candidate held under its id
		t.moves = append(t.moves, Move{N: n, Slot: e.held - 1, Kind: NodeMade})
	}
	return n
}

// Forget drops id's node, resident or a ghost, if it has one: History's
// Forget for the histories whose ghosts are plain nodes (ARC, S3-FIFO).
// SIEVE's moves its hand first. O(1).
func (t *Table) Forget(id uint64) {
	if n := t.Lookup(id); n >= 0 {
		t.Drop(n)
	}
}

// Drop unlinks node n and forgets its id. O(1).
func (t *Table) Drop(n int32) {
	t.unlink(n)
	id := t.Slab[n].ID
	if e := t.index.Ref(id); e.held != 0 {
		e.node = -1 // the Index still finds its candidate by the entry
		t.onlyHeld++
	} else {
		t.index.Del(id)
	}
	if t.journal {
		t.moves = append(t.moves, Move{N: n, Slot: t.Slab[n].Cand, Kind: NodeDropped})
	}
	t.Slab[n] = Node{Cand: -1}
	t.links.Free(n)
}

// PushHead links unlinked node n at the head of list l.
func (t *Table) PushHead(l uint8, n int32) {
	ls := &t.lists[l]
	t.Slab[n].List = l
	t.links.PushBack(&ls.List, n)
	if t.Marked(n) {
		ls.marked++
	}
	if t.journal {
		t.moves = append(t.moves, Move{N: n, Kind: NodeLinked})
	}
}

// unlink removes node n from its list.
func (t *Table) unlink(n int32) {
	ls := &t.lists[t.Slab[n].List]
	t.links.Remove(&ls.List, n)
	if t.Marked(n) {
		ls.marked--
	}
}

// MoveHead moves node n to the head of list l. O(1).
func (t *Table) MoveHead(l uint8, n int32) {
	t.unlink(n)
	t.PushHead(l, n)
}

// Journal makes the table list its moves from now on, for an Index to
// read with [Table.Moved].
func (t *Table) Journal() { t.journal = true }

// Moved returns the moves since the last call, in order, and forgets
// them: valid until the history moves a node again. O(1).
func (t *Table) Moved() []Move {
	m := t.moves
	t.moves = m[:0]
	return m
}

// Size returns the length of list l.
func (t *Table) Size(l uint8) int { return t.lists[l].Len }

// live returns the length of list l without the victims chosen from it
// and not yet evicted: its size as the victims chosen so far left it.
func (t *Table) live(l uint8) int { return t.lists[l].Len - t.taken[l] }

// Choose notes unmarked node n as a victim taken wholly, to be evicted
// once the selection's victims are known to free distinct blocks.
func (t *Table) Choose(n int32) {
	t.chosen = append(t.chosen, n)
	t.taken[t.Slab[n].List]++
}

// EndChoice returns the nodes chosen since the last call, in order, and
// forgets them: valid until the next choose.
func (t *Table) EndChoice() []int32 {
	chosen := t.chosen
	t.chosen, t.taken = chosen[:0], [maxLists]int{}
	if cap(t.chosen) > ShrinkAbove && len(chosen) < ShrinkAbove/8 {
		t.chosen = nil
	}
	return chosen
}

// Tail returns the oldest node of list l, or -1 if it is empty.
func (t *Table) Tail(l uint8) int32 { return t.lists[l].Front }

// Newer returns the neighbour of node n toward its list's head, or -1 at
// the head.
func (t *Table) Newer(n int32) int32 { return t.links.Next(n) }

// NextEpoch starts a selection: no node is marked.
func (t *Table) NextEpoch() {
	t.epoch++
	if t.epoch == 0 { // wrapped: clear the marks of 2^32 calls ago
		for i := range t.Slab {
			t.Slab[i].Mark = 0
		}
		t.epoch = 1
	}
	for i := range t.lists {
		t.lists[i].marked = 0
	}
}

// Mark makes node n a possible victim of this selection: candidate i.
func (t *Table) Mark(n, i int32) {
	x := &t.Slab[n]
	if x.Mark != t.epoch {
		t.lists[x.List].marked++
	}
	x.Mark, x.Cand = t.epoch, i
}

// Unmark takes node n out of this selection's possible victims.
func (t *Table) Unmark(n int32) {
	if t.Marked(n) {
		t.lists[t.Slab[n].List].marked--
		t.Slab[n].Mark = 0
	}
}

// Marked reports whether node n may be a victim of this selection.
func (t *Table) Marked(n int32) bool {
	return t.Slab[n].Mark == t.epoch && t.epoch != 0
}

// scan returns the first marked node of list l from node from toward the
// head, or -1. It is how victims skip the pinned, the referenced and the
// ids that are not among the call's candidates.
func (t *Table) scan(from int32) int32 {
	for n := from; n >= 0; n = t.links.Next(n) {
		if t.Marked(n) {
			return n
		}
	}
	return -1
}

// String describes the table's lists, oldest node first, each node as
// its id and bits: what a selection may change, for tests.
func (t *Table) String() string {
	var b strings.Builder
	for l := range t.lists {
		fmt.Fprintf(&b, "%d:", l)
		for n := t.lists[l].Front; n >= 0; n = t.Newer(n) {
			fmt.Fprintf(&b, " %d/%d", t.Slab[n].ID, t.Slab[n].Bits)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Live reports whether node n is in use: its id's node. O(1).
func (t *Table) Live(n int32) bool {
	e, ok := t.index.Get(t.Slab[n].ID)
	return ok && e.node == n
}

// Held returns how many ids an Index holds a candidate under, for tests.
// O(nodes).
func (t *Table) Held() int {
	held := t.onlyHeld
	for n := range t.Slab {
		if e, ok := t.index.Get(t.Slab[n].ID); ok && e.node == int32(n) && e.held != 0 {
			held++
		}
	}
	return held
}

// Unread returns how many moves the Index has not read. O(1).
func (t *Table) Unread() int { return len(t.moves) }

// CheckTable verifies the links, lengths, marks and index of t, for tests.
func (t *Table) CheckTable() error {
	if len(t.links.Links) != len(t.Slab) {
		return fmt.Errorf("%d links for %d nodes", len(t.links.Links), len(t.Slab))
	}
	seen := 0
	for l := range t.lists {
		ls := &t.lists[l]
		marked := 0
		err := t.links.Check(&ls.List, func(n int32) error {
			x := &t.Slab[n]
			if x.List != uint8(l) {
				return fmt.Errorf("node %d (id %d) in list %d says list %d", n, x.ID, l, x.List)
			}
			if got, _ := t.index.Get(x.ID); got.node != n {
				return fmt.Errorf("list %d: id %d indexed at %d, want %d", l, x.ID, got.node, n)
			}
			if t.Marked(n) {
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
	if seen != t.Tracked() {
		return fmt.Errorf("%d ids tracked, %d in lists", t.Tracked(), seen)
	}
	if err := t.links.CheckFree(); err != nil {
		return err
	}
	if seen+t.links.FreeLen() != len(t.Slab) {
		return fmt.Errorf("%d nodes in lists + %d free != %d nodes", seen, t.links.FreeLen(), len(t.Slab))
	}
	if err := t.index.Check(); err != nil {
		return err
	}
	if len(t.Slab) > math.MaxInt32 {
		return fmt.Errorf("Slab of %d nodes", len(t.Slab))
	}
	return nil
}
