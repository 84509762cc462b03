package sizing

import (
	"testing"

	"github.com/sagellm/kvevict"
)

// TestOptions: an adaptive strategy that counts blocks gets one option,
// WithCapacity of Blocks + Room, in any spelling; a key strategy, which
// would refuse it, and a list strategy over sequences get none.
func TestOptions(t *testing.T) {
	blocks := Pool{Blocks: 100, Room: 8}
	sequences := Pool{Blocks: 100, Room: 8, Sequences: true}
	for _, tc := range []struct {
		p    Pool
		s    kvevict.Strategy
		want int // options given
	}{
		{blocks, kvevict.LRU, 0},
		{blocks, kvevict.ARC, 1},
		{blocks, kvevict.Auto, 1},
		{blocks, "AUTO", 1},
		{blocks, "belady", 0},
		{sequences, kvevict.ARC, 0},
		{sequences, kvevict.SIEVE, 0},
		{sequences, " Auto", 1},
		{sequences, kvevict.LFU, 0},
	} {
		opts := tc.p.Options(tc.s)
		if len(opts) != tc.want {
			t.Errorf("%+v.Options(%q) gave %d options, want %d", tc.p, tc.s, len(opts), tc.want)
			continue
		}
		if _, err := kvevict.NewIndex(tc.s, opts...); err != nil && tc.s != "belady" {
			t.Errorf("NewIndex(%q) with %+v's options: %v", tc.s, tc.p, err)
		}
	}
	// Blocks + Room is the capacity: one past the limit is refused.
	if _, err := kvevict.NewIndex(kvevict.ARC, Pool{Blocks: 1 << 28, Room: 1}.Options(kvevict.ARC)...); err == nil {
		t.Error("NewIndex(ARC) with a capacity of 2^28+1 was accepted: Options did not give Blocks+Room")
	}
	if _, err := kvevict.NewIndex(kvevict.ARC, Pool{Blocks: 1<<28 - 1, Room: 1}.Options(kvevict.ARC)...); err != nil {
		t.Errorf("NewIndex(ARC) with a capacity of 2^28: %v", err)
	}
}
