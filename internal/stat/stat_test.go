package stat

import (
	"math"
	"testing"
)

// TestPercentile checks the nearest-rank definition on hand-computed cases.
func TestPercentile(t *testing.T) {
	ten := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		sorted []int
		p      int
		want   int
	}{
		{ten, 50, 5},  // rank ceil(5) = 5
		{ten, 99, 10}, // rank ceil(9.9) = 10
		{ten, 10, 1},  // rank 1
		{ten, 11, 2},  // rank ceil(1.1) = 2
		{[]int{7}, 99, 7},
		{[]int{7}, 1, 7},
	} {
		if got := Percentile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("Percentile(%v, %d) = %d, want %d", tc.sorted, tc.p, got, tc.want)
		}
	}
}

// TestJain checks Jain's index against hand-computed cases of its
// definition (Jain, Chiu and Hawe, DEC-TR-301, 1984).
func TestJain(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{1, 1, 1, 1}, 1},      // equal shares
		{[]float64{4, 0, 0, 0}, 0.25},   // one of four holds everything: 1/n
		{[]float64{1, 2, 3}, 36.0 / 42}, // (1+2+3)^2 / (3 x (1+4+9))
		{nil, 1},                        // nothing to share
		{[]float64{0, 0}, 1},            // all got nothing
	} {
		sum, sumSq := 0.0, 0.0
		for _, x := range c.xs {
			sum += x
			sumSq += x * x
		}
		if got := Jain(sum, sumSq, len(c.xs)); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Jain(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}
