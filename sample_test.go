package kvevict_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sagellm/kvevict"
)

// checkSampled verifies a sampled selection's result against the
// candidates and the exact selection's outcome: distinct evictable victims
// covering required, only the last one trimmed, and failures only where the
// exact selection fails too.
func checkSampled(t *testing.T, cands []kvevict.Candidate, required int, got kvevict.Result, gotErr error, exactErr error) {
	t.Helper()
	if gotErr != nil {
		if exactErr == nil {
			t.Fatalf("sampled selection failed (%v) where the exact one succeeds", gotErr)
		}
		if errors.Is(gotErr, kvevict.ErrInsufficientBlocks) != errors.Is(exactErr, kvevict.ErrInsufficientBlocks) {
			t.Fatalf("sampled error %v, exact error %v", gotErr, exactErr)
		}
		return
	}
	if errors.Is(exactErr, kvevict.ErrInsufficientBlocks) {
		t.Fatalf("sampled selection freed %d blocks where the exact one finds too few: %v", got.FreedBlocks, exactErr)
	}
	seen := map[uint64]bool{}
	freed := 0
	for k, v := range got.Victims {
		// Sampling does not detect duplicate IDs among candidates it never
		// draws: find the candidate by ID and blocks, which are distinct.
		i := slices.IndexFunc(cands, func(c kvevict.Candidate) bool {
			return c.ID == v.ID && len(v.Blocks) > 0 && len(v.Blocks) <= len(c.Blocks) &&
				c.Blocks[len(c.Blocks)-1] == v.Blocks[len(v.Blocks)-1]
		})
		if i < 0 || seen[v.ID] {
			t.Fatalf("victim %+v is not a candidate or repeats", v)
		}
		seen[v.ID] = true
		c := &cands[i]
		if c.Pinned || c.RefCount != 0 || len(c.Blocks) == 0 {
			t.Fatalf("victim %d is not evictable: %+v", v.ID, *c)
		}
		tail := c.Blocks[len(c.Blocks)-len(v.Blocks):]
		if len(v.Blocks) == 0 || !slices.Equal(v.Blocks, tail) ||
			(len(v.Blocks) < len(c.Blocks) && (k != len(got.Victims)-1 || !c.AllowPartial)) {
			t.Fatalf("victim %d frees %v of %v (victim %d of %d)", v.ID, v.Blocks, c.Blocks, k, len(got.Victims))
		}
		freed += len(v.Blocks)
	}
	if freed != got.FreedBlocks || freed < required || (required > 0 && freed-len(got.Victims[len(got.Victims)-1].Blocks) >= required) {
		t.Fatalf("victims free %d blocks, result says %d, required %d", freed, got.FreedBlocks, required)
	}
}

func TestSampledSelection(t *testing.T) {
	cands := seedScenario(10_000, 4, 11)
	for _, k := range []int{1, 5, 64} {
		for _, s := range kvevict.Strategies() {
			if s.Adaptive() {
				continue // TestStrictOptions: sampling is refused
			}
			t.Run(fmt.Sprintf("k=%d/%s", k, s), func(t *testing.T) {
				p, err := kvevict.New(s, kvevict.WithSampling(k))
				if err != nil {
					t.Fatal(err)
				}
				again, _ := kvevict.New(s, kvevict.WithSampling(k))
				exact, _ := kvevict.New(s)
				for _, required := range []int{0, 1, 7, 40, 400} {
					got, err := p.SelectVictims(cands, required)
					_, exactErr := exact.SelectVictims(cands, required)
					checkSampled(t, cands, required, got, err, exactErr)
					if err != nil {
						t.Fatalf("SelectVictims(%d): %v", required, err)
					}
					same, _ := again.SelectVictims(cands, required)
					if !slices.EqualFunc(got.Victims, same.Victims, func(a, b kvevict.Victim) bool { return a.ID == b.ID }) {
						t.Fatalf("two policies with the same calls chose %v and %v", got.Victims, same.Victims)
					}
				}
			})
		}
	}
}

// TestSampledQuality checks that the eviction pool makes sampled victims
// better than the best of k random draws, whose mean rank among n distinct
// keys is about n/(k+1): on 10k candidates with distinct LRU keys, the mean
// rank of a victim (0 = the exact choice) must stay below 3/4 of that.
func TestSampledQuality(t *testing.T) {
	const n = 10_000
	cands := make([]kvevict.Candidate, n)
	rng := rand.New(rand.NewPCG(1, 1))
	for i, r := range rng.Perm(n) {
		cands[i] = kvevict.Candidate{ID: uint64(i), Blocks: []int{i}, LastAccess: int64(r)}
	}
	for _, k := range []int{5, 20} {
		p, _ := kvevict.New(kvevict.LRU, kvevict.WithSampling(k))
		sum, count := 0.0, 0
		for range 100 {
			res, err := p.SelectVictims(cands, 10)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range res.Victims {
				sum += float64(cands[v.ID].LastAccess)
				count++
			}
		}
		mean, limit := sum/float64(count), 0.75*n/float64(k+1)
		if mean > limit {
			t.Errorf("k=%d: mean victim rank %.0f of %d, want <= %.0f", k, mean, n, limit)
		}
		t.Logf("k=%d: mean victim rank %.1f of %d", k, mean, n)
	}
}

func TestSampledErrorsAndFallback(t *testing.T) {
	p, err := kvevict.New(kvevict.LRU, kvevict.WithSampling(3))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kvevict.New(kvevict.LRU, kvevict.WithSampling(0)); !errors.Is(err, kvevict.ErrInvalidArgument) {
		t.Fatalf("WithSampling(0): %v, want ErrInvalidArgument", err)
	}
	// Mostly pinned: sampling keeps missing and falls back to the exact
	// selection, which finds the one evictable candidate.
	cands := make([]kvevict.Candidate, 1000)
	for i := range cands {
		cands[i] = kvevict.Candidate{ID: uint64(i), Blocks: []int{i}, Pinned: i != 777}
	}
	res, err := p.SelectVictims(cands, 1)
	if err != nil || len(res.Victims) != 1 || res.Victims[0].ID != 777 {
		t.Fatalf("SelectVictims over one evictable candidate = %+v, %v; want ID 777", res, err)
	}
	if _, err := p.SelectVictims(cands, 2); !errors.Is(err, kvevict.ErrInsufficientBlocks) {
		t.Fatalf("SelectVictims(2) = %v, want ErrInsufficientBlocks", err)
	}
	if m := p.Metrics(); m.Selections != 1 {
		t.Fatalf("a failed sampled selection was counted: %+v", m)
	}
	// Every candidate invalid: the first one drawn is reported.
	for i := range cands {
		cands[i] = kvevict.Candidate{ID: uint64(i), Blocks: []int{i}, AccessCount: -1}
	}
	if _, err := p.SelectVictims(cands, 1); !errors.Is(err, kvevict.ErrInvalidCandidate) {
		t.Fatalf("SelectVictims over invalid candidates = %v, want ErrInvalidCandidate", err)
	}
	// Two victims sharing an ID.
	for i := range cands {
		cands[i] = kvevict.Candidate{ID: uint64(i % 2), Blocks: []int{i}}
	}
	if _, err := p.SelectVictims(cands, 5); !errors.Is(err, kvevict.ErrInvalidCandidate) {
		t.Fatalf("SelectVictims over duplicate IDs = %v, want ErrInvalidCandidate", err)
	}
}

// FuzzSampledSelectVictims checks a sampled selection's result over
// fuzzer-built candidates with checkSampled.
func FuzzSampledSelectVictims(f *testing.F) {
	f.Add(uint8(2), uint8(3), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18})
	f.Add(uint8(1), uint8(40), []byte("sampled selection over many candidates, some pinned"))
	f.Fuzz(func(t *testing.T, k, required uint8, data []byte) {
		var cands []kvevict.Candidate
		for i := 0; i+2 < len(data); i += 3 {
			a, b, c := data[i], data[i+1], data[i+2]
			blocks := make([]int, b%5)
			for j := range blocks {
				blocks[j] = i*8 + j
			}
			cands = append(cands, kvevict.Candidate{
				ID:           uint64(a % 64),
				Blocks:       blocks,
				LastAccess:   int64(c),
				AccessCount:  int(int8(b)) / 16, // sometimes negative
				Pinned:       c%7 == 0,
				RefCount:     int(a>>6) % 2,
				AllowPartial: b&0x80 != 0,
			})
		}
		p, err := kvevict.New(kvevict.LFU, kvevict.WithSampling(1+int(k)%8))
		if err != nil {
			t.Fatal(err)
		}
		exact, _ := kvevict.New(kvevict.LFU)
		got, gotErr := p.SelectVictims(cands, int(required)%32)
		_, exactErr := exact.SelectVictims(cands, int(required)%32)
		checkSampled(t, cands, int(required)%32, got, gotErr, exactErr)
	})
}

// BenchmarkSelectVictimsSampled is the slice API at n=1M (the seed scenario:
// 10 blocks each, 10% referenced, 2% pinned) freeing 100 blocks, 10 victims,
// with sampling beside the exact selection.
func BenchmarkSelectVictimsSampled(b *testing.B) {
	const n = 1_000_000
	cands := seedScenario(n, 10, 42)
	for _, k := range []int{0, 5, 16} {
		name := fmt.Sprintf("k=%d/n=%d", k, n)
		opts := []kvevict.Option{kvevict.WithSampling(k)}
		if k == 0 {
			name, opts = fmt.Sprintf("exact/n=%d", n), nil
		}
		b.Run(name, selectLoop(kvevict.LRU, cands, opts...))
	}
}
