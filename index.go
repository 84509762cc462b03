package kvevict

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"

	"github.com/sagellm/kvevict/internal/dlist"
	"github.com/sagellm/kvevict/internal/idmap"
	"github.com/sagellm/kvevict/internal/rank"
)

// Index keeps the candidates of a KV pool ordered by a key strategy between
// evictions, so that an eviction costs O(k log n) for k victims among n
// sequences instead of the O(n) pass of [Policy.SelectVictims], and a request
// costs O(log n). It follows the access protocol of the package
// documentation under its own verbs, because it holds the candidates: the
// allocator adds a [Candidate] when a request's sequence is not resident
// ([Index.Add]), reports every request of a resident one with
// [Index.Touch], other changes with [Index.Update], [Index.Pin] or
// [Index.Lock], and calls [Index.Evict] when it needs blocks; the index
// removes its victims.
//
// Evict follows the rules of SelectVictims exactly: greedy smallest key
// first, equal keys broken by ID, pinned and referenced candidates skipped,
// the last victim trimmed to a tail of its blocks when it allows partial
// eviction, and nothing evicted (an error matching [ErrInsufficientBlocks])
// when the evictable blocks cannot cover the need. For the same candidates it
// picks the same victims as a [Policy] of the same strategy and options.
//
// Every strategy works with the index, with one exception, which no
// incremental order can follow and [NewIndex] rejects: a key that depends
// on the current tick (FrequencyCost with [WithCostDecay] > 0) changes for
// every candidate as time passes; a [Policy] over a candidate slice serves
// it. The adaptive strategies (ARC, S3-FIFO, SIEVE, Auto) rank by a history
// of requests, as their Policy does: call [Index.UpdateAccess] for every
// request, before the Evict that makes room for it.
//
// # Order structure
//
// The evictable candidates are kept in two structures, and an eviction
// takes the smaller of their minima by (key, ID). The run is a doubly linked
// list, ascending: a candidate whose key sorts after the run's last one is
// appended in O(1), and the run's front is its minimum. Under LRU with
// ticks that only grow, as an allocator's clock does, every touch and every
// new sequence lands there, so a touch is an unlink and an append and an
// eviction takes the head, as in a linked-list LRU (and vLLM's free block
// queue). The others (keys that arrive out of order, as most do under LFU,
// or a candidate added with an old LastAccess) go to an indexed 4-ary
// min-heap by (key, ID), each candidate knowing its heap position so a
// changed key is fixed in place (container/heap's Fix). A heap candidate
// whose new key sorts after the run's back moves to the run. Pinned,
// referenced and empty candidates are in neither.
//
// The heap is the 4-ary indexed heap that package prefix's tree uses too.
// An adaptive strategy keeps neither. The index keeps the history's marks
// of which candidates are evictable between evictions; ARC's, S3-FIFO's
// and SIEVE's lists order them, so an eviction costs the steps the history
// takes from its lists' tails (see indexhistory.go). Auto's key moves with
// the horizon at every eviction, so its candidates are kept in groups of
// equal request count, each in (LastAccess, ID) order, whose order no
// horizon changes (see indexauto.go).
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
// O(peak number of sequences) (docs/index.md gives the bytes), plus the
// bounded eviction history of [WithEvictionHistory] and an adaptive
// strategy's history ([WithCapacity], [WithGhostCap]). An Index is not safe
// for concurrent use:
// the allocator guards it with the lock that guards its pool.
type Index struct {
	strategy Strategy
	params   keyParams
	logger   *slog.Logger
	watch    stopwatch // Result.Elapsed

	nodes []indexNode      // slab of candidates
	slots idmap.Map[int32] // ID -> slot in nodes

	// The evictable candidates are split between the run and the heap.
	// The run is a doubly linked list through the slots, ascending by
	// (key, ID) from its front to its back: a candidate whose key sorts
	// after every key in the run is appended to it in O(1), as every touch
	// under LRU is. heap holds the others, by slot.
	run       dlist.List
	links     dlist.Slots // the run's links, indexed like nodes, and the free slots
	heap      rank.Heap
	available int // blocks held by evictable candidates

	// hist, for an adaptive strategy, orders the evictable candidates
	// instead of the run and the heap (see indexhistory.go): the same
	// history as lists or auto, whichever is set.
	hist    history
	lists   listHistory // ARC's, S3-FIFO's or SIEVE's; nil for the others
	auto    *auto       // Auto's, ranked through groups; nil for the others
	groups  *autoGroups // Auto's order (see indexauto.go); nil for the others
	sel     selector    // Auto's selection over the groups
	waiting []int32     // slots whose id hist may not hold as resident: admitted at the next Evict
	spare   []int32     // scratch: the previous waiting, and the taken victims of an Evict by key
	freed   blockSet    // checks that no block is freed twice

	stats stats
}

// indexNode is one candidate the index holds.
type indexNode struct {
	c       Candidate
	key     rank.Key // c's key, while the node is in the run
	at      place    // where the candidate is kept
	waiting bool     // in Index.waiting
	group   int32    // Auto: 1 + the group that holds the candidate, or 0
	refile  bool     // Auto: in autoGroups.refile
}

// place is where the index keeps a slot's candidate.
type place uint8

const (
	slotFree  place = iota // the slot holds no candidate
	held                   // held but not evictable: in neither order
	inRun                  // evictable, in the run
	inHeap                 // evictable, in the heap
	inHistory              // evictable, marked in the adaptive strategy's history when it holds the id as resident
)

// maxIndexLen bounds how many sequences an index holds, so slots and heap
// positions fit an int32.
const maxIndexLen = math.MaxInt32

// NewIndex returns an empty index ranking by strategy s, configured by the
// same options as [New] but [WithSampling]. It returns an error matching
// [ErrUnknownStrategy] for an unregistered strategy, one matching
// [errors.ErrUnsupported] for FrequencyCost with [WithCostDecay], which it
// cannot keep in order, and one matching [ErrInvalidArgument] for an
// invalid or inapplicable option.
func NewIndex(s Strategy, opts ...Option) (*Index, error) {
	info, cfg, err := resolve(s, opts, forIndex)
	if err != nil {
		return nil, err
	}
	params := newKeyParams(info.Kind, &cfg)
	if params.p.UsesNow() { // Auto reads the tick too, and its groups follow it
		return nil, fmt.Errorf("kvevict: NewIndex(%q) with cost decay: %w: the key changes with the current tick, which no incremental order can follow; use a Policy", s, errors.ErrUnsupported)
	}
	x := &Index{
		strategy: Strategy(info.Name),
		params:   params,
		logger:   cfg.Logger,
		run:      dlist.Empty(),
		stats:    newStats(Strategy(info.Name), &cfg),
		watch:    newStopwatch(&cfg),
	}
	switch {
	case info.Kind == rank.KindAuto:
		x.auto, x.groups = newAuto(&cfg), newAutoGroups()
		x.follow(x.auto)
	case info.Kind.Adaptive():
		x.lists = newListHistory(info.Kind, &cfg)
		x.follow(x.lists)
	}
	return x, nil
}

// Grow makes room for n more sequences, so that the next n Adds do not
// reallocate the index's tables, as [slices.Grow] does for a slice: for an
// allocator that knows how many sequences its pool holds at most, which
// saves the copies of a table that doubles as it fills. n <= 0 does
// nothing. O(sequences held + n), once.
func (x *Index) Grow(n int) {
	if n <= 0 {
		return
	}
	n = min(n, maxIndexLen-x.slots.Len())
	x.nodes = slices.Grow(x.nodes, n)
	x.links.Links = slices.Grow(x.links.Links, n)
	x.slots.Reserve(n)
	if x.hist != nil {
		x.waiting = slices.Grow(x.waiting, n)
		x.hist.nodes().reserve(n)
		if x.auto != nil {
			x.auto.info = slices.Grow(x.auto.info, n)
		}
	}
}

// Len returns how many sequences the index holds, evictable or not. O(1).
func (x *Index) Len() int { return x.slots.Len() }

// EvictableBlocks returns how many blocks the evictable (unpinned,
// unreferenced) sequences hold: the most one Evict can free. O(1).
func (x *Index) EvictableBlocks() int { return x.available }

// Get returns the candidate with the given ID as the index holds it. O(1).
func (x *Index) Get(id uint64) (Candidate, bool) {
	slot, ok := x.slots.Get(id)
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
	if _, dup := x.slots.Get(c.ID); dup {
		return fmt.Errorf("%w: ID %d is already in the index", ErrInvalidCandidate, c.ID)
	}
	if x.slots.Len() >= maxIndexLen {
		return fmt.Errorf("%w: the index is full (%d sequences)", ErrInvalidArgument, x.slots.Len())
	}
	slot, grown := x.links.Alloc()
	if grown {
		x.nodes = append(x.nodes, indexNode{})
	}
	x.nodes[slot] = indexNode{c: c, at: held}
	x.slots.Put(c.ID, slot)
	if x.groups != nil {
		x.groups.seen(math.MinInt64, c.LastAccess)
	}
	x.stats.evictions.Access(c.ID)
	if c.evictable() {
		x.available += len(c.Blocks)
		x.insert(slot)
	}
	if x.hist != nil {
		x.admitIfNew(slot)
	}
	return nil
}

// Remove deletes the sequence with the given ID, as when it finishes and the
// allocator frees its blocks itself, and reports whether it was there. It
// counts no eviction. O(log n).
func (x *Index) Remove(id uint64) bool {
	slot, ok := x.slots.Get(id)
	if !ok {
		return false
	}
	if x.ordered(slot) {
		x.available -= len(x.nodes[slot].c.Blocks)
		x.detach(slot)
	}
	x.release(slot)
	return true
}

// release frees a slot whose node is out of the heap and the run (and
// unmarked in the history).
func (x *Index) release(slot int32) {
	if x.groups != nil {
		x.groups.gone(x.nodes[slot].c.LastAccess)
	}
	x.slots.Del(x.nodes[slot].c.ID)
	x.nodes[slot] = indexNode{} // drop the Blocks reference; at = slotFree
	x.links.Free(slot)
}

// Touch records a request of resident sequence id at tick, as
// [Policy.UpdateAccess] does for a policy: LastAccess = tick and
// AccessCount + 1 (saturating), then it re-ranks the sequence. It returns an error
// matching [ErrUnknownSequence] if the index does not hold id. It allocates
// nothing. O(log n); O(1) when the new key sorts after every key in the run,
// as every touch does under LRU with growing ticks (see Order structure).
func (x *Index) Touch(id uint64, tick int64) error {
	slot, ok := x.slots.Get(id)
	if !ok {
		return unknownSequence(id)
	}
	n := &x.nodes[slot]
	if x.groups != nil {
		x.groups.seen(n.c.LastAccess, tick)
	}
	n.c.LastAccess = tick
	if n.c.AccessCount < math.MaxInt {
		n.c.AccessCount++
	}
	// A held sequence has a pending eviction only if a partial one trimmed
	// it since its last access: that Touch is a re-prefill.
	x.stats.evictions.Access(id)
	if x.ordered(slot) {
		x.refile(slot)
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
	slot, ok := x.slots.Get(c.ID)
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
	slot, ok := x.slots.Get(id)
	if !ok {
		return unknownSequence(id)
	}
	x.change(slot, func(c *Candidate) { c.Pinned = pinned })
	return nil
}

// Lock adds one reference to sequence id: a running request uses its
// blocks, so it is not evicted until the matching [Index.Unlock]. It returns
// an error matching [ErrUnknownSequence] if the index does not hold id and
// one matching [ErrInvalidArgument] if the count would overflow. O(log n).
func (x *Index) Lock(id uint64) error {
	slot, ok := x.slots.Get(id)
	if !ok {
		return unknownSequence(id)
	}
	if x.nodes[slot].c.RefCount == math.MaxInt {
		return fmt.Errorf("%w: reference count of ID %d would overflow", ErrInvalidArgument, id)
	}
	x.change(slot, func(c *Candidate) { c.RefCount++ })
	return nil
}

// Unlock drops one reference to sequence id; at zero references it becomes
// evictable again unless pinned. It returns an error matching
// [ErrUnknownSequence] if the index does not hold id and one matching
// [ErrInvalidArgument] if id holds no reference. O(log n).
func (x *Index) Unlock(id uint64) error {
	slot, ok := x.slots.Get(id)
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
	was, oldBlocks, oldTick := x.ordered(slot), len(n.c.Blocks), n.c.LastAccess
	f(&n.c)
	if x.groups != nil {
		x.groups.seen(oldTick, n.c.LastAccess)
	}
	now := n.c.evictable()
	switch {
	case was && now:
		x.available += len(n.c.Blocks) - oldBlocks
		x.refile(slot)
	case was:
		x.available -= oldBlocks
		x.detach(slot)
	case now:
		x.available += len(n.c.Blocks)
		x.insert(slot)
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
// requiredBlocks == 0 returns an empty Result. O(k log n) for k victims;
// O(k) when they come from the run.
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
	start := x.watch.start()
	first := len(dst)
	var freed, partial int
	var err error
	if x.hist != nil {
		dst, freed, partial, err = x.takeFromHistory(dst, requiredBlocks)
	} else {
		dst, freed, partial, err = x.takeInOrder(dst, requiredBlocks)
	}
	if err != nil {
		return Result{}, err
	}
	res := Result{Victims: dst[first:], FreedBlocks: freed, Strategy: x.strategy}
	res.Elapsed = x.watch.elapsed(start)
	x.stats.record(&res, partial)
	if x.logger != nil {
		logEviction(x.logger, &res)
	}
	return res, nil
}

// takeInOrder takes victims by key until they free required blocks, and
// appends them to dst; the evictable blocks must cover required. Victims
// that would free a block twice return an error matching
// [ErrInvalidCandidate] and leave the index as it was: the victims are
// taken out of the order first and released only once their blocks are
// known to be distinct.
func (x *Index) takeInOrder(dst []Victim, required int) (_ []Victim, freed, partial int, err error) {
	first := len(dst)
	taken := x.spare[:0]
	var cutSlot int32 = -1 // the victim trimmed, the last one if any
	var cutBlocks []int    // its blocks before the cut
	for freed < required {
		slot := x.first()
		blocks := x.nodes[slot].c.Blocks
		v, trimmed := x.cut(slot, required-freed)
		if trimmed {
			cutSlot, cutBlocks = slot, blocks
			x.refile(slot)
			partial++
		} else {
			x.detach(slot)
			taken = append(taken, slot)
		}
		dst = append(dst, v)
		freed += len(v.Blocks)
	}
	x.spare = taken[:0]
	if err := x.freed.distinct(dst[first:]); err != nil {
		for _, slot := range taken {
			x.available += len(x.nodes[slot].c.Blocks)
			x.insert(slot)
		}
		if cutSlot >= 0 {
			n := &x.nodes[cutSlot]
			x.available += len(cutBlocks) - len(n.c.Blocks)
			n.c.Blocks = cutBlocks
			x.refile(cutSlot)
		}
		clear(dst[first:])
		return dst[:first], 0, 0, err
	}
	for _, slot := range taken {
		x.release(slot)
	}
	return dst, freed, partial, nil
}

// cut takes up to need blocks from the evictable candidate in slot, by the
// rules of the selection: all of them, or a tail if it allows partial
// eviction and holds more. One trimmed keeps its head and stays, and the
// caller re-files it; one that lost all its blocks the caller drops.
func (x *Index) cut(slot int32, need int) (v Victim, trimmed bool) {
	n := &x.nodes[slot]
	v.ID = n.c.ID
	v.Blocks, trimmed = take(&n.c, need)
	x.available -= len(v.Blocks)
	if trimmed {
		keep := len(n.c.Blocks) - len(v.Blocks)
		n.c.Blocks = n.c.Blocks[:keep:keep]
	}
	return v, trimmed
}

// drop removes a victim that lost all its blocks from the index.
func (x *Index) drop(slot int32) {
	x.detach(slot)
	x.release(slot)
}

// Metrics returns a snapshot of the index's counters, the same fields as
// [Policy.Metrics]. O(1) but for sorting the latency window.
func (x *Index) Metrics() Metrics {
	m, window := x.stats.snapshot()
	m.P99EvictionTime = p99(window)
	return m
}

// ordered reports whether the candidate in slot is evictable, so in the run
// or the heap.
func (x *Index) ordered(slot int32) bool {
	at := x.nodes[slot].at
	return at == inRun || at == inHeap || at == inHistory
}

// first returns the slot of the next victim: the smaller of the run's
// front and the heap's root. There must be one. O(1).
func (x *Index) first() int32 {
	h := x.run.Front
	if x.heap.Len() == 0 {
		return h
	}
	root := x.heap.Min()
	if h == dlist.None {
		return root.Slot
	}
	if n := &x.nodes[h]; before(n.key, n.c.ID, root.Key, root.ID) {
		return h
	}
	return root.Slot
}

// afterRun reports whether (k, id) sorts after the run's back, so that it
// may be appended; true for an empty run. O(1).
func (x *Index) afterRun(k rank.Key, id uint64) bool {
	if x.run.Back == dlist.None {
		return true
	}
	t := &x.nodes[x.run.Back]
	return before(t.key, t.c.ID, k, id)
}

// insert files the evictable candidate in slot, which is in neither the run
// nor the heap: at the run's back if its key sorts after the back's, O(1),
// else in the heap, O(log n).
func (x *Index) insert(slot int32) {
	if x.hist != nil {
		x.markHeld(slot)
		return
	}
	n := &x.nodes[slot]
	k := x.params.keyOf(&n.c)
	if x.afterRun(k, n.c.ID) {
		x.appendRun(slot, k)
		return
	}
	x.push(slot, k)
}

// refile restores the order after the evictable candidate in slot changed
// (its key may have). A candidate whose new key sorts after the run's back
// moves there, in O(1) plus, from the heap, O(log n); one still between its
// run neighbours stays; the rest go to the heap, O(log n).
func (x *Index) refile(slot int32) {
	if x.hist != nil {
		if x.groups != nil {
			x.regroup(slot) // Auto's groups follow LastAccess and partial blocks
		}
		return // the history's lists do not follow the candidate's fields
	}
	n := &x.nodes[slot]
	k, id := x.params.keyOf(&n.c), n.c.ID
	if n.at == inHeap {
		if x.afterRun(k, id) {
			x.heap.Remove(slot)
			x.appendRun(slot, k)
			return
		}
		x.heap.Fix(slot, k, rank.SaturatedBlocks(len(n.c.Blocks)))
		return
	}
	if slot != x.run.Back && x.afterRun(k, id) {
		x.unlink(slot)
		x.appendRun(slot, k)
		return
	}
	link := x.links.Links[slot]
	if link.Prev != dlist.None {
		if p := &x.nodes[link.Prev]; !before(p.key, p.c.ID, k, id) {
			x.unlink(slot)
			x.push(slot, k)
			return
		}
	}
	if link.Next != dlist.None {
		if q := &x.nodes[link.Next]; !before(k, id, q.key, q.c.ID) {
			x.unlink(slot)
			x.push(slot, k)
			return
		}
	}
	n.key = k
}

// detach takes the evictable candidate in slot out of the run or the heap.
func (x *Index) detach(slot int32) {
	if x.hist != nil {
		x.unmarkHeld(slot)
		return
	}
	if x.nodes[slot].at == inHeap {
		x.heap.Remove(slot)
		x.nodes[slot].at = held
		return
	}
	x.unlink(slot)
}

// appendRun adds the candidate in slot, of key k, at the run's back. O(1).
func (x *Index) appendRun(slot int32, k rank.Key) {
	n := &x.nodes[slot]
	n.key, n.at = k, inRun
	x.links.PushBack(&x.run, slot)
}

// unlink takes the candidate in slot out of the run. O(1).
func (x *Index) unlink(slot int32) {
	x.links.Remove(&x.run, slot)
	x.nodes[slot].at = held
}

// push adds the candidate in slot, of key k, to the heap. O(log n).
func (x *Index) push(slot int32, k rank.Key) {
	c := &x.nodes[slot].c
	x.heap.Push(newEntry(c, k, slot))
	x.nodes[slot].at = inHeap
}
