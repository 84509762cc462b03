package blockcount

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestCountsMatchModel: random listings and removals, of blocks the bits
// cover, blocks beyond them that they come to cover as more blocks are
// listed, negative and huge blocks, agree with a map after every step.
func TestCountsMatchModel(t *testing.T) {
	for seed := range uint64(4) {
		r := rand.New(rand.NewPCG(seed, 7))
		var c Counts
		if seed%2 == 1 {
			c.Reserve(100)
		}
		want := map[int]int{}
		var listed []int // one entry per listing
		block := func() int {
			switch r.IntN(8) {
			case 0:
				return -1 - r.IntN(50)
			case 1:
				return math.MaxInt - r.IntN(3)
			case 2:
				return minBits + 997*r.IntN(300) // covered once enough blocks are listed
			}
			return r.IntN(200)
		}
		for step := range 20_000 {
			if len(listed) == 0 || r.IntN(3) > 0 && len(listed) < 3000 {
				b := block()
				c.Add(b)
				want[b]++
				listed = append(listed, b)
			} else {
				i := r.IntN(len(listed))
				b := listed[i]
				listed[i] = listed[len(listed)-1]
				listed = listed[:len(listed)-1]
				c.Remove(b)
				if want[b]--; want[b] == 0 {
					delete(want, b)
				}
			}
			shared := false
			for _, n := range want {
				shared = shared || n > 1
			}
			if c.Shared() != shared {
				t.Fatalf("seed %d step %d: Shared() = %v, want %v", seed, step, c.Shared(), shared)
			}
			if step%97 == 0 || len(listed) < 5 {
				if err := c.Check(want); err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
			}
		}
		if len(c.bits)*64 <= minBits {
			t.Errorf("seed %d: the bits never grew past %d blocks", seed, minBits)
		}
	}
}

// TestCountsBounded: blocks far beyond the blocks listed take no bits.
func TestCountsBounded(t *testing.T) {
	var c Counts
	c.Add(1)
	c.Add(1 << 40)
	c.Add(-5)
	if got := c.Tables()[0] * 64; got > minBits {
		t.Errorf("3 blocks, one at 2^40, take %d bits; want at most %d", got, minBits)
	}
	if err := c.Check(map[int]int{1: 1, 1 << 40: 1, -5: 1}); err != nil {
		t.Fatal(err)
	}
}
