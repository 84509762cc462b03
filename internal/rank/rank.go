// Package rank carries the key strategies' keys from package kvevict to
// package prefix's tree, which keeps its own order, so that a strategy's
// logic is written once, without making keys part of kvevict's API.
//
// Package kvevict registers its ranker constructor in an init function;
// anything that imports kvevict can then call [New].
package rank

import "cmp"

// Key is a strategy's priority for one candidate: the smallest is evicted
// first, comparing Major, then Minor, then (outside the key) the candidate's
// ID. Strategies pack their criteria into the two words, so that ranking is
// two integer comparisons rather than a multi-field comparator.
type Key struct {
	Major, Minor int64
}

// Compare returns -1, 0 or +1 as k is before, equal to or after o in
// eviction order. It is a strict weak ordering; callers that need a total
// order break ties by candidate ID, as [Before] does.
func (k Key) Compare(o Key) int {
	if c := cmp.Compare(k.Major, o.Major); c != 0 {
		return c
	}
	return cmp.Compare(k.Minor, o.Minor)
}

// Before orders (key, ID) pairs: by key, then ID. It is the total order of
// every selection, heap and index that ranks candidates; IDs are unique, so
// no two candidates tie.
func Before(a Key, aID uint64, b Key, bID uint64) bool {
	if a.Major != b.Major {
		return a.Major < b.Major
	}
	if a.Minor != b.Minor {
		return a.Minor < b.Minor
	}
	return aID < bID
}

// Ranker computes a key strategy's keys over candidates of type C, which is
// kvevict.Candidate (a type parameter only because this package cannot
// import kvevict). A Ranker is immutable and safe for concurrent use.
type Ranker[C any] interface {
	// KeyAt returns c's key at tick now. Only a key that UsesNow reads now.
	// c comes by value: a pointer through an interface would escape, and
	// every key would allocate.
	KeyAt(c C, now int64) Key
	// UsesNow reports whether keys depend on the current tick, so that a
	// structure keeping candidates in key order must re-rank as time passes.
	UsesNow() bool
}

// constructor is kvevict's ranker constructor, a func(string, ...O)
// (Ranker[C], error) for kvevict's Option O and Candidate C.
var constructor any

// Register installs kvevict's ranker constructor. Package kvevict calls it
// from init.
func Register[C, O any](f func(strategy string, opts ...O) (Ranker[C], error)) {
	constructor = f
}

// New returns the ranker of key strategy s configured by opts, as
// kvevict's constructor does: an error matching errors.ErrUnsupported for a
// strategy that ranks by history, kvevict's errors for the rest. C and O
// must be kvevict.Candidate and kvevict.Option.
func New[C, O any](s string, opts ...O) (Ranker[C], error) {
	f, ok := constructor.(func(string, ...O) (Ranker[C], error))
	if !ok {
		panic("rank: New called before package kvevict registered its rankers, or with other types")
	}
	return f(s, opts...)
}
