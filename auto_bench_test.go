package kvevict_test

import (
	"fmt"
	"testing"

	"github.com/sagellm/kvevict"
)

// BenchmarkAutoUpdateAccess measures UpdateAccess for Auto beside LRU, a
// key strategy whose UpdateAccess feeds only the metrics, with n ids
// tracked first, on the fixed-seed trace of BenchmarkUpdateAccess.
func BenchmarkAutoUpdateAccess(b *testing.B) {
	for _, n := range []int{1000, 1 << 20} {
		ids := accessTrace(n)
		for _, s := range []kvevict.Strategy{kvevict.LRU, kvevict.Auto} {
			b.Run(fmt.Sprintf("strategy=%s/n=%d", s, n), func(b *testing.B) {
				p, err := kvevict.New(s, kvevict.WithCapacity(n))
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
	}
}

// BenchmarkAutoSelectVictims is the seed's scenario, n candidates of 10
// blocks freeing 100 blocks, for Auto beside LRU. Each candidate was
// requested once or more before, so that Auto's scores differ.
func BenchmarkAutoSelectVictims(b *testing.B) {
	for _, n := range []int{1000, 10_000} {
		cands := seedScenario(n, 10, 42)
		for _, s := range []kvevict.Strategy{kvevict.LRU, kvevict.Auto} {
			b.Run(fmt.Sprintf("strategy=%s/n=%d", s, n), func(b *testing.B) {
				p, err := kvevict.New(s, kvevict.WithCapacity(2*n))
				if err != nil {
					b.Fatal(err)
				}
				for i := range cands {
					for range 1 + cands[i].AccessCount {
						p.UpdateAccess(cands[i].ID)
					}
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.SelectVictims(cands, 100); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
