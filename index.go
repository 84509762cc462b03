package kvevict

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"
)

// ErrUnknownSequence: an [Index] operation named a sequence ID that the index
// does not hold (never added, removed, or evicted).
var ErrUnknownSequence = errors.New("kvevict: unknown sequence")

// Index keeps the candidates of a KV pool ordered by a key strategy between
// evictions, so that an eviction costs O(k log n) for k victims among n
// sequences instead of the O(n) pass of [Policy.SelectVictims], and a reuse
// costs O(log n). The allocator adds a [Candidate] when a sequence first holds
// blocks, reports reuses with [Index.Touch] and changes with [Index.Update],
// [Index.Pin] or [Index.Acquire], and calls [Index.Evict] when it needs
// blocks; the index removes its victims.
//
// Evict follows the rules of SelectVictims exactly: greedy smallest key
// first, equal keys broken by ID, pinned and referenced candidates skipped,
// the last victim trimmed to a tail of its blocks when it allows partial
// eviction, and nothing evicted (an error matching [ErrInsufficientBlocks])
// when the evictable blocks cannot cover the need. For the same candidates it
// picks the same victims as a [Policy] of the same strategy and options.
//
// Every key strategy works with the index, with one exception: a key that
// depends on the current tick (FrequencyCost with [WithCostDecay] > 0)
// changes for every candidate as time passes, which no incremental order can
// follow; [NewIndex] rejects it. Adaptive strategies, whose order lives in
// their own history rather than in the candidates' fields, are not supported
// either. Both are served by [Policy] over a candidate slice.
//
// # Order structure
//
// The evictable candidates are kept in an indexed 4-ary min-heap by (key,
// ID), each candidate knowing its heap position so a changed key is fixed in
// place (container/heap's Fix); pinned, referenced and empty candidates stay
// out of it. An eviction only ever needs the minimum, and a reuse changes one
// key. The heap was measured against github.com/google/btree's BTreeG keyed
// by (key, ID) (degree 32) behind the same ID map and slab, by
// BenchmarkIndexOrder on LRU (ns/op, mean of two runs of -benchtime=0.3s on
// a shared 2-core machine; evict+add evicts the oldest sequence and re-adds
// it as the newest, and the heap's figure includes the clock reads and
// metrics that the B-tree side skips, about 130 ns):
//
//	                 n=1000          n=1000000
//	                 heap   btree    heap   btree
//	touch              64     350     483    1110
//	evict+add         430     216     731     476
//
// A touch is 2.3 to 5.5 times faster with the heap: it sifts one entry
// through a few levels, where a B-tree deletes and re-inserts it, two
// descents with binary search. An eviction is 1.5 to 2 times faster with the
// B-tree on LRU, whose minimum and newest keys sit in two leaves that stay
// in cache, while the heap sifts a leaf entry down from the root. An
// allocator touches every running sequence on each decode step and evicts
// far less often, so the heap is the better trade; it also needs 36 bytes
// per evictable sequence against the B-tree's node overhead.
//
// # Metrics
//
// [Index.Metrics] reports the same fields as [Policy.Metrics]: an Evict that
// removes something counts as a selection. Re-prefill detection follows
// UpdateAccess where it means the same: adding an ID that was evicted
// (its prefill is redone) counts a re-prefill, as does the first Touch of a
// sequence after a partial eviction trimmed its tail. A Touch of a sequence
// that lost nothing counts nothing.
//
// # Memory and concurrency
//
// The index keeps each Candidate by value, including its Blocks slice header
// (not a copy of the blocks): the caller must not modify a Blocks slice while
// its candidate is in the index, and a Victim's Blocks share it. Memory is
// O(peak number of sequences) plus the bounded eviction history of
// [WithHistoryCap]. An Index is not safe for concurrent use: the allocator
// guards it with the lock that guards its pool.
type Index struct {
	strategy Strategy
	params   keyParams
	logger   *slog.Logger

	nodes []indexNode      // slab of candidates
	pos   []int32          // pos[slot]: position of nodes[slot] in heap, notInHeap or slotFree
	free  []int32          // free slots of nodes
	slots map[uint64]int32 // ID -> slot in nodes

	// heap is a 4-ary min-heap by (key, ID) of the evictable candidates;
	// entry.idx is the candidate's slot and pos[slot] its position here.
	heap      []entry
	available int // blocks held by evictable candidates

	stats stats
}

// indexNode is one candidate the index holds. Heap positions live apart,
// in Index.pos, because sifting writes one per level: a compact array keeps
// those writes in cache at a million sequences.
type indexNode struct {
	c       Candidate
	trimmed bool // lost a tail to a partial eviction and not touched since
}

// heapArity is the heap's fan-out: four children per node halve the depth of
// a binary heap, and the four entries (32 bytes each) span two cache lines.
const heapArity = 4

// Positions of a node that is not in the heap.
const (
	notInHeap int32 = -1 // held but not evictable
	slotFree  int32 = -2 // the slot holds no candidate
)

// maxIndexLen bounds how many sequences an index holds, so slots and heap
// positions fit an int32.
const maxIndexLen = math.MaxInt32

// NewIndex returns an empty index ranking by key strategy s, configured by
// the same options as [New]. It returns an error matching
// [ErrUnknownStrategy] for an unregistered or adaptive strategy and one
// matching [ErrInvalidArgument] for an invalid option or a key that depends
// on the current tick (FrequencyCost with decay).
func NewIndex(s Strategy, opts ...Option) (*Index, error) {
	info, cfg, err := resolve(s, opts)
	if err != nil {
		return nil, err
	}
	if !isKeyKind(info.kind) {
		return nil, fmt.Errorf("%w: %q keeps history of its own; the index supports key strategies only", ErrUnknownStrategy, s)
	}
	params := newKeyParams(info.kind, &cfg)
	if params.usesNow {
		return nil, fmt.Errorf("%w: %q with cost decay ranks by the current tick, which an index cannot keep in order; use a Policy", ErrInvalidArgument, s)
	}
	return &Index{
		strategy: s,
		params:   params,
		logger:   cfg.logger,
		slots:    make(map[uint64]int32),
		stats:    newStats(s, cfg.historyCap),
	}, nil
}

// isKeyKind reports whether kind is one of the key strategies, whose order is
// a function of a candidate's fields.
func isKeyKind(kind keyKind) bool {
	switch kind {
	case kindLRU, kindMRU, kindFIFO, kindFILO, kindLFU, kindSLRU, kindQoS, kindPredictive, kindCost:
		return true
	}
	return false
}

// Len returns how many sequences the index holds, evictable or not. O(1).
func (x *Index) Len() int { return len(x.slots) }

// EvictableBlocks returns how many blocks the evictable (unpinned,
// unreferenced) sequences hold: the most one Evict can free. O(1).
func (x *Index) EvictableBlocks() int { return x.available }

// Get returns the candidate with the given ID as the index holds it. O(1).
func (x *Index) Get(id uint64) (Candidate, bool) {
	slot, ok := x.slots[id]
	if !ok {
		return Candidate{}, false
	}
	return x.nodes[slot].c, true
}

// Add inserts c. It returns an error matching [ErrInvalidCandidate] if c has
// a negative RefCount, AccessCount, EstimatedLifetime, SeqLen or MaxLen or
// its ID is already in the index, and one matching [ErrInvalidArgument] if
// the index already holds math.MaxInt32 sequences. Adding an ID that an
// earlier Evict took counts a re-prefill. O(log n).
func (x *Index) Add(c Candidate) error {
	if !valid(&c) {
		field, value := negativeField(&c)
		return fmt.Errorf("%w: ID %d has negative %s %v", ErrInvalidCandidate, c.ID, field, value)
	}
	if _, dup := x.slots[c.ID]; dup {
		return fmt.Errorf("%w: ID %d is already in the index", ErrInvalidCandidate, c.ID)
	}
	if len(x.slots) >= maxIndexLen {
		return fmt.Errorf("%w: the index is full (%d sequences)", ErrInvalidArgument, len(x.slots))
	}
	var slot int32
	if n := len(x.free); n > 0 {
		slot = x.free[n-1]
		x.free = x.free[:n-1]
	} else {
		slot = int32(len(x.nodes))
		x.nodes = append(x.nodes, indexNode{})
		x.pos = append(x.pos, slotFree)
	}
	x.nodes[slot] = indexNode{c: c}
	x.pos[slot] = notInHeap
	x.slots[c.ID] = slot
	x.stats.access(c.ID)
	if c.evictable() {
		x.available += len(c.Blocks)
		x.push(slot)
	}
	return nil
}

// Remove deletes the sequence with the given ID, as when it finishes and the
// allocator frees its blocks itself, and reports whether it was there. It
// counts no eviction. O(log n).
func (x *Index) Remove(id uint64) bool {
	slot, ok := x.slots[id]
	if !ok {
		return false
	}
	if j := x.pos[slot]; j >= 0 {
		x.available -= len(x.nodes[slot].c.Blocks)
		x.removeAt(j)
	}
	x.release(slot)
	return true
}

// release frees a slot whose node is out of the heap.
func (x *Index) release(slot int32) {
	delete(x.slots, x.nodes[slot].c.ID)
	x.nodes[slot] = indexNode{} // drop the Blocks reference
	x.pos[slot] = slotFree
	x.free = append(x.free, slot)
}

// Touch records a reuse of sequence id at tick: LastAccess = tick and
// AccessCount + 1 (saturating), then re-ranks it. It returns an error
// matching [ErrUnknownSequence] if the index does not hold id. It allocates
// nothing. O(log n).
func (x *Index) Touch(id uint64, tick int64) error {
	slot, ok := x.slots[id]
	if !ok {
		return unknownSequence(id)
	}
	n := &x.nodes[slot]
	n.c.LastAccess = tick
	if n.c.AccessCount < math.MaxInt {
		n.c.AccessCount++
	}
	if n.trimmed {
		n.trimmed = false
		x.stats.access(id)
	}
	if j := x.pos[slot]; j >= 0 {
		x.rekey(j)
	}
	return nil
}

// Update replaces every field of the held candidate with c.ID by c's and
// re-ranks it, for changes Touch does not cover (blocks appended by decoding,
// a new priority or lifetime estimate). It returns an error matching
// [ErrUnknownSequence] if the index does not hold c.ID and one matching
// [ErrInvalidCandidate] if c has a negative field. O(log n).
func (x *Index) Update(c Candidate) error {
	if !valid(&c) {
		field, value := negativeField(&c)
		return fmt.Errorf("%w: ID %d has negative %s %v", ErrInvalidCandidate, c.ID, field, value)
	}
	slot, ok := x.slots[c.ID]
	if !ok {
		return unknownSequence(c.ID)
	}
	x.change(slot, func(old *Candidate) { *old = c })
	return nil
}

// Pin sets whether sequence id is pinned (never evicted). It returns an
// error matching [ErrUnknownSequence] if the index does not hold id.
// O(log n).
func (x *Index) Pin(id uint64, pinned bool) error {
	slot, ok := x.slots[id]
	if !ok {
		return unknownSequence(id)
	}
	x.change(slot, func(c *Candidate) { c.Pinned = pinned })
	return nil
}

// Acquire adds one reference to sequence id: a running request uses its
// blocks, so it is not evicted until the matching [Index.Release]. It returns
// an error matching [ErrUnknownSequence] if the index does not hold id and
// one matching [ErrInvalidArgument] if the count would overflow. O(log n).
func (x *Index) Acquire(id uint64) error {
	slot, ok := x.slots[id]
	if !ok {
		return unknownSequence(id)
	}
	if x.nodes[slot].c.RefCount == math.MaxInt {
		return fmt.Errorf("%w: reference count of ID %d would overflow", ErrInvalidArgument, id)
	}
	x.change(slot, func(c *Candidate) { c.RefCount++ })
	return nil
}

// Release drops one reference to sequence id; at zero references it becomes
// evictable again unless pinned. It returns an error matching
// [ErrUnknownSequence] if the index does not hold id and one matching
// [ErrInvalidArgument] if id holds no reference. O(log n).
func (x *Index) Release(id uint64) error {
	slot, ok := x.slots[id]
	if !ok {
		return unknownSequence(id)
	}
	if x.nodes[slot].c.RefCount == 0 {
		return fmt.Errorf("%w: ID %d holds no reference to release", ErrInvalidArgument, id)
	}
	x.change(slot, func(c *Candidate) { c.RefCount-- })
	return nil
}

func unknownSequence(id uint64) error {
	return fmt.Errorf("%w: ID %d is not in the index", ErrUnknownSequence, id)
}

// change applies f to the candidate in slot and moves it into, out of or
// within the heap as its evictability and key require.
func (x *Index) change(slot int32, f func(*Candidate)) {
	n := &x.nodes[slot]
	was, oldBlocks := x.pos[slot] >= 0, len(n.c.Blocks)
	f(&n.c)
	now := n.c.evictable()
	switch {
	case was && now:
		x.available += len(n.c.Blocks) - oldBlocks
		x.rekey(x.pos[slot])
	case was:
		x.available -= oldBlocks
		x.removeAt(x.pos[slot])
	case now:
		x.available += len(n.c.Blocks)
		x.push(slot)
	}
}

// Evict frees at least requiredBlocks blocks and removes the victims from the
// index, as [Index.EvictAppend] with a new slice.
func (x *Index) Evict(requiredBlocks int) (Result, error) {
	return x.EvictAppend(nil, requiredBlocks)
}

// EvictAppend picks victims as [Policy.SelectVictims] would over the held
// candidates, removes them from the index (a victim trimmed by a partial
// eviction stays with the head of its blocks) and appends them to dst, in
// eviction order. The returned Result's Victims are the appended elements;
// passing the previous Victims[:0] back as dst makes a steady-state eviction
// allocate nothing. If the evictable blocks cannot cover requiredBlocks it
// returns an error matching [ErrInsufficientBlocks] and changes nothing; a
// negative requiredBlocks returns one matching [ErrInvalidArgument];
// requiredBlocks == 0 returns an empty Result. O(k log n) for k victims.
func (x *Index) EvictAppend(dst []Victim, requiredBlocks int) (Result, error) {
	if requiredBlocks < 0 {
		return Result{}, fmt.Errorf("%w: requiredBlocks must not be negative, got %d", ErrInvalidArgument, requiredBlocks)
	}
	if x.available < requiredBlocks {
		return Result{}, &InsufficientBlocksError{Required: requiredBlocks, Available: x.available}
	}
	if requiredBlocks == 0 {
		return Result{Strategy: x.strategy}, nil
	}
	start := time.Now()
	first, freed, partial := len(dst), 0, 0
	for freed < requiredBlocks {
		slot := x.heap[0].idx
		n := &x.nodes[slot]
		id, blocks := n.c.ID, n.c.Blocks
		if need := requiredBlocks - freed; n.c.AllowPartial && len(blocks) > need {
			keep := len(blocks) - need
			n.c.Blocks = blocks[:keep:keep]
			n.trimmed = true
			x.available -= need
			x.rekey(0)
			blocks = blocks[keep:]
			partial++
		} else {
			x.available -= len(blocks)
			x.removeAt(0)
			x.release(slot)
		}
		dst = append(dst, Victim{ID: id, Blocks: blocks})
		freed += len(blocks)
	}
	res := Result{Victims: dst[first:], FreedBlocks: freed, Strategy: x.strategy}
	res.Elapsed = time.Since(start)
	x.stats.record(&res, partial)
	if x.logger != nil {
		logEviction(x.logger, &res)
	}
	return res, nil
}

// Metrics returns a snapshot of the index's counters, the same fields as
// [Policy.Metrics]. O(1) but for sorting the latency window.
func (x *Index) Metrics() Metrics { return x.stats.snapshot() }

// push adds the candidate in slot to the heap. O(log n).
func (x *Index) push(slot int32) {
	c := &x.nodes[slot].c
	j := int32(len(x.heap))
	x.heap = append(x.heap, entry{Key: x.params.keyOf(c), id: c.ID, idx: slot, blocks: int32(min(len(c.Blocks), math.MaxInt32))})
	x.pos[slot] = j
	x.up(j)
}

// removeAt takes the entry at position j out of the heap. O(log n).
func (x *Index) removeAt(j int32) {
	h := x.heap
	last := int32(len(h) - 1)
	x.pos[h[j].idx] = notInHeap
	if j != last {
		h[j] = h[last]
		x.pos[h[j].idx] = j
	}
	x.heap = h[:last]
	if j != last {
		x.fix(j)
	}
}

// rekey recomputes the key of the entry at position j after its candidate
// changed, and restores the heap order. O(log n).
func (x *Index) rekey(j int32) {
	e := &x.heap[j]
	c := &x.nodes[e.idx].c
	e.Key = x.params.keyOf(c)
	e.blocks = int32(min(len(c.Blocks), math.MaxInt32))
	x.fix(j)
}

// fix moves the entry at j up or down to its place.
func (x *Index) fix(j int32) {
	if !x.down(j) {
		x.up(j)
	}
}

// up sifts the entry at j toward the root.
func (x *Index) up(j int32) {
	h := x.heap
	e := h[j]
	for j > 0 {
		parent := (j - 1) / heapArity
		if !less(&e, &h[parent]) {
			break
		}
		h[j] = h[parent]
		x.pos[h[j].idx] = j
		j = parent
	}
	h[j] = e
	x.pos[e.idx] = j
}

// down sifts the entry at j toward the leaves and reports whether it moved.
func (x *Index) down(j int32) bool {
	h := x.heap
	n := len(h)
	e := h[j]
	start := j
	for {
		first := heapArity*int(j) + 1
		if first >= n {
			break
		}
		child := first
		for c := first + 1; c < min(first+heapArity, n); c++ {
			if less(&h[c], &h[child]) {
				child = c
			}
		}
		if !less(&h[child], &e) {
			break
		}
		h[j] = h[child]
		x.pos[h[j].idx] = j
		j = int32(child)
	}
	h[j] = e
	x.pos[e.idx] = j
	return j != start
}
