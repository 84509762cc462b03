package prefix_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/prefix"
)

// Workload shape: requests of pathLen blocks whose first headLen blocks are
// one of heads shared prefixes (system prompts) and the rest are new.
const (
	pathLen = 16
	headLen = 4
	heads   = 64
)

// drift is how far, as a fraction 1/drift of n, a benchmark lets the tree's
// size move before untimed work brings it back.
const drift = 20

// workload generates requests with fixed-seed randomness.
type workload struct {
	rng  *rand.Rand
	next uint64 // next fresh block hash
	tick int64
}

func newWorkload() *workload {
	return &workload{rng: rand.New(rand.NewPCG(42, 7)), next: heads * headLen}
}

// request returns a new request's hashes: a shared head, then fresh blocks.
func (w *workload) request() []uint64 {
	h := make([]uint64, pathLen)
	head := uint64(w.rng.IntN(heads))
	for i := range headLen {
		h[i] = head*headLen + uint64(i)
	}
	for i := headLen; i < pathLen; i++ {
		h[i] = w.next
		w.next++
	}
	return h
}

func (w *workload) access() prefix.Access {
	w.tick++
	return prefix.Access{Tick: w.tick, Priority: kvevict.Priority(w.rng.IntN(3))}
}

// build returns a tree ranked by s of about n blocks and the requests that
// filled it, about a tenth of them locked as if running, for a pool of n
// blocks (which Auto's miniature caches simulate).
func build(b *testing.B, s kvevict.Strategy, n int) (*prefix.Tree, *workload, [][]uint64) {
	b.Helper()
	tr, err := prefix.New(s, n)
	if err != nil {
		b.Fatal(err)
	}
	w := newWorkload()
	var reqs [][]uint64
	for tr.Len() < n {
		h := w.request()
		if _, err := tr.Insert(h, w.access()); err != nil {
			b.Fatal(err)
		}
		if w.rng.IntN(10) == 0 {
			if err := tr.Lock(h); err != nil {
				b.Fatal(err)
			}
		}
		reqs = append(reqs, h)
	}
	return tr, w, reqs
}

var sizes = []int{10_000, 1_000_000}

// benchStrategies are a key strategy and Auto, whose tree keeps a heap per
// weight it simulates and feeds its miniature caches.
var benchStrategies = []kvevict.Strategy{kvevict.LRU, kvevict.Auto}

// eachTree runs bench as a sub-benchmark for every strategy of
// benchStrategies and size of sizes, on a tree that build made, named by
// both and by suffix.
func eachTree(b *testing.B, suffix string, bench func(b *testing.B, tr *prefix.Tree, w *workload, reqs [][]uint64, n int)) {
	for _, s := range benchStrategies {
		for _, n := range sizes {
			b.Run(fmt.Sprintf("strategy=%s/n=%d%s", s, n, suffix), func(b *testing.B) {
				tr, w, reqs := build(b, s, n)
				b.ReportAllocs()
				bench(b, tr, w, reqs, n)
			})
		}
	}
}

// BenchmarkInsert inserts a request of 16 blocks, 12 of them new. When the
// tree has grown by 5%, an untimed Evict brings it back to its size.
func BenchmarkInsert(b *testing.B) {
	eachTree(b, "", func(b *testing.B, tr *prefix.Tree, w *workload, _ [][]uint64, n int) {
		for b.Loop() {
			if _, err := tr.Insert(w.request(), w.access()); err != nil {
				b.Fatal(err)
			}
			if tr.Len() > n+n/drift {
				b.StopTimer()
				if _, err := tr.Evict(tr.Len() - n); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		}
	})
}

// BenchmarkMatch matches a resident request of 16 blocks, recording a hit
// on each.
func BenchmarkMatch(b *testing.B) {
	eachTree(b, "", func(b *testing.B, tr *prefix.Tree, w *workload, reqs [][]uint64, _ int) {
		for b.Loop() {
			h := reqs[w.rng.IntN(len(reqs))]
			if m, err := tr.Match(h, w.access()); err != nil || m != len(h) {
				b.Fatalf("Match = %d, %v; want %d", m, err, len(h))
			}
		}
	})
}

// BenchmarkEvict evicts k blocks, leaf-first, from a tree of n. When the
// tree has shrunk by 5%, untimed inserts bring it back to its size. The heap is
// kept between calls, so the cost is O(k log n) with no first-call rebuild.
func BenchmarkEvict(b *testing.B) {
	for _, k := range []int{1, 64} {
		eachTree(b, fmt.Sprintf("/k=%d", k), func(b *testing.B, tr *prefix.Tree, w *workload, _ [][]uint64, n int) {
			for b.Loop() {
				if _, err := tr.Evict(k); err != nil {
					b.Fatal(err)
				}
				if tr.Len() < n-n/drift {
					b.StopTimer()
					for tr.Len() < n {
						if _, err := tr.Insert(w.request(), w.access()); err != nil {
							b.Fatal(err)
						}
					}
					b.StartTimer()
				}
			}
		})
	}
}

// BenchmarkMemory reports the heap a tree of n blocks holds, per block
// (bytes/block), filled by the requests build makes: what docs/prefix.md
// states. Each iteration builds one tree.
func BenchmarkMemory(b *testing.B) {
	for _, s := range benchStrategies {
		b.Run(fmt.Sprintf("strategy=%s/n=%d", s, 1<<20), func(b *testing.B) {
			const n = 1 << 20
			var perBlock float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				tr, _, _ := build(b, s, n)
				runtime.GC()
				runtime.ReadMemStats(&after)
				perBlock = float64(after.HeapAlloc-before.HeapAlloc) / float64(tr.Len())
				runtime.KeepAlive(tr)
			}
			b.ReportMetric(perBlock, "bytes/block")
		})
	}
}
