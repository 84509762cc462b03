package kvevict_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sagellm/kvevict"
)

// TestDuplicateBlocksRefused: a block that a selection would free twice,
// listed twice by one candidate or once by each of two, is refused with
// ErrInvalidCandidate, and the selection evicts and counts nothing, under
// every strategy. Before the check, LRU freed 7 blocks here for 5 distinct
// ones, and so did ARC, S3-FIFO, SIEVE and Auto.
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
			{ID: 2, Blocks: []int{13, 14, 15, 12}, LastAccess: 2},
		}, 7},
		{"far apart", []kvevict.Candidate{
			{ID: 1, Blocks: []int{-1 << 40, 5}, LastAccess: 1},
			{ID: 2, Blocks: []int{1 << 40, -1 << 40}, LastAccess: 2},
		}, 4},
	}
	for _, s := range kvevict.Strategies() {
		for _, opts := range [][]kvevict.Option{nil, {kvevict.WithSampling(1)}} {
			if s.Adaptive() && opts != nil {
				continue // an adaptive strategy does not sample
			}
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
				// Nothing was evicted, from the pool or from a history:
				// the same call finds the same victims again (sampling
				// draws others; SIEVE's hand may take them in another
				// order, which the message does not show).
				if _, again := p.SelectVictims(cands, tc.need); opts == nil && fmt.Sprint(again) != fmt.Sprint(err) {
					t.Errorf("%s: refused with %v, then with %v", name, err, again)
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

// TestIndexDuplicateBlocksRefused: an Index whose victims would free a
// block twice refuses the eviction and is left as it was: the same
// candidates, the same evictable blocks, and, once the caller corrects the
// candidate, the victims a Policy picks after the same refusal. For every
// strategy, with a victim trimmed by partial eviction among them.
func TestIndexDuplicateBlocksRefused(t *testing.T) {
	for _, s := range kvevict.Strategies() {
		cands := []kvevict.Candidate{
			{ID: 1, Blocks: []int{10, 11, 12}, LastAccess: 1, CreatedAt: 1, AccessCount: 1},
			{ID: 2, Blocks: []int{13, 14, 15, 12}, LastAccess: 2, CreatedAt: 2, AccessCount: 1, AllowPartial: true},
			{ID: 3, Blocks: []int{30, 31}, LastAccess: 3, CreatedAt: 3, AccessCount: 1, AllowPartial: true},
		}
		x, err := kvevict.NewIndex(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cands {
			if err := x.Add(c); err != nil {
				t.Fatal(err)
			}
		}
		// 8 of 9 blocks: every candidate is a victim, one of them trimmed.
		if res, err := x.Evict(8); !errors.Is(err, kvevict.ErrInvalidCandidate) {
			t.Errorf("%s: Evict = %+v, %v; want ErrInvalidCandidate", s, res, err)
			continue
		}
		if x.Len() != 3 || x.EvictableBlocks() != 9 || x.Metrics().Selections != 0 {
			t.Errorf("%s: after the refused Evict: %d held, %d evictable, %d selections; want 3, 9, 0",
				s, x.Len(), x.EvictableBlocks(), x.Metrics().Selections)
		}
		for id, c := range cands {
			if got, ok := x.Get(c.ID); !ok || fmt.Sprint(got) != fmt.Sprint(c) {
				t.Errorf("%s: candidate %d is %+v after the refused Evict, want %+v", s, id, got, c)
			}
		}
		p := mustNew(t, s)
		if _, err := p.SelectVictims(cands, 8); !errors.Is(err, kvevict.ErrInvalidCandidate) {
			t.Fatalf("%s: a Policy took the duplicate block: %v", s, err)
		}
		cands[1].Blocks = []int{13, 14, 15, 22}
		if err := x.Update(cands[1]); err != nil {
			t.Fatal(err)
		}
		got, err := x.Evict(8)
		if err != nil {
			t.Fatalf("%s: Evict after the fix: %v", s, err)
		}
		want, err := p.SelectVictims(cands, 8)
		if err != nil || fmt.Sprint(got.Victims) != fmt.Sprint(want.Victims) {
			t.Errorf("%s: Evict after the fix = %v, a Policy picks %v (%v)", s, got.Victims, want.Victims, err)
		}
	}
}
