package stat

import "testing"

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
