package prefix

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/internal/rank"
)

// BenchmarkRebuildHeap measures what Evict avoids: collecting the
// unreferenced leaves of a tree of n blocks into a new heap, as a prefix
// cache that rebuilds its eviction heap on every call pays before it frees
// the first block. Compare with BenchmarkEvict, which keeps the heap.
func BenchmarkRebuildHeap(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			tr, err := New(kvevict.LRU, roomy)
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(42, 7))
			next := uint64(1 << 20)
			for tick := int64(0); tr.Len() < n; tick++ {
				h := make([]uint64, 16)
				for i := range 4 {
					h[i] = uint64(rng.IntN(64)*4 + i)
				}
				for i := 4; i < len(h); i++ {
					h[i] = next
					next++
				}
				if _, err := tr.Insert(h, Access{Tick: tick}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				var h rank.Heap
				for _, n := range tr.children {
					if n.ref == 0 && n.children == 0 {
						h.Push(entry(n, tr.keys(n)[0]))
					}
				}
			}
			check(b, tr)
		})
	}
}
