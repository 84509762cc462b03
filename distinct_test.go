package kvevict_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sagellm/kvevict"
)

// TestDuplicateBlocksRefused: a block that a selection would free twice,
// listed twice by one candidate or once by each of two, is refused with
// ErrInvalidCandidate, and the selection evicts and counts nothing. Before
// the check, LRU freed 7 blocks here for 5 distinct ones.
func TestDuplicateBlocksRefused(t *testing.T) {
	cases := []struct {
		name  string
		cands []kvevict.Candidate
		need  int
	}{
		{"twice by one", []kvevict.Candidate{
			{ID: 1, Blocks: []int{10, 11, 10}, LastAccess: 1},
			{ID: 2, Blocks: []int{20, 21, 22, 23}, LastAccess: 2},
		}, 7},
		{"by two", []kvevict.Candidate{
			{ID: 1, Blocks: []int{10, 11, 12}, LastAccess: 1},
			{ID: 2, Blocks: []int{12, 13, 14, 15}, LastAccess: 2},
		}, 7},
		{"far apart", []kvevict.Candidate{
			{ID: 1, Blocks: []int{-1 << 40, 5}, LastAccess: 1},
			{ID: 2, Blocks: []int{1 << 40, -1 << 40}, LastAccess: 2},
		}, 4},
	}
	for _, s := range kvevict.Strategies() {
		if s.Adaptive() {
			continue
		}
		for _, opts := range [][]kvevict.Option{nil, {kvevict.WithSampling(1)}} {
			for _, tc := range cases {
				name := fmt.Sprintf("%s/sampling=%v/%s", s, opts != nil, tc.name)
				p := mustNew(t, s, opts...)
				// Enough distinct candidates that sampling samples rather
				// than falling back to the exact selection.
				cands := append([]kvevict.Candidate(nil), tc.cands...)
				for id := uint64(100); id < 110; id++ {
					cands = append(cands, kvevict.Candidate{ID: id, Blocks: []int{int(id) * 1000}, Pinned: true})
				}
				res, err := p.SelectVictims(cands, tc.need)
				if !errors.Is(err, kvevict.ErrInvalidCandidate) {
					t.Errorf("%s: freed %d blocks %v, err %v; want ErrInvalidCandidate", name, res.FreedBlocks, res.Victims, err)
					continue
				}
				if m := p.Metrics(); m.Selections != 0 || m.EvictedBlocks != 0 {
					t.Errorf("%s: a refused selection counted %d selections, %d blocks", name, m.Selections, m.EvictedBlocks)
				}
			}
		}
	}
}

// TestDuplicateBlocksOutsideVictims: only the blocks a selection frees are
// checked, so a block two candidates share is no error while neither is
// taken.
func TestDuplicateBlocksOutsideVictims(t *testing.T) {
	p := mustNew(t, kvevict.LRU)
	cands := []kvevict.Candidate{
		{ID: 1, Blocks: []int{1, 2}, LastAccess: 1},
		{ID: 2, Blocks: []int{7, 8}, LastAccess: 5},
		{ID: 3, Blocks: []int{8, 9}, LastAccess: 6},
	}
	res, err := p.SelectVictims(cands, 2)
	if err != nil || len(res.Victims) != 1 || res.Victims[0].ID != 1 {
		t.Fatalf("SelectVictims = %+v, %v; want candidate 1 alone", res, err)
	}
}
