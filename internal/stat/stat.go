// Package stat holds the summary statistics that package kvevict's metrics
// and the simulator's reports both compute, so that each has one
// definition.
package stat

import "cmp"

// Percentile returns the p-th percentile (0 < p <= 100) of sorted, which
// must be ascending and not empty, by the nearest-rank method: the smallest
// value with at least p percent of the values at or below it.
func Percentile[T cmp.Ordered](sorted []T, p int) T {
	i := (len(sorted)*p+99)/100 - 1
	return sorted[max(i, 0)]
}
