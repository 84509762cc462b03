package kvevict_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/sagellm/kvevict"
)

// BenchmarkIndex measures the Index side by side with golang-lru's simplelru
// at the same size, on LRU with one block per sequence:
//   - op=touch: a reuse of a random sequence (simplelru: Get);
//   - op=evict1+add: evict one victim and add it back as the newest, so the
//     size stays n (simplelru: RemoveOldest and Add);
//   - op=evict10+add: one eviction of 10 victims and their 10 re-adds
//     (simplelru: 10 RemoveOldest and 10 Add).
//
// The Index also times each eviction and keeps its metrics; simplelru does
// neither, nor pinning, reference counts or other strategies.
func BenchmarkIndex(b *testing.B) {
	for _, n := range []int{1000, 1_000_000} {
		blocks := make([]int, n)
		for i := range blocks {
			blocks[i] = i
		}
		ids := make([]uint64, 1<<16)
		rng := rand.New(rand.NewPCG(5, 6))
		for i := range ids {
			ids[i] = uint64(rng.IntN(n))
		}
		cand := func(id uint64, tick int64) kvevict.Candidate {
			return kvevict.Candidate{ID: id, Blocks: blocks[id : id+1 : id+1], LastAccess: tick}
		}
		newIndex := func(b *testing.B) *kvevict.Index {
			x, err := kvevict.NewIndex(kvevict.LRU)
			if err != nil {
				b.Fatal(err)
			}
			for i := range n {
				if err := x.Add(cand(uint64(i), int64(i))); err != nil {
					b.Fatal(err)
				}
			}
			return x
		}
		newLRU := func(b *testing.B) *simplelru.LRU[uint64, []int] {
			l, err := simplelru.NewLRU[uint64, []int](n, nil)
			if err != nil {
				b.Fatal(err)
			}
			for i := range n {
				l.Add(uint64(i), blocks[i:i+1:i+1])
			}
			return l
		}
		for _, victims := range []int{0, 1, 10} {
			op := "touch"
			if victims > 0 {
				op = fmt.Sprintf("evict%d+add", victims)
			}
			b.Run(fmt.Sprintf("impl=index/op=%s/n=%d", op, n), func(b *testing.B) {
				x := newIndex(b)
				tick, i := int64(n), 0
				dst := make([]kvevict.Victim, 0, 10)
				b.ReportAllocs()
				for b.Loop() {
					tick++
					if victims == 0 {
						if err := x.Touch(ids[i&(len(ids)-1)], tick); err != nil {
							b.Fatal(err)
						}
						i++
						continue
					}
					res, err := x.EvictAppend(dst[:0], victims)
					if err != nil {
						b.Fatal(err)
					}
					for _, v := range res.Victims {
						if err := x.Add(cand(v.ID, tick)); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
			b.Run(fmt.Sprintf("impl=simplelru/op=%s/n=%d", op, n), func(b *testing.B) {
				l := newLRU(b)
				i := 0
				b.ReportAllocs()
				for b.Loop() {
					if victims == 0 {
						if _, ok := l.Get(ids[i&(len(ids)-1)]); !ok {
							b.Fatal("missing key")
						}
						i++
						continue
					}
					for range victims {
						k, v, ok := l.RemoveOldest()
						if !ok {
							b.Fatal("empty")
						}
						l.Add(k, v)
					}
				}
			})
		}
	}
}
