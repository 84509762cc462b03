package kvevict_test

import (
	"fmt"
	"math/rand/v2"
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
			if _, err := kvevict.NewRanker(s); err != nil {
				continue // adaptive: see BenchmarkAdaptiveSelectVictims
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
		if _, err := kvevict.NewRanker(s); err != nil {
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
