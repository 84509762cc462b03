package rank

import (
	"fmt"
	"math/bits"
)

// Hint is kvevict.Hints as the structures that honour hints read it: the
// same fields, so that a Hints converts to it without a copy.
type Hint struct {
	LeaseUntil  int64
	RetainUntil int64
	Retention   uint8
	HardLease   bool
	Released    bool
}

// The retention priorities: the range, and the priority of a candidate
// that sets none or whose RetainUntil has passed.
const (
	MaxRetention     = 100
	DefaultRetention = 50
)

// Class is where a candidate's hints put it at one tick.
type Class uint8

const (
	ClassPlain Class = iota // no hint in force: the strategy's own order
	ClassApart              // a class of its own: HintRank, then ApartKey
	ClassHeld               // under a live hard lease: never taken
)

// HintRank's rank of each class: released first, then the retention
// priorities, the default one standing for the plain class between them,
// then the soft leases.
const (
	ReleasedRank = 0
	PlainRank    = 1 + DefaultRetention
	LeasedRank   = 1 + MaxRetention + 1
)

// HintRank is the one place the order of the classes of kvevict.Hints is
// written, with ApartKey. It returns the class of an evictable candidate
// with hints h at tick now and, for ClassApart, the class's rank: every
// structure takes the candidates set apart by rank, those below PlainRank
// before the strategy's own order and those above it after.
func HintRank(h *Hint, now int64) (int64, Class) {
	leased := h.LeaseUntil != 0 && now < h.LeaseUntil
	switch {
	case leased && h.HardLease:
		return 0, ClassHeld
	case h.Released:
		return ReleasedRank, ClassApart
	case leased:
		return LeasedRank, ClassApart
	case h.RetainUntil != 0 && now < h.RetainUntil && h.Retention != DefaultRetention:
		return 1 + int64(h.Retention), ClassApart
	}
	return 0, ClassPlain
}

// ApartKey returns the key within its class of a candidate set apart at
// rank r (HintRank's) with hints h and LastAccess last, whose key in the
// strategy's own order is own: the soft leases by the end of their lease,
// the released by recency, the retention priorities by the strategy's
// order. Ties break by ID, as everywhere.
func ApartKey(h *Hint, r, last int64, own Key) Key {
	switch r {
	case LeasedRank:
		return Key{Major: h.LeaseUntil}
	case ReleasedRank:
		return LRUKey(last)
	}
	return own
}

// HintEnd returns the next tick after now at which the class of a
// candidate with hints h may change (its lease or its retention priority
// ends), or 0 if none will.
func HintEnd(h *Hint, now int64) int64 {
	end := int64(0)
	for _, t := range [2]int64{h.LeaseUntil, h.RetainUntil} {
		if t != 0 && now < t && (end == 0 || t < end) {
			end = t
		}
	}
	return end
}

// Apart keeps the evictable candidates that hints set apart from a
// structure's order, by rank (HintRank's), then by key (ApartKey's), then
// ID, with the blocks they hold on each side of the plain class, and the
// ends: every candidate whose class changes at a later tick, by that tick,
// so that a lease that ends costs O(log n) once. kvevict's Index, its
// Policy and package prefix's tree keep one. The zero value is empty.
type Apart struct {
	// ranks holds a heap per rank, made at the first Push; the heaps
	// share one array of positions, since a slot is in one heap at most.
	ranks []Heap
	pos   []int32   // each slot's position in its rank's heap, or -1
	rank  []uint8   // 1 + each slot's rank, or 0
	live  [2]uint64 // bit r: ranks[r] holds candidates
	n     int
	ends  Heap
	// Below and Above are the blocks of the candidates set apart below
	// and above the plain class; Soft those of Above under soft leases.
	Below, Above, Soft int
}

// Len returns how many candidates are set apart. O(1).
func (a *Apart) Len() int { return a.n }

// first returns the lowest rank that holds candidates; there must be one.
func (a *Apart) first() int {
	if a.live[0] != 0 {
		return bits.TrailingZeros64(a.live[0])
	}
	return 64 + bits.TrailingZeros64(a.live[1])
}

// Min returns the candidate set apart that goes first and its rank; there
// must be one. O(1).
func (a *Apart) Min() (*Entry, int64) {
	r := a.first()
	return a.ranks[r].Min(), int64(r)
}

// Contains reports whether slot's candidate is set apart. O(1).
func (a *Apart) Contains(slot int32) bool {
	return slot >= 0 && int(slot) < len(a.rank) && a.rank[slot] != 0
}

// At returns slot's entry and rank; slot must be set apart. O(1).
func (a *Apart) At(slot int32) (*Entry, int64) {
	r := a.rank[slot] - 1
	return a.ranks[r].At(slot), int64(r)
}

// Push sets e's candidate apart at rank r, at most LeasedRank. O(log n).
func (a *Apart) Push(r int64, e Entry) {
	if a.ranks == nil {
		a.ranks = make([]Heap, LeasedRank+1)
	}
	if int(e.Slot) >= len(a.pos) {
		n := max(2*len(a.pos), int(e.Slot)+1, 16)
		a.pos = append(a.pos, make([]int32, n-len(a.pos))...)
		for i := len(a.rank); i < len(a.pos); i++ {
			a.pos[i] = -1
		}
		a.rank = append(a.rank, make([]uint8, len(a.pos)-len(a.rank))...)
		for i := range a.ranks {
			a.ranks[i].pos = a.pos
		}
	}
	a.ranks[r].Push(e)
	a.rank[e.Slot] = uint8(r) + 1
	a.live[r/64] |= 1 << (r % 64)
	a.n++
	a.count(r, int(e.Blocks))
}

// Remove takes slot's candidate out of those set apart. O(log n).
func (a *Apart) Remove(slot int32) {
	e, r := a.At(slot)
	a.count(r, -int(e.Blocks))
	h := &a.ranks[r]
	h.Remove(slot)
	if h.Len() == 0 {
		a.live[r/64] &^= 1 << (r % 64)
	}
	a.rank[slot] = 0
	a.n--
}

// Clear sets apart no candidate, keeping the ends and the memory. O(n).
func (a *Apart) Clear() {
	for a.n > 0 {
		e, _ := a.Min()
		a.Remove(e.Slot)
	}
}

func (a *Apart) count(r int64, n int) {
	if r < PlainRank {
		a.Below += n
		return
	}
	a.Above += n
	if r == LeasedRank {
		a.Soft += n
	}
}

// SetEnd files slot's candidate, of ID id, under the tick end at which
// its class changes, or takes it out of the ends when end is 0. O(log n).
func (a *Apart) SetEnd(slot int32, id uint64, end int64) {
	switch in := a.ends.Contains(slot); {
	case end != 0 && in:
		a.ends.Fix(slot, Key{Major: end}, 0)
	case end != 0:
		a.ends.Push(Entry{Key: Key{Major: end}, ID: id, Slot: slot})
	case in:
		a.ends.Remove(slot)
	}
}

// Ending reports whether a candidate's class changes at a later tick:
// whether Ended can ever find one. O(1).
func (a *Apart) Ending() bool { return a.ends.Len() > 0 }

// Ended returns a candidate whose class changes by tick now, if any: the
// caller files it again, which moves its end. O(1).
func (a *Apart) Ended(now int64) (slot int32, ok bool) {
	if a.ends.Len() == 0 || a.ends.Min().Major > now {
		return 0, false
	}
	return a.ends.Min().Slot, true
}

// End returns the tick slot's candidate is filed under in the ends, or 0.
// O(1).
func (a *Apart) End(slot int32) int64 {
	if !a.ends.Contains(slot) {
		return 0
	}
	return a.ends.At(slot).Major
}

// Check verifies each rank's heap, the positions and the sums of blocks,
// for tests.
func (a *Apart) Check() error {
	n, below, above, soft := 0, 0, 0, 0
	for r := range a.ranks {
		h := &a.ranks[r]
		if (h.Len() > 0) != (a.live[r/64]&(1<<(r%64)) != 0) {
			return fmt.Errorf("rank.Apart: rank %d holds %d, marked live %v", r, h.Len(), h.Len() == 0)
		}
		for j := range h.entries {
			e := &h.entries[j]
			if j > 0 && Less(e, &h.entries[(j-1)/arity]) {
				return fmt.Errorf("rank.Apart: rank %d: entry %d (ID %d) sorts before its parent", r, j, e.ID)
			}
			if a.pos[e.Slot] != int32(j) || a.rank[e.Slot] != uint8(r)+1 {
				return fmt.Errorf("rank.Apart: slot %d filed at %d, rank %d; found at %d, rank %d", e.Slot, a.pos[e.Slot], a.rank[e.Slot], j, r+1)
			}
			switch b := int(e.Blocks); {
			case int64(r) < PlainRank:
				below += b
			case int64(r) == LeasedRank:
				soft += b
				above += b
			default:
				above += b
			}
		}
		n += h.Len()
	}
	if n != a.n || below != a.Below || above != a.Above || soft != a.Soft {
		return fmt.Errorf("rank.Apart: %d set apart (%d, %d, %d blocks), counted %d (%d, %d, %d)", n, below, above, soft, a.n, a.Below, a.Above, a.Soft)
	}
	return a.ends.Check()
}

// CheckHint reports hints no class can hold: a retention priority out of
// range or without its end, a hard lease without one.
func CheckHint(h *Hint) error {
	switch {
	case h.Retention > MaxRetention:
		return fmt.Errorf("retention priority %d, more than %d", h.Retention, MaxRetention)
	case h.Retention != 0 && h.RetainUntil == 0:
		return fmt.Errorf("retention priority %d without RetainUntil", h.Retention)
	case h.HardLease && h.LeaseUntil == 0:
		return fmt.Errorf("a hard lease without LeaseUntil")
	}
	return nil
}
