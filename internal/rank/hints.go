package rank

import "fmt"

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
	ClassApart              // a class of its own, ranked by HintKey
	ClassHeld               // under a live hard lease: never taken
)

// The Major of HintKey for each class: released first, then the retention
// priorities, the default one standing for the plain class between them,
// then the soft leases.
const (
	ReleasedRank = 0
	PlainRank    = 1 + DefaultRetention
	LeasedRank   = 1 + MaxRetention + 1
)

// HintKey is the one place the order of the classes of kvevict.Hints is
// written. It returns the class of an evictable candidate with hints h and
// LastAccess last at tick now and, for ClassApart, its key among the
// candidates set apart: the class's rank, then recency or the lease's end.
// Every structure orders the candidates set apart by it (then ID), takes
// those below PlainRank before the strategy's own order and those above
// it after.
func HintKey(h *Hint, last, now int64) (Key, Class) {
	leased := h.LeaseUntil != 0 && now < h.LeaseUntil
	switch {
	case leased && h.HardLease:
		return Key{}, ClassHeld
	case h.Released:
		return Key{Major: ReleasedRank, Minor: last}, ClassApart
	case leased:
		return Key{Major: LeasedRank, Minor: h.LeaseUntil}, ClassApart
	case h.RetainUntil != 0 && now < h.RetainUntil && h.Retention != DefaultRetention:
		return Key{Major: 1 + int64(h.Retention), Minor: last}, ClassApart
	}
	return Key{}, ClassPlain
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
// structure's order, by HintKey then ID, with the blocks they hold on each
// side of the plain class, and the ends: every candidate whose class
// changes at a later tick, by that tick, so that a lease that ends costs
// O(log n) once. kvevict's Index and package prefix's tree keep one. The
// zero value is empty.
type Apart struct {
	heap Heap
	ends Heap
	// Below and Above are the blocks of the candidates set apart below
	// and above the plain class; Soft those of Above under soft leases.
	Below, Above, Soft int
}

// Len returns how many candidates are set apart. O(1).
func (a *Apart) Len() int { return a.heap.Len() }

// Min returns the candidate set apart that goes first; there must be one.
// O(1).
func (a *Apart) Min() *Entry { return a.heap.Min() }

// Contains reports whether slot's candidate is set apart. O(1).
func (a *Apart) Contains(slot int32) bool { return a.heap.Contains(slot) }

// At returns slot's entry, which must be set apart. O(1).
func (a *Apart) At(slot int32) *Entry { return a.heap.At(slot) }

// Push sets e's candidate apart. O(log n).
func (a *Apart) Push(e Entry) {
	a.heap.Push(e)
	a.count(e.Key, int(e.Blocks))
}

// Remove takes slot's candidate out of those set apart. O(log n).
func (a *Apart) Remove(slot int32) {
	e := a.heap.At(slot)
	a.count(e.Key, -int(e.Blocks))
	a.heap.Remove(slot)
}

func (a *Apart) count(k Key, n int) {
	if k.Major < PlainRank {
		a.Below += n
		return
	}
	a.Above += n
	if k.Major == LeasedRank {
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
