// Package rank holds the mechanisms that rank a candidate: each key
// strategy's key over a candidate's [Fields] ([Params]), under the
// parameters of a [Config], Auto's score and the miniature caches that
// choose its weight ([Weights]), and the indexed heap that keeps candidates
// in key order ([Heap]). Package kvevict ranks sequences by them and
// package prefix a tree's blocks, so that a strategy's logic is written
// once without making keys part of kvevict's API. The strategies' names,
// their options and the errors a caller sees are kvevict's.
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
