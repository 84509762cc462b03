package kvevict_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sagellm/kvevict"
)

// seedScenario builds n candidates of blocksEach blocks with fixed-seed
// random fields: about 10% referenced by a running request and 2% pinned,
// the rest evictable.
func seedScenario(n, blocksEach int, seed uint64) []kvevict.Candidate {
	rng := rand.New(rand.NewPCG(seed, 1))
	cands := make([]kvevict.Candidate, n)
	for i := range cands {
		blocks := make([]int, blocksEach)
		for j := range blocks {
			blocks[j] = i*blocksEach + j
		}
		maxLen := 512 + rng.IntN(4096)
		c := kvevict.Candidate{
			ID:          uint64(i) + 1,
			Blocks:      blocks,
			CreatedAt:   rng.Int64N(1_000_000_000),
			AccessCount: rng.IntN(20),
			Priority:    kvevict.Priority(rng.IntN(3)),
			MaxLen:      maxLen,
			SeqLen:      rng.IntN(maxLen + 1),
		}
		c.LastAccess = c.CreatedAt + rng.Int64N(1_000_000_000)
		if rng.IntN(2) == 0 {
			c.EstimatedLifetime = time.Duration(rng.Int64N(int64(time.Minute)))
		}
		switch r := rng.IntN(100); {
		case r < 10:
			c.RefCount = 1 + rng.IntN(3)
		case r < 12:
			c.Pinned = true
		}
		cands[i] = c
	}
	return cands
}

// BenchmarkSelectVictims is the seed's scenario, 1000 candidates of 10
// blocks freeing 100 blocks, for every key strategy, and the same at other
// sizes. The adaptive strategies have BenchmarkAdaptiveSelectVictims.
func BenchmarkSelectVictims(b *testing.B) {
	for _, n := range []int{100, 1000, 10_000, 1_000_000} {
		cands := seedScenario(n, 10, 42)
		for _, s := range kvevict.Strategies() {
			if s.Adaptive() {
				continue // see BenchmarkAdaptiveSelectVictims
			}
			b.Run(fmt.Sprintf("strategy=%s/n=%d", s, n), selectLoop(s, cands))
		}
	}
}

// BenchmarkSelectVictimsShuffled is the seed's scenario (n=1000) with the
// candidates in random ID order. BenchmarkSelectVictims lists them in
// increasing ID order, as an allocator that walks its sequences in
// admission order does, which lets the selection skip its duplicate-ID
// table; here every call fills that table.
func BenchmarkSelectVictimsShuffled(b *testing.B) {
	cands := seedScenario(1000, 10, 42)
	rand.New(rand.NewPCG(7, 7)).Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	for _, s := range kvevict.Strategies() {
		if s.Adaptive() {
			continue
		}
		b.Run(fmt.Sprintf("strategy=%s/n=1000", s), selectLoop(s, cands))
	}
}

// selectLoop is a benchmark of SelectVictims freeing 100 blocks from cands,
// with a policy of strategy s made once.
func selectLoop(s kvevict.Strategy, cands []kvevict.Candidate, opts ...kvevict.Option) func(*testing.B) {
	return func(b *testing.B) {
		p, err := kvevict.New(s, opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.SelectVictims(cands, 100); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkSelectVictimsOrder lists the same 100k sequences of 10 blocks
// oldest-first (as a walk of an LRU list from its tail) and newest-first (from
// its head) and frees 1,000 and 10,000 victims' worth under LRU: the
// selection's cost must not depend on the order. IDs follow the list order
// in both, so neither fills the duplicate-ID table.
func BenchmarkSelectVictimsOrder(b *testing.B) {
	base := seedScenario(100_000, 10, 42)
	slices.SortFunc(base, func(x, y kvevict.Candidate) int { return cmp.Compare(x.LastAccess, y.LastAccess) })
	for _, order := range []string{"oldest-first", "newest-first"} {
		cands := slices.Clone(base)
		if order == "newest-first" {
			slices.Reverse(cands)
		}
		for i := range cands {
			cands[i].ID = uint64(i) + 1
		}
		for _, victims := range []int{1000, 10_000} {
			b.Run(fmt.Sprintf("order=%s/victims=%d", order, victims), func(b *testing.B) {
				p, err := kvevict.New(kvevict.LRU)
				if err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if _, err := p.SelectVictims(cands, victims*10); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkFloor is the least any exact LRU selection can do on the seed
// scenario (1000 candidates of 10 blocks, free 100): one pass that checks
// each candidate's counts, skips the pinned and referenced, and keeps the
// smallest keys that cover the need in a small sorted array. It reports no
// victims and keeps no metrics; BenchmarkSelectVictims/strategy=lru/n=1000
// beside it shows what the library's selection costs on top.
func BenchmarkFloor(b *testing.B) {
	cands := seedScenario(1000, 10, 42)
	type kept struct {
		key    int64
		id     uint64
		blocks int
	}
	keep := make([]kept, 0, 64)
	for b.Loop() {
		keep = keep[:0]
		sum := 0
		for i := range cands {
			c := &cands[i]
			if c.RefCount|c.AccessCount|c.SeqLen|c.MaxLen|int(c.EstimatedLifetime) < 0 {
				b.Fatal("invalid candidate")
			}
			if c.Pinned || c.RefCount > 0 || len(c.Blocks) == 0 {
				continue
			}
			e := kept{c.LastAccess, c.ID, len(c.Blocks)}
			if sum >= 100 && (e.key > keep[len(keep)-1].key || e.key == keep[len(keep)-1].key && e.id > keep[len(keep)-1].id) {
				continue
			}
			j := len(keep)
			keep = append(keep, e)
			for ; j > 0 && (e.key < keep[j-1].key || e.key == keep[j-1].key && e.id < keep[j-1].id); j-- {
				keep[j] = keep[j-1]
			}
			keep[j] = e
			sum += e.blocks
			for sum-keep[len(keep)-1].blocks >= 100 {
				sum -= keep[len(keep)-1].blocks
				keep = keep[:len(keep)-1]
			}
		}
		if sum < 100 {
			b.Fatal("no cover")
		}
	}
}

// BenchmarkSelectVictimsLean is the seed scenario under LRU with the
// metrics that cost per call turned off (WithTiming(false),
// WithEvictionHistory(0)): the selection engine beside BenchmarkFloor,
// without the clock reads and the per-victim eviction history.
func BenchmarkSelectVictimsLean(b *testing.B) {
	cands := seedScenario(1000, 10, 42)
	b.Run("strategy=lru/n=1000", selectLoop(kvevict.LRU, cands, kvevict.WithTiming(false), kvevict.WithEvictionHistory(0)))
}
