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

// Jain returns Jain's fairness index of n values whose sum is sum and whose
// sum of squares is sumSq: (sum x)^2 / (n sum x^2), 1 when every value is
// equal and 1/n when one value holds everything. It is 1 when there is
// nothing to be unfair about (n or sumSq is 0).
func Jain(sum, sumSq float64, n int) float64 {
	if n == 0 || sumSq == 0 {
		return 1
	}
	return sum * sum / (float64(n) * sumSq)
}
