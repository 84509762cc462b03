package kvevict_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sagellm/kvevict"
)

// TestAdaptiveRegistered: the adaptive strategies are listed, parse, and
// make an Index.
func TestAdaptiveRegistered(t *testing.T) {
	for _, s := range []kvevict.Strategy{kvevict.ARC, kvevict.S3FIFO, kvevict.SIEVE} {
		if !slices.Contains(kvevict.Strategies(), s) {
			t.Errorf("Strategies() lacks %q", s)
		}
		got, err := kvevict.ParseStrategy(" " + strings.ToUpper(string(s)) + " ")
		if err != nil || got != s {
			t.Errorf("ParseStrategy(%q) = %q, %v; want %q", strings.ToUpper(string(s)), got, err, s)
		}
		if _, err := kvevict.NewIndex(s); err != nil {
			t.Errorf("NewIndex(%q) error = %v, want an index that follows its history", s, err)
		}
		if !s.Adaptive() {
			t.Errorf("%q.Adaptive() = false", s)
		}
		for _, bad := range []int{0, -1, 1<<28 + 1} {
			if _, err := kvevict.New(s, kvevict.WithCapacity(bad)); !errors.Is(err, kvevict.ErrInvalidArgument) {
				t.Errorf("New(%q, WithCapacity(%d)) succeeded", s, bad)
			}
		}
	}
}

func ExampleWithCapacity() {
	// A pool that holds about 512 sequences: ARC's cache is 512 sequences.
	p, err := kvevict.New(kvevict.ARC, kvevict.WithCapacity(512))
	fmt.Println(p != nil, err)
	_, err = kvevict.New(kvevict.ARC, kvevict.WithCapacity(0))
	fmt.Println(err)
	// Output:
	// true <nil>
	// kvevict: invalid argument: capacity must be in [1, 268435456], got 0
}

// TestAdaptiveColdStart: with no UpdateAccess at all, candidates enter in
// LastAccess order, so each strategy evicts the least recently used first,
// skipping the pinned and the referenced, and a partial victim keeps its
// head.
func TestAdaptiveColdStart(t *testing.T) {
	for _, s := range []kvevict.Strategy{kvevict.ARC, kvevict.S3FIFO, kvevict.SIEVE} {
		t.Run(string(s), func(t *testing.T) {
			p, err := kvevict.New(s, kvevict.WithCapacity(8))
			if err != nil {
				t.Fatal(err)
			}
			cands := []kvevict.Candidate{
				{ID: 1, Blocks: []int{10, 11}, LastAccess: 30},
				{ID: 2, Blocks: []int{20}, LastAccess: 5, Pinned: true},
				{ID: 3, Blocks: []int{30}, LastAccess: 10},
				{ID: 4, Blocks: []int{40}, LastAccess: 7, RefCount: 1},
				{ID: 5, Blocks: []int{50, 51, 52}, LastAccess: 20, AllowPartial: true},
			}
			res, err := p.SelectVictims(cands, 3)
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprint(res.Victims, res.FreedBlocks)
			if want := "[{3 [30]} {5 [51 52]}] 3"; got != want {
				t.Errorf("victims, freed = %s; want %s", got, want)
			}
			if _, err := p.SelectVictims(cands, 7); !errors.Is(err, kvevict.ErrInsufficientBlocks) {
				t.Errorf("need 7 of 6 evictable blocks: err %v, want ErrInsufficientBlocks", err)
			}
		})
	}
}
