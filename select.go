package kvevict

import (
	"math"
	"math/bits"
	"slices"

	"github.com/sagellm/kvevict/internal/idmap"
	"github.com/sagellm/kvevict/internal/lists"
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
	ids    idmap.Map[struct{}] // the duplicate-ID check, when IDs come out of order
	pivots uint64              // state of the pivot choice of cut

	// The candidates that may still be victims, kept by offer.
	buf         []entry // a max-heap in the heap phase, unordered after it
	sum         int     // blocks in buf
	required    int     // the call's need
	compactAt   int     // buffer phase: the length at which buf is compacted next
	appendBelow int     // buffer phase: offer appends in place while len(buf) is below it; 0 in the heap phase
	heapBudget  int     // sift levels the heap phase may still spend

	// The scratches of a selection over a history's lists (adaptive.go).
	admitting   []int32  // indices of the candidates the selection admits
	listVictims []Victim // the victims, copied into the Result
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

// greedy validates candidates and returns the victims of the greedy
// selection, smallest (key, ID) first, as entries (Slot: the candidate's
// index), a view of the selector's buffer valid until its next selection:
// the shortest prefix of the evictable candidates in (key, ID) order whose
// blocks cover required > 0. A transaction then takes their blocks.
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
// last compaction, cut keeps of it the smallest entries that cover required
// and the largest of those becomes the bound. Each compaction is linear in
// the buffer and keeps a fraction of it. So the pass is O(n) in any order,
// and only the k victims are sorted: O(n + k log k) in all.
func (s *selector) greedy(cands []Candidate, required int, kp *keyParams) ([]entry, error) {
	kp.begin(cands)
	s.begin(required, len(cands))
	// Once the buffer covers required, bound is the largest of the entries
	// that do, and limit its key's Major: a candidate whose Major is above
	// limit is skipped with one comparison, the common case. Until then
	// limit is above every key and bound has no blocks. The loop's state is
	// local and passed by value, so that the common case touches no memory
	// but the candidate.
	limit := int64(math.MaxInt64)
	var bound entry
	var order idOrder
	hinted := false
	for i := 0; i < len(cands); i++ {
		c := &cands[i]
		var key rank.Key
		// The common case, a plain candidate skipped under the bound, in
		// a loop of its own: the state the rare cases below need is saved
		// when it ends, not at every candidate.
		plain := true // evictable, without hints: key is its key
		for {
			order = order.see(c.ID)
			if !c.evictable() || c.hinted() {
				plain = false
				break
			}
			// keyOf's dispatch, written out so that the simple keys and the
			// common cases of the others inline into the loop: a call per
			// candidate costs more than most keys (BenchmarkSelectVictims).
			// A rare case gives mayBeGeneral, and its key comes from keyOf's
			// general path past the bound check, so that the call is paid only
			// by candidates that may enter the buffer, not by those skipped,
			// most of them in most orders. keygen writes the switch from the
			// table that rank's Params.Key and keyOf are written from.
			// Begin of the switch generated by internal/rank/keygen: do not edit.
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
			case rank.KindAuto:
				key = mayBeGeneral() // its key reads its history: a call in any case
			default: // rank.KindCost
				key = orGeneral(rank.CostKeyFast(c.AccessCount, len(c.Blocks), c.LastAccess, &kp.p))
			}
			// End of the generated switch.
			if key.Major <= limit || !valid(c) {
				break
			}
			if i++; i == len(cands) {
				goto done
			}
			c = &cands[i]
		}
		if !plain {
			if c.evictable() {
				hinted = true // the pass goes on to validate every candidate
				continue
			}
			if !valid(c) {
				return nil, invalidField(c, i)
			}
			if kp.auto != nil {
				kp.auto.see(c) // Auto learns of every candidate that holds blocks
			}
			hinted = hinted || c.hinted() // for checkHints
			continue
		}
		if !valid(c) {
			return nil, invalidField(c, i)
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
done:
	if hinted {
		return nil, errHinted
	}
	// Until the buffer covers required nothing evictable is skipped or
	// dropped, so a buffer that does not cover it holds every evictable
	// candidate, and the error path counts their blocks.
	if err := s.checkCover(cands, order.unordered(cands), s.sum >= required, required); err != nil {
		return nil, err
	}
	return s.victims(), nil
}

// ranked is the source of a Policy's exact selection: the victims rank
// chose, smallest first. Auto's history learns of them once they commit.
type ranked struct {
	cands   []Candidate
	victims []entry
	taken   int   // how many of victims next handed out
	auto    *auto // Auto's history; nil for the other strategies
}

func (r *ranked) next() (*Candidate, error) {
	c := &r.cands[r.victims[r.taken].Slot]
	r.taken++
	return c, nil
}

func (r *ranked) commit(victims []Victim, _ bool) {
	if r.auto != nil {
		r.auto.selected(r.cands, r.victims, victims)
	}
}

func (r *ranked) rollback() {}

// begin starts a selection of required blocks among n candidates, to be
// offered one by one.
func (s *selector) begin(required, n int) {
	if cap(s.buf) > lists.ShrinkAbove && cap(s.buf) > 8*n {
		s.buf = nil // one huge call does not pin its buffer forever
	}
	s.buf, s.sum, s.required = s.buf[:0], 0, required
	s.compactAt, s.heapBudget, s.appendBelow = compactAtLeast, n/heapBudgetShare+compactAtLeast, 0
}

// victims ends a selection whose offered entries cover the need: it returns
// those the greedy selection takes, smallest (key, ID) first. O(k log k)
// beyond the buffer's last compaction.
func (s *selector) victims() []entry {
	v := s.buf[:s.cut(s.buf, s.required, s.sum)]
	sortEntries(v)
	return v
}

// offer adds e, whose key is below the bound if there is one, to the
// entries that may be victims, and reports whether they cover the need,
// with the largest of those that do in *bound: the rare case of the
// selection's loop, kept apart so that the common case stays small.
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
	s.buf = s.buf[:s.cut(s.buf, s.required, s.sum)]
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

// skipped reports whether the selection's loop passes over a candidate with
// key k and ID id, under limit and bound: see greedy.
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

func maxLastAccess(cands []Candidate) int64 {
	now := int64(math.MinInt64)
	for i := range cands {
		now = max(now, cands[i].LastAccess)
	}
	return now
}
