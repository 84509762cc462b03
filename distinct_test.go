package kvevict_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
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
// block that another held candidate lists, or that they list twice,
// refuses the eviction and is left as it was: the same candidates, the
// same evictable blocks. It sees what a Policy over the same slice does
// not, a duplicate outside the victims. The candidates corrected, Evict
// picks what a Policy picks. For every strategy, with a
// victim trimmed by partial eviction among them.
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
		// 8 of 9 blocks: every candidate is a victim, one of them trimmed;
		// 1 block: a single victim, which frees block 12 (ID 1) or not.
		for _, need := range []int{8, 3} {
			res, err := x.Evict(need)
			if err == nil {
				for _, v := range res.Victims {
					if v.ID != 3 {
						t.Fatalf("%s: Evict(%d) = %+v, freeing a block another candidate lists", s, need, res)
					}
				}
				t.Fatalf("%s: Evict(%d) = %+v with ID 3 alone, which holds 2 blocks", s, need, res)
			}
			if !errors.Is(err, kvevict.ErrInvalidCandidate) || !strings.Contains(err.Error(), "block 12") {
				t.Errorf("%s: Evict(%d): %v; want ErrInvalidCandidate naming block 12", s, need, err)
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
		}
		p := mustNew(t, s)
		if _, err := p.SelectVictims(cands, 8); !errors.Is(err, kvevict.ErrInvalidCandidate) {
			t.Fatalf("%s: a Policy took the duplicate block: %v", s, err)
		}
		// Corrected, the candidates go into a new index and a new Policy
		// alike, so that an adaptive strategy's history is the same.
		cands[1].Blocks = []int{13, 14, 15, 22}
		if err := x.Update(cands[1]); err != nil {
			t.Fatal(err)
		}
		p = mustNew(t, s)
		if x, err = kvevict.NewIndex(s); err != nil {
			t.Fatal(err)
		}
		for _, c := range cands {
			if err := x.Add(c); err != nil {
				t.Fatal(err)
			}
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

// TestIndexNeverFreesABlockTwice: two held candidates listing one block
// (issue 51's case) are no error until an Evict would free it, and then
// that Evict is refused, so that no two Evicts return the block; running
// sequences that share a prefix, referenced, may list it together; and a
// block freed, whole or by a trim, may be listed again.
func TestIndexNeverFreesABlockTwice(t *testing.T) {
	x, err := kvevict.NewIndex(kvevict.LRU)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []kvevict.Candidate{
		{ID: 1, Blocks: []int{1}, LastAccess: 1},
		{ID: 2, Blocks: []int{1}, LastAccess: 2},
		{ID: 3, Blocks: []int{7, 8}, LastAccess: 3, RefCount: 1},
		{ID: 4, Blocks: []int{7, 8, 9}, LastAccess: 4, RefCount: 1},
	} {
		if err := x.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if res, err := x.Evict(1); !errors.Is(err, kvevict.ErrInvalidCandidate) ||
			!strings.Contains(err.Error(), "block 1, which ID 1 would free, is listed by ID 2 too") {
			t.Fatalf("Evict(1) with block 1 listed by IDs 1 and 2 = %+v, %v; want ErrInvalidCandidate", res, err)
		}
	}
	if !x.Remove(2) {
		t.Fatal("Remove(2) found nothing")
	}
	if res, err := x.Evict(1); err != nil || len(res.Victims) != 1 || res.Victims[0].ID != 1 {
		t.Fatalf("Evict(1) once block 1 is ID 1's alone = %+v, %v; want ID 1", res, err)
	}
	if err := x.Add(kvevict.Candidate{ID: 2, Blocks: []int{1, 2, 3}, LastAccess: 5, AllowPartial: true}); err != nil {
		t.Fatal(err)
	}
	if res, err := x.Evict(1); err != nil || !slices.Equal(res.Victims[0].Blocks, []int{3}) {
		t.Fatalf("a freed block listed again: Evict(1) = %+v, %v; want ID 2's block 3", res, err)
	}
	if err := x.Unlock(4); err != nil { // 4 alone: 3 still lists 7 and 8
		t.Fatal(err)
	}
	if _, err := x.Evict(3); !errors.Is(err, kvevict.ErrInvalidCandidate) {
		t.Fatalf("Evict of ID 4's blocks, which running ID 3 shares: %v; want ErrInvalidCandidate", err)
	}
	if err := x.Update(kvevict.Candidate{ID: 4, Blocks: []int{9}, LastAccess: 4}); err != nil { // the allocator keeps the shared head
		t.Fatal(err)
	}
	if res, err := x.Evict(3); err != nil || res.FreedBlocks != 3 {
		t.Fatalf("Evict(3) = %+v, %v; want IDs 2 and 4, three blocks", res, err)
	}
}
