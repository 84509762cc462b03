package kvevict

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sagellm/kvevict/internal/rank"
)

// heapStream returns n entries of 1 to 19 blocks (10 on average, as the
// seed scenario's candidates hold) in the given order of keys: random, or
// descending (every entry enters the heap, as newest-first under LRU).
func heapStream(n int, order string) []entry {
	rng := rand.New(rand.NewPCG(42, uint64(n)))
	s := make([]entry, n)
	for i := range s {
		k := rank.Key{Major: rng.Int64N(1 << 40)}
		if order == "descending" {
			k.Major = int64(n - i)
		}
		s[i] = entry{Key: k, ID: uint64(i) + 1, Slot: int32(i), Blocks: 1 + rng.Int32N(19)}
	}
	return s
}

// keepWithBuffer is the heap phase of selector.offer, without its budget,
// on buffer.go's max-heap: it keeps in h the smallest entries of stream
// that cover need, and returns h.
func keepWithBuffer(h []entry, stream []entry, need int) []entry {
	h, sum := h[:0], 0
	var bound entry // the largest entry kept, once they cover need
	for i := range stream {
		e := &stream[i]
		if sum >= need && !less(e, &bound) {
			continue
		}
		if sum >= need && sum-int(h[0].Blocks)+int(e.Blocks) >= need {
			sum += int(e.Blocks) - int(h[0].Blocks)
			h[0] = *e
			siftDown(h, 0)
		} else {
			h = push(h, *e)
			sum += int(e.Blocks)
		}
		for sum-int(h[0].Blocks) >= need {
			sum -= int(h[0].Blocks)
			h = pop(h)
		}
		bound = h[0]
	}
	return h
}

// negated reverses e's place in the (key, ID) order, so that rank.Heap,
// a min-heap, serves as a max-heap.
func negated(e entry) entry {
	e.Major, e.Minor, e.ID = ^e.Major, ^e.Minor, ^e.ID
	return e
}

// keepWithRank is keepWithBuffer on rank.Heap as it is, with negated
// entries. h must be empty; it is left holding the entries kept, negated.
func keepWithRank(h *rank.Heap, stream []entry, need int) {
	sum := 0
	var bound entry // the largest entry kept, once they cover need
	for i := range stream {
		if sum >= need && !less(&stream[i], &bound) {
			continue
		}
		e := negated(stream[i])
		if sum >= need && sum-int(h.Min().Blocks)+int(e.Blocks) >= need {
			top := h.Min()
			sum += int(e.Blocks) - int(top.Blocks)
			h.Replace(top.Slot, e)
		} else {
			h.Push(e)
			sum += int(e.Blocks)
		}
		for top := h.Min(); sum-int(top.Blocks) >= need; top = h.Min() {
			sum -= int(top.Blocks)
			h.Remove(top.Slot)
		}
		bound = negated(*h.Min())
	}
}

// victimsFromRank empties h, which keepWithRank filled, into out: the
// entries it kept, un-negated, smallest (key, ID) first. Removing every
// entry is both how a rank.Heap is emptied for reuse (each slot's position
// must be cleared) and a heap sort of the victims.
func victimsFromRank(h *rank.Heap, out []entry) []entry {
	for h.Len() > 0 {
		top := h.Min()
		out = append(out, negated(*top))
		h.Remove(top.Slot)
	}
	slices.Reverse(out)
	return out
}

// TestSelectionHeapsAgree: buffer.go's heap and rank.Heap with negated
// entries keep the same entries, the smallest that cover the need.
func TestSelectionHeapsAgree(t *testing.T) {
	for _, order := range []string{"random", "descending"} {
		for _, n := range []int{1, 10, 1000, 10_000} {
			for _, need := range []int{1, 100, 10_000} {
				stream := heapStream(n, order)
				total := 0
				for _, e := range stream {
					total += int(e.Blocks)
				}
				if total < need {
					continue
				}
				got := keepWithBuffer(nil, stream, need)
				sortEntries(got)
				var h rank.Heap
				keepWithRank(&h, stream, need)
				if err := h.Check(); err != nil {
					t.Fatal(err)
				}
				viaRank := victimsFromRank(&h, nil)
				want := slices.Clone(stream)
				sortEntries(want)
				for m, sum := 0, 0; m < len(want); m++ {
					if sum += int(want[m].Blocks); sum >= need {
						want = want[:m+1]
						break
					}
				}
				if !slices.Equal(got, want) || !slices.Equal(viaRank, want) {
					t.Errorf("order=%s n=%d need=%d: buffer kept %d entries, rank.Heap %d, want %d",
						order, n, need, len(got), len(viaRank), len(want))
				}
			}
		}
	}
}

// BenchmarkSelectionHeap is the selection's heap phase (selector.offer
// without its budget) over a stream of n entries of 10 blocks on average,
// keeping the smallest that cover the blocks of the given victims and
// returning them in (key, ID) order, on buffer.go's max-heap (sorted by
// sortEntries, as selector.victims does) and on rank.Heap as it is, with
// negated keys (emptied in order by removing its top). Each iteration runs
// both, first one then the other in turn, so that the two see the same
// load; it reports each one's time per run and their ratio.
func BenchmarkSelectionHeap(b *testing.B) {
	for _, order := range []string{"random", "descending"} {
		for _, size := range []struct{ n, victims int }{{1000, 10}, {100_000, 10}, {100_000, 1000}} {
			stream := heapStream(size.n, order)
			need := 10 * size.victims
			b.Run(fmt.Sprintf("order=%s/n=%d/victims=%d", order, size.n, size.victims), func(b *testing.B) {
				var buf, out []entry
				var h rank.Heap
				withBuffer := func() {
					buf = keepWithBuffer(buf, stream, need)
					sortEntries(buf)
				}
				withRank := func() {
					keepWithRank(&h, stream, need)
					out = victimsFromRank(&h, out[:0])
				}
				var onBuffer, onRank time.Duration
				first := false
				for b.Loop() {
					first = !first
					t0 := time.Now()
					if first {
						withBuffer()
					} else {
						withRank()
					}
					t1 := time.Now()
					if first {
						withRank()
					} else {
						withBuffer()
					}
					t2 := time.Now()
					if first {
						onBuffer, onRank = onBuffer+t1.Sub(t0), onRank+t2.Sub(t1)
					} else {
						onRank, onBuffer = onRank+t1.Sub(t0), onBuffer+t2.Sub(t1)
					}
				}
				b.ReportMetric(float64(onBuffer.Nanoseconds())/float64(b.N), "buffer-ns/op")
				b.ReportMetric(float64(onRank.Nanoseconds())/float64(b.N), "rank-ns/op")
				b.ReportMetric(float64(onRank)/float64(onBuffer), "rank/buffer")
			})
		}
	}
}
