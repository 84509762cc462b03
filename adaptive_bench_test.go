package kvevict_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	arclru "github.com/hashicorp/golang-lru/arc/v2"

	"github.com/sagellm/kvevict"
)

var adaptive = []kvevict.Strategy{kvevict.ARC, kvevict.S3FIFO, kvevict.SIEVE, kvevict.Auto}

// BenchmarkAdaptiveSelectVictims is the seed's scenario, 1000 candidates of
// 10 blocks freeing 100 blocks, for the adaptive strategies. Each call
// re-admits the previous call's victims, which the allocator did not free.
func BenchmarkAdaptiveSelectVictims(b *testing.B) {
	for _, n := range []int{1000, 10_000} {
		cands := seedScenario(n, 10, 42)
		for _, s := range adaptive {
			b.Run(fmt.Sprintf("strategy=%s/n=%d", s, n), selectLoop(s, cands, kvevict.WithCapacity(2*n)))
		}
	}
}

// accessTrace is a fixed-seed trace over 2n ids, half of them hot, so that
// a cache of n sees hits, misses and ghost hits.
func accessTrace(n int) []uint64 {
	rng := rand.New(rand.NewPCG(uint64(n), 3))
	ids := make([]uint64, 1<<16)
	for i := range ids {
		if rng.IntN(2) == 0 {
			ids[i] = rng.Uint64N(uint64(n) / 2)
		} else {
			ids[i] = rng.Uint64N(2 * uint64(n))
		}
	}
	return ids
}

// BenchmarkUpdateAccess measures UpdateAccess with n ids tracked (a cache
// of n, filled first), beside LRU's (which feeds only the metrics) and
// golang-lru's ARC doing the same accesses with Get and, on a miss, Add. A
// miss costs the history an eviction inside it, as Add does.
func BenchmarkUpdateAccess(b *testing.B) {
	for _, n := range []int{1000, 1 << 20} {
		ids := accessTrace(n)
		for _, s := range append([]kvevict.Strategy{kvevict.LRU}, adaptive...) {
			b.Run(fmt.Sprintf("strategy=%s/n=%d", s, n), func(b *testing.B) {
				var opts []kvevict.Option
				if s.Adaptive() { // LRU takes no capacity: it ranks the pool's own candidates
					opts = append(opts, kvevict.WithCapacity(n))
				}
				p, err := kvevict.New(s, opts...)
				if err != nil {
					b.Fatal(err)
				}
				for id := range uint64(n) {
					p.UpdateAccess(id)
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					p.UpdateAccess(ids[i&(len(ids)-1)])
					i++
				}
			})
		}
		b.Run(fmt.Sprintf("strategy=golang-lru-arc/n=%d", n), func(b *testing.B) {
			c, err := arclru.NewARC[uint64, struct{}](n)
			if err != nil {
				b.Fatal(err)
			}
			for id := range uint64(n) {
				c.Add(id, struct{}{})
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				id := ids[i&(len(ids)-1)]
				if _, ok := c.Get(id); !ok {
					c.Add(id, struct{}{})
				}
				i++
			}
		})
	}
}

// BenchmarkUpdateAccessHashes runs BenchmarkUpdateAccess's trace for Auto
// reported by block hash, sixteen blocks a call, as a pool whose
// candidates carry HeadHash reports a prompt: its cost per block
// (ns/block) beside UpdateAccess's per id.
func BenchmarkUpdateAccessHashes(b *testing.B) {
	const prompt = 16
	for _, n := range []int{1000, 1 << 20} {
		ids := accessTrace(n)
		b.Run(fmt.Sprintf("strategy=auto/n=%d", n), func(b *testing.B) {
			p, err := kvevict.New(kvevict.Auto, kvevict.WithCapacity(n))
			if err != nil {
				b.Fatal(err)
			}
			for id := range uint64(n) {
				p.UpdateAccessHashes([]uint64{id})
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				j := i * prompt & (len(ids) - 1)
				p.UpdateAccessHashes(ids[j : j+prompt])
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*prompt), "ns/block")
		})
	}
}
