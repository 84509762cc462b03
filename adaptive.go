package kvevict

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// The adaptive strategies. They rank by what the policy remembers between
// calls (which sequences were used once or again, which were evicted
// lately) rather than by a key over a candidate's fields, so [NewRanker]
// refuses them. Each keeps the cache of [WithCapacity] sequences that its
// paper describes: UpdateAccess is the paper's access, and a selection is
// the paper's eviction, repeated until the victims' blocks cover the need,
// taking only this call's evictable candidates.
//
// Call UpdateAccess(id) when sequence id is requested, before the
// SelectVictims that makes room for it if it is new: the eviction may depend
// on the request (ARC adapts to a request for a sequence it evicted lately).
// A candidate the history does not hold, because the allocator never
// reported its first access, enters as new, oldest LastAccess first.
//
// A selection costs O(n + c) for n candidates and capacity c in the worst
// case, O(n + k) when the victims sit where the algorithm looks first, plus
// O(a log a) to admit a candidates the history does not hold; UpdateAccess
// is O(1) (amortized: the history's index grows while it fills).
const (
	ARC    Strategy = "arc"    // Adaptive Replacement Cache (Megiddo and Modha, FAST'03)
	S3FIFO Strategy = "s3fifo" // small, main and ghost FIFOs (Yang et al., SOSP'23)
	SIEVE  Strategy = "sieve"  // one FIFO with a visited bit and a hand (Zhang et al., NSDI'24)
)

// DefaultCapacity is how many sequences an adaptive strategy's cache holds
// unless [WithCapacity] says otherwise.
const DefaultCapacity = 4096

// maxCapacity bounds [WithCapacity] so node indices fit an int32.
const maxCapacity = 1 << 28

// WithCapacity sets the cache size c of the adaptive strategies ([ARC],
// [S3FIFO], [SIEVE]) in sequences, not blocks: set it to about how many
// sequences the KV pool holds when it is full. The history remembers at
// most c resident sequences and, for ARC and S3-FIFO, at most c evicted ones
// (fewer if [WithHistoryCap] is smaller), so its memory is O(c) however many
// sequences pass through: about 80 bytes per remembered sequence. When the
// pool holds more sequences than c, the history forgets the least valuable
// ones early and they enter again as new when they next appear as
// candidates: every selection then re-admits the n-c overflow, in
// O(n log n), and the algorithm degrades toward LRU over LastAccess. Default
// [DefaultCapacity]. Must be in [1, 2^28].
func WithCapacity(n int) Option {
	return func(c *config) {
		if n < 1 || n > maxCapacity {
			c.reject("capacity must be in [1, %d], got %d", maxCapacity, n)
			return
		}
		c.capacity = n
	}
}

// history is the state of an adaptive strategy. The policy's mutex guards
// it. The selection engine (selector.selectAdaptive) validates candidates,
// admits and marks them in the table, then asks victim for one victim at a
// time and tells the history whether it was evicted wholly (evict) or kept
// a head of its blocks (it stays resident); finish ends the selection.
type history interface {
	// nodes returns the table of ids the history tracks.
	nodes() *table
	// access records a request for id: the paper's access. O(1).
	access(id uint64)
	// pendingID returns the id of a request not yet placed in the cache: a
	// miss waiting for the eviction that makes room for it.
	pendingID() (uint64, bool)
	// commit places the pending request in the cache, evicting from the
	// history (not from the pool) if the cache is full.
	commit()
	// admit adds id, which the history does not hold as resident, as new.
	// The cache may exceed its capacity until finish.
	admit(id uint64)
	// victim returns the node of the next victim among the marked nodes, by
	// the strategy's rule, or -1 if no node is marked.
	victim() int32
	// evict removes victim node n from the cache: to a ghost list or away.
	evict(n int32)
	// finish commits any pending request and restores the capacity bounds.
	finish()
	// check reports a broken invariant, for tests.
	check() error
}

// selectAdaptive is the selection of an adaptive strategy: the same
// validation, atomicity and Result as selectVictims, with the victims chosen
// by h. A failed or empty selection leaves h unchanged.
func (s *selector) selectAdaptive(cands []Candidate, required int, h history) (Result, error) {
	if len(cands) > maxCandidates {
		return Result{}, fmt.Errorf("%w: %d candidates, more than %d", ErrInvalidArgument, len(cands), maxCandidates)
	}
	s.partial = 0
	available := 0
	var order idOrder
	for i := range cands {
		c := &cands[i]
		if !valid(c) {
			return Result{}, invalidField(c, i)
		}
		order.see(i, c.ID)
		if c.evictable() {
			available += len(c.Blocks)
		}
	}
	if err := s.checkCover(cands, &order, available, required); err != nil || required == 0 {
		return Result{}, err
	}

	// A pending request that already holds blocks is resident: place it
	// before the others are admitted, so that nothing admitted is pushed out.
	if id, ok := h.pendingID(); ok {
		for i := range cands {
			if cands[i].ID == id {
				h.commit()
				break
			}
		}
	}
	t := h.nodes()
	t.nextEpoch()
	admit := t.admit[:0]
	for i := range cands {
		c := &cands[i]
		if len(c.Blocks) == 0 {
			continue
		}
		n := t.lookup(c.ID)
		if n < 0 || !t.resident(n) {
			admit = append(admit, int32(i))
			continue
		}
		if c.evictable() {
			t.mark(n, int32(i))
		}
	}
	slices.SortFunc(admit, func(a, b int32) int {
		ca, cb := &cands[a], &cands[b]
		if c := cmp.Compare(ca.LastAccess, cb.LastAccess); c != 0 {
			return c
		}
		return cmp.Compare(ca.ID, cb.ID)
	})
	for _, i := range admit {
		c := &cands[i]
		h.admit(c.ID)
		if c.evictable() {
			t.mark(t.lookup(c.ID), i)
		}
	}
	t.admit = admit[:0]
	if cap(t.admit) > admitShrinkAbove && cap(t.admit) > 8*len(cands) {
		t.admit = nil
	}

	if r, ok := h.(candidateScorer); ok {
		r.rank(cands, required)
	}
	victims := t.victims[:0]
	freed := 0
	for freed < required {
		n := h.victim()
		if n < 0 {
			panic("kvevict: adaptive selection lost an evictable candidate")
		}
		c := &cands[t.slab[n].cand]
		t.unmark(n)
		blocks := c.Blocks
		if need := required - freed; c.AllowPartial && len(blocks) > need {
			blocks = blocks[len(blocks)-need:]
			s.partial++
		} else {
			h.evict(n)
		}
		victims = append(victims, Victim{ID: c.ID, Blocks: blocks})
		freed += len(blocks)
	}
	h.finish()
	res := Result{Victims: slices.Clone(victims), FreedBlocks: freed}
	clear(victims) // drop the references to the caller's blocks
	t.victims = victims[:0]
	if cap(t.victims) > admitShrinkAbove && cap(t.victims) > 8*len(cands) {
		t.victims = nil
	}
	return res, nil
}

// node is one id an adaptive strategy tracks, resident or ghost, linked into
// one of the strategy's lists.
type node struct {
	id           uint64
	older, newer int32 // neighbours toward the list's tail and head; -1 at the ends
	cand         int32 // index of this call's candidate, when mark is the call's epoch
	mark         uint32
	list         uint8
	bits         uint8 // S3-FIFO's frequency, SIEVE's visited bit
}

// nodeList is a doubly linked list of nodes: head is the newest (most
// recently used or inserted), tail the oldest.
type nodeList struct {
	head, tail int32
	len        int
	marked     int // nodes marked in the current selection
}

// maxLists is the most lists a strategy uses (ARC's t1, t2, b1, b2).
const maxLists = 4

// table holds the nodes of an adaptive strategy in a slab, indexed by id,
// with the strategy's lists threaded through them. Freed nodes are reused,
// so the slab never holds more nodes than were alive at once.
type table struct {
	slab          []node
	free          int32 // first free node, chained by newer; -1 if none
	index         idMap[int32]
	lists         [maxLists]nodeList
	residentLists uint8 // bit l set: list l holds resident ids
	epoch         uint32
	admit         []int32  // scratch: indices of the candidates a selection admits
	victims       []Victim // scratch: a selection's victims, copied into its Result
}

// admitShrinkAbove is the scratch size above which a selection much smaller
// than the scratch frees it, so that one huge call does not pin its memory
// forever.
const admitShrinkAbove = 1 << 16

func newTable(residentLists ...uint8) table {
	t := table{free: -1}
	for i := range t.lists {
		t.lists[i] = nodeList{head: -1, tail: -1}
	}
	for _, l := range residentLists {
		t.residentLists |= 1 << l
	}
	return t
}

// lookup returns id's node, or -1. O(1).
func (t *table) lookup(id uint64) int32 {
	if n, ok := t.index.get(id); ok {
		return n
	}
	return -1
}

// resident reports whether node n is in the cache rather than a ghost.
func (t *table) resident(n int32) bool {
	return t.residentLists&(1<<t.slab[n].list) != 0
}

// add makes a node for id at the head of list l and returns it. O(1).
func (t *table) add(id uint64, l uint8) int32 {
	n := t.free
	if n >= 0 {
		t.free = t.slab[n].newer
	} else {
		n = int32(len(t.slab))
		t.slab = append(t.slab, node{})
	}
	t.slab[n] = node{id: id}
	t.index.put(id, n)
	t.pushHead(l, n)
	return n
}

// drop unlinks node n and forgets its id. O(1).
func (t *table) drop(n int32) {
	t.unlink(n)
	t.index.del(t.slab[n].id)
	t.slab[n] = node{newer: t.free}
	t.free = n
}

// pushHead links unlinked node n at the head of list l.
func (t *table) pushHead(l uint8, n int32) {
	ls := &t.lists[l]
	x := &t.slab[n]
	x.list, x.older, x.newer = l, ls.head, -1
	if ls.head >= 0 {
		t.slab[ls.head].newer = n
	} else {
		ls.tail = n
	}
	ls.head = n
	ls.len++
	if t.marked(n) {
		ls.marked++
	}
}

// unlink removes node n from its list.
func (t *table) unlink(n int32) {
	x := &t.slab[n]
	ls := &t.lists[x.list]
	if x.older >= 0 {
		t.slab[x.older].newer = x.newer
	} else {
		ls.tail = x.newer
	}
	if x.newer >= 0 {
		t.slab[x.newer].older = x.older
	} else {
		ls.head = x.older
	}
	x.older, x.newer = -1, -1
	ls.len--
	if t.marked(n) {
		ls.marked--
	}
}

// moveHead moves node n to the head of list l. O(1).
func (t *table) moveHead(l uint8, n int32) {
	t.unlink(n)
	t.pushHead(l, n)
}

// size returns the length of list l.
func (t *table) size(l uint8) int { return t.lists[l].len }

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
	for n := from; n >= 0; n = t.slab[n].newer {
		if t.marked(n) {
			return n
		}
	}
	return -1
}

// checkTable verifies the links, lengths, marks and index of t, for tests.
func (t *table) checkTable() error {
	seen := 0
	for l := range t.lists {
		ls := &t.lists[l]
		count, marked := 0, 0
		prev := int32(-1)
		for n := ls.tail; n >= 0; n = t.slab[n].newer {
			x := &t.slab[n]
			if x.list != uint8(l) {
				return fmt.Errorf("node %d (id %d) in list %d says list %d", n, x.id, l, x.list)
			}
			if x.older != prev {
				return fmt.Errorf("list %d: node %d's older link is %d, want %d", l, n, x.older, prev)
			}
			if got, _ := t.index.get(x.id); got != n {
				return fmt.Errorf("list %d: id %d indexed at %d, want %d", l, x.id, got, n)
			}
			if t.marked(n) {
				marked++
			}
			prev = n
			count++
			if count > len(t.slab) {
				return fmt.Errorf("list %d has a cycle", l)
			}
		}
		if prev != ls.head {
			return fmt.Errorf("list %d: head %d, walk ended at %d", l, ls.head, prev)
		}
		if count != ls.len {
			return fmt.Errorf("list %d: len %d, counted %d", l, ls.len, count)
		}
		if t.epoch != 0 && marked != ls.marked {
			return fmt.Errorf("list %d: marked %d, counted %d", l, ls.marked, marked)
		}
		seen += count
	}
	if seen != t.index.len() {
		return fmt.Errorf("%d ids indexed, %d in lists", t.index.len(), seen)
	}
	if err := t.index.check(); err != nil {
		return err
	}
	if len(t.slab) > math.MaxInt32 {
		return fmt.Errorf("slab of %d nodes", len(t.slab))
	}
	return nil
}
