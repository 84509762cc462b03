package kvevict

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// entry is one evictable candidate in the selection heap.
type entry struct {
	Key
	id     uint64
	idx    int32 // index in the caller's candidate slice
	blocks int32 // len(Blocks)
}

// before orders (key, ID) pairs: by key, then ID, the selection's total
// order. The heaps, the sampler and the Index all rank through it.
func before(a Key, aID uint64, b Key, bID uint64) bool {
	if a.Major != b.Major {
		return a.Major < b.Major
	}
	if a.Minor != b.Minor {
		return a.Minor < b.Minor
	}
	return aID < bID
}

// less orders entries by key, then ID.
func less(a, b *entry) bool { return before(a.Key, a.id, b.Key, b.id) }

// selector is the one selection engine. It keeps its scratch space between
// calls so that a steady-state selection allocates only the Result's
// victims. A selector is not safe for concurrent use; the policy's lock
// guards it.
type selector struct {
	heap    []entry // max-heap: heap[0] is the largest key taken so far
	ids     idSet
	partial int // victims of the last selection that kept a head of their blocks
}

// maxCandidates bounds a call's candidate count so indices fit an int32.
const maxCandidates = math.MaxInt32

// selectVictims validates candidates and returns the greedy selection: the
// shortest prefix of the evictable candidates in (key, ID) order whose blocks
// cover required, trimming the last victim to the blocks still needed when it
// allows partial eviction.
//
// It makes one pass over the candidates and keeps a max-heap of the smallest
// keys seen whose blocks cover required: a new candidate enters only if its
// key is below the heap's largest, which then leaves if the rest still cover
// required. That costs O(n + k log n) for k victims (O(n) when the order is
// adversarial only in that every candidate enters, O(n log k)), and sorts
// the k victims at the end, never the n candidates.
func (s *selector) selectVictims(cands []Candidate, required int, kp *keyParams) (Result, error) {
	if len(cands) > maxCandidates {
		return Result{}, fmt.Errorf("%w: %d candidates, more than %d", ErrInvalidArgument, len(cands), maxCandidates)
	}
	if kp.usesNow {
		kp.now = maxLastAccess(cands)
	}
	s.heap = s.heap[:0]
	s.partial = 0
	sum, available := 0, 0
	var order idOrder
	var bound entry // the heap's top once the heap covers required
	for i := range cands {
		c := &cands[i]
		if !valid(c) {
			return Result{}, invalidField(c, i)
		}
		order.see(i, c.ID)
		if !c.evictable() {
			continue
		}
		available += len(c.Blocks)
		if required == 0 {
			continue
		}
		// keyOf's dispatch, written out here so that the keys, or their
		// common cases, inline into the loop: a call per candidate, and the
		// register spills around it, cost more than most keys.
		var key Key
		switch kp.kind {
		case kindLRU:
			key = lruKey(c, kp)
		case kindMRU:
			key = mruKey(c, kp)
		case kindFIFO:
			key = fifoKey(c, kp)
		case kindFILO:
			key = filoKey(c, kp)
		case kindLFU:
			key = lfuKey(c, kp)
		case kindSLRU:
			key = slruKey(c, kp)
		case kindQoS:
			key = qosKey(c, kp)
		case kindPredictive:
			var ok bool
			if key, ok = predictiveKeyFast(c, kp); !ok {
				key = predictiveKeyGeneral(c, kp)
			}
		default: // kindCost
			var ok bool
			if key, ok = costKeyFast(c, kp); !ok {
				key = costKeyGeneral(c, kp)
			}
		}
		if sum >= required && !lessKey(key, c.ID, &bound) {
			continue // the common case once the heap covers required
		}
		e := entry{Key: key, id: c.ID, idx: int32(i), blocks: int32(min(len(c.Blocks), math.MaxInt32))}
		switch {
		case sum < required:
			s.push(e)
			sum += int(e.blocks)
		case sum-int(bound.blocks)+int(e.blocks) >= required:
			// e displaces the largest key: one sift instead of a push and a pop.
			sum += int(e.blocks) - int(bound.blocks)
			s.heap[0] = e
			siftDown(s.heap, 0)
		default:
			s.push(e)
			sum += int(e.blocks)
		}
		for sum-int(s.heap[0].blocks) >= required {
			sum -= int(s.pop().blocks)
		}
		bound = s.heap[0]
	}
	if err := s.checkCover(cands, &order, available, required); err != nil || required == 0 {
		return Result{}, err
	}
	s.sortAscending()
	victims := make([]Victim, len(s.heap))
	freed := 0
	for i := range s.heap {
		c := &cands[s.heap[i].idx]
		blocks := c.Blocks
		if need := required - freed; c.AllowPartial && len(blocks) > need {
			blocks = blocks[len(blocks)-need:]
			s.partial++
		}
		victims[i] = Victim{ID: c.ID, Blocks: blocks}
		freed += len(blocks)
	}
	return Result{Victims: victims, FreedBlocks: freed}, nil
}

// checkCover ends a selection's pass over cands, whose IDs came in order
// and whose evictable blocks add up to available: it reports a duplicate
// ID, or evictable blocks that cannot cover required.
func (s *selector) checkCover(cands []Candidate, order *idOrder, available, required int) error {
	if err := s.ids.checkUnique(cands, order); err != nil {
		return err
	}
	if available < required {
		return &InsufficientBlocksError{Required: required, Available: available}
	}
	return nil
}

// lessKey reports whether a candidate with key k and ID id goes before e.
func lessKey(k Key, id uint64, e *entry) bool { return before(k, id, e.Key, e.id) }

// b2i is 1 for true and 0 for false, without a branch.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// valid reports whether none of the counts a strategy reads is negative:
// one sign test of their bitwise or, since the selection runs it n times.
func valid(c *Candidate) bool {
	return c.RefCount|c.AccessCount|c.SeqLen|c.MaxLen|int(c.EstimatedLifetime) >= 0
}

func invalidField(c *Candidate, i int) error {
	field, value := negativeField(c)
	return fmt.Errorf("%w: candidate %d (ID %d) has negative %s %v", ErrInvalidCandidate, i, c.ID, field, value)
}

// negativeField names the first negative field of a candidate that is not
// valid, and its value.
func negativeField(c *Candidate) (field string, value any) {
	switch {
	case c.RefCount < 0:
		field, value = "RefCount", c.RefCount
	case c.AccessCount < 0:
		field, value = "AccessCount", c.AccessCount
	case c.EstimatedLifetime < 0:
		field, value = "EstimatedLifetime", c.EstimatedLifetime
	case c.SeqLen < 0:
		field, value = "SeqLen", c.SeqLen
	default:
		field, value = "MaxLen", c.MaxLen
	}
	return field, value
}

// duplicateID describes candidate i, whose ID an earlier candidate has.
func duplicateID(cands []Candidate, i int) error {
	id := cands[i].ID
	j := slices.IndexFunc(cands[:i], func(c Candidate) bool { return c.ID == id })
	return fmt.Errorf("%w: candidates %d and %d share ID %d", ErrInvalidCandidate, j, i, id)
}

func maxLastAccess(cands []Candidate) int64 {
	now := int64(math.MinInt64)
	for i := range cands {
		now = max(now, cands[i].LastAccess)
	}
	return now
}

// push adds e to the max-heap. O(log k).
func (s *selector) push(e entry) {
	s.heap = append(s.heap, e)
	h := s.heap
	j := len(h) - 1
	for j > 0 {
		parent := (j - 1) / 2
		if !less(&h[parent], &e) {
			break
		}
		h[j] = h[parent]
		j = parent
	}
	h[j] = e
}

// pop removes and returns the largest entry. O(log k).
func (s *selector) pop() entry {
	h := s.heap
	last := len(h) - 1
	top := h[0]
	h[0] = h[last]
	s.heap = h[:last]
	siftDown(s.heap, 0)
	return top
}

// siftDown restores the max-heap property below j, moving entries up into
// a hole rather than swapping them.
func siftDown(h []entry, j int) {
	n := len(h)
	e := h[j]
	for {
		child := 2*j + 1
		if child >= n {
			break
		}
		if r := child + 1; r < n && less(&h[child], &h[r]) {
			child = r
		}
		if !less(&e, &h[child]) {
			break
		}
		h[j] = h[child]
		j = child
	}
	h[j] = e
}

// sortAscending heap-sorts the max-heap in place into ascending order.
// O(k log k).
func (s *selector) sortAscending() {
	h := s.heap
	for end := len(h) - 1; end > 0; end-- {
		h[0], h[end] = h[end], h[0]
		siftDown(h[:end], 0)
	}
}

// idSet detects duplicate IDs in one call: an open-addressing hash table of
// IDs with linear probing, cleared (a memclr) at the start of each call. A
// slot holds id+1 so that zero means empty; ID math.MaxUint64, whose id+1 is
// zero, is tracked by a flag. Eight-byte slots keep the table of a
// thousand-candidate call inside the L1 cache.
type idSet struct {
	slots   []uint64
	shift   uint
	hasLast bool // ID math.MaxUint64 was inserted
}

// idSetShrinkAbove is the table size above which a much smaller call frees
// the table, so one huge call does not pin its memory forever.
const idSetShrinkAbove = 1 << 16

// reset empties the set and sizes it for n IDs at a load factor <= 1/2.
func (s *idSet) reset(n int) {
	size := 16
	for size < 2*n {
		size *= 2
	}
	if len(s.slots) < size || (len(s.slots) > idSetShrinkAbove && len(s.slots) > 8*size) {
		s.slots = make([]uint64, size)
	} else {
		s.slots = s.slots[:size]
		clear(s.slots)
	}
	s.shift = 64 - uint(bits.TrailingZeros(uint(size)))
	s.hasLast = false
}

// idOrder watches the IDs of one call go by. While each is above the one
// before, none can repeat, so a caller that lists its sequences in ID order
// (an allocator walking them in admission order) needs no duplicate table.
type idOrder struct {
	prev   uint64
	broken int // nonzero once an ID was not above its predecessor
}

// see records the ID of candidate i. Or-ed rather than branched on:
// shuffled IDs would mispredict every other time.
func (o *idOrder) see(i int, id uint64) {
	o.broken |= b2i(i > 0 && id <= o.prev)
	o.prev = id
}

// checkUnique returns an error naming the first candidate whose ID an
// earlier one has, or nil, given the order in which cands' IDs came. O(n)
// when the order was broken, else O(1).
func (s *idSet) checkUnique(cands []Candidate, order *idOrder) error {
	if order.broken == 0 {
		return nil
	}
	s.reset(len(cands))
	for i := range cands {
		if s.insert(cands[i].ID) {
			return duplicateID(cands, i)
		}
	}
	return nil
}

// insert adds id and reports whether it was already there.
func (s *idSet) insert(id uint64) (dup bool) {
	v := id + 1
	if v == 0 {
		dup, s.hasLast = s.hasLast, true
		return dup
	}
	mask := uint64(len(s.slots) - 1)
	for h := (id * 0x9E3779B97F4A7C15) >> s.shift; ; h = (h + 1) & mask {
		switch s.slots[h] {
		case 0:
			s.slots[h] = v
			return false
		case v:
			return true
		}
	}
}
