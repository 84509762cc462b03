// Package reprefill is the one account of re-prefills, shared by kvevict's
// Policy and Index and by the simulator: a [Ledger] remembers evictions and
// counts the accesses that come back to them.
//
// A ledger counts in units, each named by a uint64: whatever its caller
// evicts and accesses by ID. The unit is the caller's, decided once per
// caller: kvevict's metrics count sequences (a Victim's ID, so
// Metrics.RePrefills is per evicted sequence), the simulator counts blocks
// (a block's hash, so Report.RePrefilledBlocks is per evicted block).
// Both ask the same questions of the same ledger.
package reprefill

import (
	"github.com/sagellm/kvevict/internal/idmap"
	"github.com/sagellm/kvevict/internal/stat"
)

// Unbounded is the limit of a ledger that remembers every eviction, for an
// offline run whose memory follows its workload; a server's ledger has a
// limit.
const Unbounded = -1

// Ledger remembers the evictions of units and counts re-prefills: an
// eviction of a unit followed by an access to it while the eviction is
// remembered. Each eviction counts at most once: two evictions of a unit
// with no access between them are redone by one prefill. With T the ledger
// also keeps what the caller says of a unit's latest eviction (the
// simulator: the sequence a block was evicted from); struct{} keeps
// nothing.
//
// A ledger of limit n > 0 remembers the last n evictions, its memory
// bounded by n; limit 0 remembers none (it counts evictions, never a
// re-prefill); [Unbounded] remembers all, its memory one record per unit
// ever evicted. The zero value is a ledger of limit 0. Not safe for
// concurrent use.
type Ledger[T any] struct {
	limit int

	// recent is a ring of the units of the last limit evictions, the
	// oldest at head once it is full; an unbounded ledger keeps none, as
	// it forgets nothing.
	recent []uint64
	head   int

	// units holds a record for each unit among the remembered evictions.
	// sumX and sumX2 are the sums of their counts and of the counts'
	// squares, kept as counts change, for Jain's index.
	units       idmap.Map[record[T]]
	sumX, sumX2 uint64

	evictions  uint64
	rePrefills uint64
}

type record[T any] struct {
	// count is the unit's remembered evictions: at most the limit, or in
	// an unbounded ledger the evictions of one unit over a run, which an
	// offline run does not take to 2^32.
	count   uint32
	pending bool // evicted and not accessed since
	from    T    // what the caller said of the latest eviction
}

// New returns an empty ledger that remembers the last limit evictions, or
// every one for [Unbounded].
func New[T any](limit int) Ledger[T] {
	return Ledger[T]{limit: limit}
}

// Evict records an eviction of unit id, of which the caller says from, and
// forgets the oldest remembered eviction if the ledger is full. O(1)
// expected.
func (l *Ledger[T]) Evict(id uint64, from T) {
	l.evictions++
	switch {
	case l.limit == 0:
		return
	case l.limit < 0:
	case len(l.recent) < l.limit:
		l.recent = append(l.recent, id)
	default:
		l.forget(l.recent[l.head])
		l.recent[l.head] = id
		l.head = (l.head + 1) % l.limit
	}
	r := l.units.Upsert(id)
	l.sumX++
	l.sumX2 += 2*uint64(r.count) + 1 // (c+1)^2 - c^2
	r.count++
	r.pending = true
	r.from = from
}

// forget drops the oldest remembered eviction, of unit id.
func (l *Ledger[T]) forget(id uint64) {
	r := l.units.Ref(id) // present: every unit in recent has a record
	l.sumX--
	l.sumX2 -= 2*uint64(r.count) - 1 // c^2 - (c-1)^2
	r.count--
	if r.count == 0 {
		l.units.Del(id)
	}
}

// Access records an access to unit id and reports whether it is a
// re-prefill (id was evicted since its last access, and the eviction is
// remembered), counting it, and what the caller said of that eviction.
// O(1) expected.
func (l *Ledger[T]) Access(id uint64) (from T, again bool) {
	from, again = l.Clear(id)
	if again {
		l.rePrefills++
	}
	return from, again
}

// Clear is Access without counting a re-prefill, for a unit whose work is
// redone where the caller has counted it already (the simulator's
// recomputation of a preempted request). O(1) expected.
func (l *Ledger[T]) Clear(id uint64) (from T, again bool) {
	r := l.units.Ref(id)
	if r == nil || !r.pending {
		return from, false
	}
	r.pending = false
	return r.from, true
}

// Pending reports whether unit id was evicted and not accessed since, while
// the eviction is remembered: whether an Access now would be a re-prefill.
// O(1) expected.
func (l *Ledger[T]) Pending(id uint64) bool {
	r := l.units.Ref(id)
	return r != nil && r.pending
}

// Evictions returns how many evictions the ledger recorded, remembered or
// not.
func (l *Ledger[T]) Evictions() uint64 { return l.evictions }

// RePrefills returns how many accesses were re-prefills.
func (l *Ledger[T]) RePrefills() uint64 { return l.rePrefills }

// Rate returns RePrefills / Evictions, 0 when nothing was evicted.
func (l *Ledger[T]) Rate() float64 {
	if l.evictions == 0 {
		return 0
	}
	return float64(l.rePrefills) / float64(l.evictions)
}

// Fairness returns Jain's index over how many times each unit appears
// among the remembered evictions: 1 when every unit was evicted equally
// often (or none was), falling toward 1/n as one of n units is evicted
// over and over. O(1).
func (l *Ledger[T]) Fairness() float64 {
	return stat.Jain(float64(l.sumX), float64(l.sumX2), l.units.Len())
}
