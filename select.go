package kvevict

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/sagellm/kvevict/internal/idmap"
	"github.com/sagellm/kvevict/internal/rank"
)

// entry is one evictable candidate as the selection, the sampler and the
// Index rank it: Slot is its index in the caller's candidate slice, or the
// Index's slot.
type entry = rank.Entry

func newEntry(c *Candidate, k rank.Key, slot int32) entry {
	return entry{Key: k, ID: c.ID, Slot: slot, Blocks: rank.SaturatedBlocks(len(c.Blocks))}
}

// before is the selection's total order, (key, ID), as every structure
// that ranks candidates orders them.
func before(a rank.Key, aID uint64, b rank.Key, bID uint64) bool { return rank.Before(a, aID, b, bID) }

// less orders entries by key, then ID.
func less(a, b *entry) bool { return rank.Less(a, b) }

// compareEntries is less as a three-way comparison, for slices.SortFunc.
func compareEntries(a, b entry) int {
	if less(&a, &b) {
		return -1
	}
	if less(&b, &a) {
		return 1
	}
	return 0
}

// sortEntries sorts h by (key, ID): by insertion when h is as short as a
// selection's victims usually are, where it beats a general sort.
func sortEntries(h []entry) {
	if len(h) > 24 {
		slices.SortFunc(h, compareEntries)
		return
	}
	for i := 1; i < len(h); i++ {
		e := h[i]
		j := i
		for ; j > 0 && less(&e, &h[j-1]); j-- {
			h[j] = h[j-1]
		}
		h[j] = e
	}
}

// selector is the one selection engine. It keeps its scratch space between
// calls so that a steady-state selection allocates only the Result's
// victims. A selector is not safe for concurrent use; the policy's lock
// guards it.
type selector struct {
	ids     idmap.Map[struct{}] // the duplicate-ID check, when IDs come out of order
	freed   blockSet            // checks that no block is freed twice
	pivots  uint64              // state of the pivot choice of cover
	partial int                 // victims of the last selection that kept a head of their blocks

	// The candidates that may still be victims, kept by offer. A call's
	// loop keeps only what its common case reads in registers.
	buf         []entry // a max-heap in the heap phase, unordered after it
	sum         int     // blocks in buf
	required    int     // the call's need
	compactAt   int     // buffer phase: the length at which buf is compacted next
	appendBelow int     // buffer phase: offer appends in place while len(buf) is below it; 0 in the heap phase
	heapBudget  int     // sift levels the heap phase may still spend
}

// maxCandidates bounds a call's candidate count so indices fit an int32.
const maxCandidates = math.MaxInt32

// compactAtLeast is the fewest buffered entries at which the selection
// compacts its buffer: fewer would spend more on selecting than the bound it
// yields saves.
const compactAtLeast = 32

// compactGrowth is how many times what covered the need the buffer grows to
// before the next compaction: each compaction is linear in the buffer and
// keeps 1/compactGrowth of it, so a larger growth spends fewer passes per
// candidate that enters, for a buffer that many times the victims
// (BenchmarkSelectVictimsOrder).
const compactGrowth = 16

// heapBudgetShare sets the heap phase's budget, n/heapBudgetShare sift
// levels for n candidates: enough for a random order at a few victims, where
// the exact bound skips the most, and a small share of the pass when every
// candidate enters. Past it the buffer phase costs O(1) per candidate.
const heapBudgetShare = 8

// selectVictims validates candidates and returns the greedy selection: the
// shortest prefix of the evictable candidates in (key, ID) order whose blocks
// cover required, trimming the last victim to the blocks still needed when it
// allows partial eviction.
//
// It makes one pass over the candidates and buffers the evictable ones that
// may still be victims, under a bound: once they cover required, a later
// candidate whose key is not below the largest of those that cover it is
// skipped with one comparison, the common case.
//
// The buffer starts as a max-heap that keeps exactly the smallest keys that
// cover required, so the bound is as tight as can be: in a random order few
// candidates enter, k ln(n/k) of them. In an adversarial order (newest-first
// under LRU) every candidate enters, at O(log k) each, so the heap phase has
// a budget of sift levels linear in n. Past it the buffer stays unordered:
// whenever it has grown to compactGrowth times what covered required at the
// last compaction, cover cuts it to the smallest entries that cover required
// and the largest of those becomes the bound. Each compaction is linear in
// the buffer and keeps a fraction of it. So the pass is O(n) in any order,
// and only the k victims are sorted: O(n + k log k) in all.
func (s *selector) selectVictims(cands []Candidate, required int, kp *keyParams) (Result, error) {
	if len(cands) > maxCandidates {
		return Result{}, fmt.Errorf("%w: %d candidates, more than %d", ErrInvalidArgument, len(cands), maxCandidates)
	}
	if kp.usesNow {
		kp.now = maxLastAccess(cands)
	}
	if required == 0 {
		return Result{}, s.validate(cands, 0)
	}
	s.begin(required, len(cands))
	// Once the buffer covers required, bound is the largest of the entries
	// that do, and limit its key's Major: a candidate whose Major is above
	// limit is skipped with one comparison, the common case. Until then
	// limit is above every key and bound has no blocks. Nothing in the loop
	// takes the address of its own state, so that it stays in registers.
	limit := int64(math.MaxInt64)
	var bound entry
	var order idOrder
	for i := range cands {
		// idOrder.check, split: an evictable candidate's counts are checked
		// after its key, so that the key's loads do not live across the
		// switch (the register allocator would spill them on every
		// iteration).
		c := &cands[i]
		order = order.see(c.ID)
		if !c.evictable() {
			if !valid(c) {
				return Result{}, invalidField(c, i)
			}
			continue
		}
		// keyOf's dispatch, written out so that the simple keys and the
		// common cases of the others inline into the loop: a call per
		// candidate costs more than most keys (BenchmarkSelectVictims).
		// A rare case gives mayBeGeneral, and its key comes from keyOf's
		// general path past the bound check: a call there keeps its
		// register spills off the path of the candidates skipped, most of
		// them in most orders; a candidate that enters the buffer pays
		// them (BenchmarkSelectVictimsOrder, newest-first).
		// TestMatchesReference and FuzzSelectVictims check the victims
		// against a reference that ranks through keyOf.
		var key rank.Key
		switch kp.kind {
		case rank.KindLRU:
			key = rank.LRUKey(c.LastAccess)
		case rank.KindMRU:
			key = rank.MRUKey(c.LastAccess)
		case rank.KindFIFO:
			key = rank.FIFOKey(c.CreatedAt)
		case rank.KindFILO:
			key = rank.FILOKey(c.CreatedAt)
		case rank.KindLFU:
			key = orGeneral(rank.LFUKeyFast(c.AccessCount, c.LastAccess, &kp.p))
		case rank.KindSLRU:
			key = rank.SLRUKey(c.AccessCount, c.LastAccess, &kp.p)
		case rank.KindQoS:
			key = rank.QoSKey(int8(c.Priority), c.LastAccess)
		case rank.KindPredictive:
			key = orGeneral(rank.PredictiveKeyFast(c.LastAccess, c.EstimatedLifetime, c.SeqLen, c.MaxLen, &kp.p))
		default: // rank.KindCost
			key = orGeneral(rank.CostKeyFast(c.AccessCount, len(c.Blocks), c.LastAccess, &kp.p))
		}
		if !valid(c) {
			return Result{}, invalidField(c, i)
		}
		if skipped(key, c.ID, limit, bound) {
			continue
		}
		if key == mayBeGeneral() {
			// A key that is mayBeGeneral in its own right costs a call
			// here, not a wrong order.
			if key = kp.otherKey(c); skipped(key, c.ID, limit, bound) {
				continue
			}
		}
		if e := newEntry(c, key, int32(i)); !s.appendFast(e) && s.offer(e, &bound) {
			limit = bound.Key.Major
		}
	}
	// Until the buffer covers required nothing evictable is skipped or
	// dropped, so a buffer that does not cover it holds every evictable
	// candidate, and the error path counts their blocks.
	if err := s.checkCover(cands, order.unordered(cands), s.sum >= required, required); err != nil {
		return Result{}, err
	}
	victims := s.victims()
	res := Result{Victims: make([]Victim, len(victims))}
	for i := range victims {
		c := &cands[victims[i].Slot]
		blocks, partial := take(c, required-res.FreedBlocks)
		res.Victims[i] = Victim{ID: c.ID, Blocks: blocks}
		res.FreedBlocks += len(blocks)
		s.partial += b2i(partial)
	}
	if err := s.freed.distinct(res.Victims); err != nil {
		return Result{}, err
	}
	return res, nil
}

// begin starts a selection of required blocks among n candidates, to be
// offered one by one.
func (s *selector) begin(required, n int) {
	if cap(s.buf) > admitShrinkAbove && cap(s.buf) > 8*n {
		s.buf = nil // one huge call does not pin its buffer forever
	}
	s.buf, s.sum, s.required = s.buf[:0], 0, required
	s.compactAt, s.heapBudget, s.appendBelow = compactAtLeast, n/heapBudgetShare+compactAtLeast, 0
	s.partial = 0
}

// victims ends a selection whose offered entries cover the need: it returns
// those the greedy selection takes, smallest (key, ID) first. O(k log k)
// beyond the buffer's last compaction.
func (s *selector) victims() []entry {
	v := s.buf[:s.cover(s.buf, s.required, s.sum)]
	sortEntries(v)
	return v
}

// offer adds e, whose key is below the bound if there is one, to the
// entries that may be victims, and reports whether they cover the need,
// with the largest of those that do in *bound: the rare case of the
// selection's loop, apart so that the loop's common case keeps its few
// variables in registers.
func (s *selector) offer(e entry, bound *entry) (bounded bool) {
	if s.appendFast(e) {
		return bound.Blocks > 0
	}
	if s.heapBudget >= 0 {
		s.heapBudget -= bits.Len(uint(len(s.buf)))
		if s.sum >= s.required && s.sum-int(bound.Blocks)+int(e.Blocks) >= s.required {
			// e displaces the largest key: one sift, not a push and a pop.
			s.sum += int(e.Blocks) - int(bound.Blocks)
			s.buf[0] = e
			siftDown(s.buf, 0)
		} else {
			s.buf = push(s.buf, e)
			s.sum += int(e.Blocks)
		}
		for s.sum-int(s.buf[0].Blocks) >= s.required {
			s.sum -= int(s.buf[0].Blocks)
			s.buf = pop(s.buf)
		}
		s.compactAt = max(compactAtLeast, compactGrowth*len(s.buf))
		if s.sum < s.required {
			return false
		}
		*bound = s.buf[0]
		return true
	}
	s.buf = append(s.buf, e)
	s.sum += int(e.Blocks)
	if s.sum < s.required || len(s.buf) < s.compactAt {
		// A bound once set stands (the entries up to it still cover the
		// need); a set bound has blocks.
		s.appendBelow = min(cap(s.buf), s.compactAt-1)
		return bound.Blocks > 0
	}
	s.buf = s.buf[:s.cover(s.buf, s.required, s.sum)]
	s.sum, *bound = 0, s.buf[0]
	for j := range s.buf {
		s.sum += int(s.buf[j].Blocks)
		if less(bound, &s.buf[j]) {
			*bound = s.buf[j]
		}
	}
	s.compactAt = max(compactAtLeast, compactGrowth*len(s.buf))
	s.appendBelow = min(cap(s.buf), s.compactAt-1)
	return true
}

// appendFast adds e to the unordered buffer of the buffer phase if it has
// room before its next compaction, and reports whether it did: offer's
// common case in an adversarial order, which offers every candidate, small
// enough to inline into a selection's loop.
func (s *selector) appendFast(e entry) bool {
	n := len(s.buf)
	if n >= s.appendBelow {
		return false
	}
	s.buf = s.buf[:n+1]
	s.buf[n] = e
	s.sum += int(e.Blocks)
	return true
}

// push adds e to the max-heap h. O(log len(h)).
func push(h []entry, e entry) []entry {
	h = append(h, e)
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
	return h
}

// pop removes the largest entry of the max-heap h. O(log len(h)).
func pop(h []entry) []entry {
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	siftDown(h, 0)
	return h
}

// siftDown restores the max-heap order below j, moving entries up into a
// hole rather than swapping them.
func siftDown(h []entry, j int) {
	if j >= len(h) {
		return
	}
	e := h[j]
	for {
		child := 2*j + 1
		if child >= len(h) {
			break
		}
		if r := child + 1; r < len(h) && less(&h[child], &h[r]) {
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

// cover reorders h so that h[:m] holds the m smallest entries by (key, ID)
// whose blocks add up to at least need while h[:m-1]'s do not, and returns
// m: the greedy selection's victims, in no particular order. h's blocks
// add up to total, at least need > 0. It is a quickselect weighted by
// blocks: each round partitions around a pivot and keeps the side that
// holds the cut, so it costs O(len(h)) expected and never sorts what it
// discards. On a long range the pivot is drawn from a sample, just past the
// cut on the side that leaves less (Floyd and Rivest's idea), so that a
// compaction of the buffer, which keeps a small share of it, costs little
// more than one pass.
func (s *selector) cover(h []entry, need, total int) int {
	lo, hi := 0, len(h)
	for hi-lo > 16 {
		var p int
		if hi-lo >= samplePivotAbove {
			p = lo + s.samplePivot(h[lo:hi], need, total)
		} else {
			p = lo + int(s.random()%uint64(hi-lo))
		}
		h[p], h[hi-1] = h[hi-1], h[p]
		pivot := h[hi-1]
		j, below := lo, 0
		for i := lo; i < hi-1; i++ {
			if less(&h[i], &pivot) {
				below += int(h[i].Blocks)
				h[i], h[j] = h[j], h[i]
				j++
			}
		}
		h[j], h[hi-1] = h[hi-1], h[j]
		switch {
		case below >= need:
			hi, total = j, below
		case below+int(pivot.Blocks) >= need:
			return j + 1
		default:
			need -= below + int(pivot.Blocks)
			total -= below + int(pivot.Blocks)
			lo = j + 1
		}
	}
	sortEntries(h[lo:hi])
	for i := lo; i < hi; i++ {
		if need -= int(h[i].Blocks); need <= 0 {
			return i + 1
		}
	}
	panic("kvevict: cover was given entries that do not cover the need")
}

// samplePivotAbove is the shortest range whose pivot cover draws from a
// sample: below it, sorting the sample costs more than a random pivot's
// extra rounds.
const samplePivotAbove = 1024

// pivotSample is how many entries samplePivot draws.
const pivotSample = 32

// samplePivot returns the index in h, whose blocks add up to total, of a
// pivot for a round of cover looking for the cut at need blocks: from a
// sample of h in (key, ID) order, the entry at the cut's estimated share of
// the blocks, moved a margin toward the larger side so that the round most
// likely keeps the smaller. The margin is two standard deviations of the
// estimate. A wrong guess costs a round, never a wrong cut.
func (s *selector) samplePivot(h []entry, need, total int) int {
	var idx [pivotSample]int32 // sorted by insertion as drawn
	sampled := 0
	for k := range idx {
		i := int32(s.random() % uint64(len(h)))
		sampled += int(h[i].Blocks)
		j := k
		for ; j > 0 && less(&h[i], &h[idx[j-1]]); j-- {
			idx[j] = idx[j-1]
		}
		idx[j] = i
	}
	q := float64(need) / float64(total)
	margin := 2*math.Sqrt(q*(1-q)/pivotSample) + 1.0/pivotSample
	if q < 0.5 {
		q += margin // keep the left side, about q of the range
	} else {
		q -= margin // take the left side as victims, keep the right
	}
	target := q * float64(sampled)
	cum := 0
	for _, i := range idx {
		if cum += int(h[i].Blocks); float64(cum) >= target {
			return int(i)
		}
	}
	return int(idx[pivotSample-1])
}

// random is the selection's pivot sequence (xorshift): pivots no candidate
// order can predict, the same on every run.
func (s *selector) random() uint64 {
	if s.pivots == 0 {
		s.pivots = pivotSeed
	}
	s.pivots ^= s.pivots << 13
	s.pivots ^= s.pivots >> 7
	s.pivots ^= s.pivots << 17
	return s.pivots
}

// pivotSeed starts cover's pivot sequence: any nonzero value.
const pivotSeed = 0x9E3779B97F4A7C15

// take returns the blocks a selection frees from victim c while need blocks
// are still needed: all of them, or, when c allows partial eviction and
// holds more than need, its last need blocks (the tail, so the head a
// returning request matches stays). partial reports the second case. Every
// selection (exact, sampled, adaptive, the Index's) frees through it.
func take(c *Candidate, need int) (blocks []int, partial bool) {
	if c.AllowPartial && len(c.Blocks) > need {
		return c.Blocks[len(c.Blocks)-need:], true
	}
	return c.Blocks, false
}

// checkCover ends a selection's pass over cands: it reports a duplicate ID
// when the IDs did not come in increasing order (unordered), or evictable
// blocks that do not cover required (when covered is false).
func (s *selector) checkCover(cands []Candidate, unordered, covered bool, required int) error {
	if unordered {
		s.ids.Reset(len(cands))
		for i := range cands {
			if s.ids.Add(cands[i].ID) {
				return duplicateID(cands, i)
			}
		}
	}
	if !covered {
		available := 0
		for i := range cands {
			if cands[i].evictable() {
				available += len(cands[i].Blocks)
			}
		}
		if available < required {
			return &InsufficientBlocksError{Required: required, Available: available}
		}
	}
	return nil
}

// validate is a selection's validation pass alone, for the calls whose
// victims come from elsewhere (an adaptive strategy's lists) or that need
// none: it reports an invalid candidate, a duplicate ID, or evictable blocks
// that cannot cover required.
func (s *selector) validate(cands []Candidate, required int) error {
	var order idOrder
	available := 0
	for i := range cands {
		c := &cands[i]
		var ok bool
		if order, ok = order.check(c); !ok {
			return invalidField(c, i)
		}
		if c.evictable() {
			available += len(c.Blocks)
		}
	}
	return s.checkCover(cands, order.unordered(cands), available >= required, required)
}

// skipped reports whether the selection's loop passes over a candidate with
// key k and ID id, under limit and bound: see selectVictims.
func skipped(k rank.Key, id uint64, limit int64, bound entry) bool {
	return k.Major > limit || bound.Blocks > 0 && !lessKey(k, id, &bound)
}

// orGeneral is k if ok and mayBeGeneral if not.
func orGeneral(k rank.Key, ok bool) rank.Key {
	if !ok {
		return mayBeGeneral()
	}
	return k
}

// mayBeGeneral is the key that the inlined common cases of keyOf (the
// ...KeyFast functions) stand in for a candidate they do not cover with. It
// is the least key, at most the candidate's real one, so a bound that skips
// it skips the real key too, and one that does not leaves the candidate to
// keyOf's general path.
func mayBeGeneral() rank.Key { return rank.Key{Major: math.MinInt64, Minor: math.MinInt64} }

// lessKey reports whether a candidate with key k and ID id goes before e.
func lessKey(k rank.Key, id uint64, e *entry) bool { return before(k, id, e.Key, e.ID) }

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

// invalidField describes candidate c, at index i of its call, which is not
// valid.
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

// idOrder is the validation pass of every selection over a slice: check
// looks at each candidate in turn, and unordered ends the pass. While each
// ID is above the one before, none can repeat, so a caller that lists its
// sequences in ID order (an allocator walking them in admission order)
// needs no duplicate table.
type idOrder struct {
	prev  uint64 // the last ID seen; 0 before the first
	drops int    // IDs not above their predecessor, counting a first ID of 0
}

// check records the ID of candidate c and reports whether its fields are
// valid; the caller describes an invalid one with invalidField. It takes
// and returns the order by value, so that a loop keeps it in registers, and
// counts rather than branches: shuffled IDs would mispredict every other
// time.
func (o idOrder) check(c *Candidate) (idOrder, bool) {
	return o.see(c.ID), valid(c)
}

// see records id, the next candidate's ID.
func (o idOrder) see(id uint64) idOrder {
	o.drops += b2i(id <= o.prev)
	o.prev = id
	return o
}

// unordered ends the pass over cands: it reports whether some ID was not
// above the one before it. A first ID of 0 is not above the 0 that o starts
// from, and is the one drop that does not count.
func (o idOrder) unordered(cands []Candidate) bool {
	return o.drops > b2i(len(cands) > 0 && cands[0].ID == 0)
}
