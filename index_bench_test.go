package kvevict_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/sagellm/kvevict"
)

// BenchmarkIndex measures the Index side by side with golang-lru's simplelru
// at the same size, on LRU with one block per sequence:
//   - op=touch: a reuse of a random sequence (simplelru: Get);
//   - op=evict1, op=evict10: one eviction of 1 or 10 victims (simplelru: 1
//     or 10 RemoveOldest); when fewer than 10 sequences are left the loop
//     re-adds the evicted ones with the timer stopped;
//   - op=evict1+add, op=evict10+add: the same, each victim then added back
//     as the newest inside the timed loop, so the size stays n (simplelru:
//     RemoveOldest and Add);
//   - op=churn10: 10 victims, then 10 sequences of fresh IDs, each with a
//     block slice of its own holding a victim's block, as a server's new
//     turns come (simplelru: RemoveOldest and Add of the same values).
//
// impl=index times each eviction and keeps its metrics, eviction history
// included; impl=index-lean is the same index with WithTiming(false) and
// WithEvictionHistory(0), which still counts selections, victims and
// blocks; impl=index-untimed and impl=index-nohistory drop one of the two,
// so that the rows show what each costs. simplelru keeps no metrics and
// supports neither pinning, reference counts nor other strategies.
//
// impl=index/strategy=S runs the same operations on the index with its
// default metrics for every key strategy S. Its sequences have more fields
// for the keys to read: a sequence is created when added, accessed once
// then, of priority ID mod 3, and ID mod 4096 tokens long of 4096 at most.
// So MRU's, FILO's, LFU's and Predictive's keys, and most of QoS-aware's
// and SLRU's, arrive out of order, and the index keeps most of their
// sequences in its heap.
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
		lruCand := func(id uint64, tick int64) kvevict.Candidate {
			return kvevict.Candidate{ID: id, Blocks: blocks[id : id+1 : id+1], LastAccess: tick}
		}
		cand := func(id uint64, tick int64) kvevict.Candidate {
			return kvevict.Candidate{
				ID: id, Blocks: blocks[id : id+1 : id+1], LastAccess: tick, CreatedAt: tick, AccessCount: 1,
				Priority: kvevict.Priority(id % 3), SeqLen: int(id % 4096), MaxLen: 4096,
			}
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
		for _, op := range indexOps {
			for _, impl := range []struct {
				name string
				opts []kvevict.Option
			}{
				{"index", nil},
				{"index-lean", []kvevict.Option{kvevict.WithTiming(false), kvevict.WithEvictionHistory(0)}},
				{"index-untimed", []kvevict.Option{kvevict.WithTiming(false)}},
				{"index-nohistory", []kvevict.Option{kvevict.WithEvictionHistory(0)}},
			} {
				b.Run(fmt.Sprintf("impl=%s/op=%s/n=%d", impl.name, op, n), func(b *testing.B) {
					benchIndexOp(b, newFullIndex(b, kvevict.LRU, impl.opts, n, lruCand), op, ids, lruCand)
				})
			}
			b.Run(fmt.Sprintf("impl=simplelru/op=%s/n=%d", op, n), func(b *testing.B) {
				l := newLRU(b)
				i, fresh := 0, uint64(n)
				var evicted []uint64
				b.ReportAllocs()
				for b.Loop() {
					if op.victims == 0 {
						if _, ok := l.Get(ids[i&(len(ids)-1)]); !ok {
							b.Fatal("missing key")
						}
						i++
						continue
					}
					if !op.readd && l.Len() < op.victims { // refill, untimed
						b.StopTimer()
						for _, id := range evicted {
							l.Add(id, blocks[id:id+1:id+1])
						}
						evicted = evicted[:0]
						b.StartTimer()
					}
					for range op.victims {
						k, v, ok := l.RemoveOldest()
						if !ok {
							b.Fatal("empty")
						}
						switch {
						case op.fresh:
							l.Add(fresh, []int{v[0]})
							fresh++
						case op.readd:
							l.Add(k, v)
						default:
							evicted = append(evicted, k)
						}
					}
				}
			})
			for _, s := range kvevict.Strategies() {
				if s.Adaptive() {
					continue
				}
				b.Run(fmt.Sprintf("impl=index/strategy=%s/op=%s/n=%d", s, op, n), func(b *testing.B) {
					benchIndexOp(b, newFullIndex(b, s, nil, n, cand), op, ids, cand)
				})
			}
		}
	}
}

// indexOp is one of BenchmarkIndex's operations.
type indexOp struct {
	victims int  // 0: a touch
	readd   bool // re-add each victim as the newest, inside the timed loop
	fresh   bool // with readd: under a fresh ID, with a block slice of its own
}

var indexOps = []indexOp{{0, false, false}, {1, false, false}, {10, false, false}, {1, true, false}, {10, true, false}, {10, true, true}}

func (op indexOp) String() string {
	switch {
	case op.fresh:
		return fmt.Sprintf("churn%d", op.victims)
	case op.readd:
		return fmt.Sprintf("evict%d+add", op.victims)
	case op.victims > 0:
		return fmt.Sprintf("evict%d", op.victims)
	}
	return "touch"
}

// newFullIndex returns an index of strategy s holding sequences 0 to n-1,
// made by cand at ticks 0 to n-1.
func newFullIndex(b *testing.B, s kvevict.Strategy, opts []kvevict.Option, n int, cand func(uint64, int64) kvevict.Candidate) *kvevict.Index {
	x, err := kvevict.NewIndex(s, opts...)
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

// benchIndexOp times op on x, an index of n sequences at ticks below n
// made by cand: touches of the sequences in ids, in turn, or evictions.
func benchIndexOp(b *testing.B, x *kvevict.Index, op indexOp, ids []uint64, cand func(uint64, int64) kvevict.Candidate) {
	tick, i, fresh := int64(x.Len()), 0, uint64(x.Len())
	dst := make([]kvevict.Victim, 0, 10)
	var evicted []uint64
	b.ReportAllocs()
	for b.Loop() {
		tick++
		if op.victims == 0 {
			if err := x.Touch(ids[i&(len(ids)-1)], tick); err != nil {
				b.Fatal(err)
			}
			i++
			continue
		}
		if !op.readd && x.Len() < op.victims { // refill, untimed
			b.StopTimer()
			for _, id := range evicted {
				tick++
				if err := x.Add(cand(id, tick)); err != nil {
					b.Fatal(err)
				}
			}
			evicted = evicted[:0]
			b.StartTimer()
		}
		res, err := x.EvictAppend(dst[:0], op.victims)
		if err != nil {
			b.Fatal(err)
		}
		for _, v := range res.Victims {
			if !op.readd {
				evicted = append(evicted, v.ID)
				continue
			}
			var c kvevict.Candidate
			if op.fresh {
				c = cand(uint64(v.Blocks[0]), tick)
				c.ID, c.Blocks = fresh, []int{v.Blocks[0]}
				fresh++
			} else {
				c = cand(v.ID, tick)
			}
			if err := x.Add(c); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkIndexMemory reports the heap an Index holds per sequence at
// n = 1,000,000 one-block sequences, after one eviction, for a key
// strategy that keeps the run (LRU), one whose keys go to the heap (LFU)
// and the adaptive orders (ARC, Auto, with a capacity of n). The blocks
// themselves are the caller's and not counted. Run it with -benchtime 1x.
func BenchmarkIndexMemory(b *testing.B) {
	const n = 1_000_000
	blocks := make([]int, n)
	for i := range blocks {
		blocks[i] = i // a block of its own each: an Index frees no shared one
	}
	for _, s := range []kvevict.Strategy{kvevict.LRU, kvevict.LFU, kvevict.ARC, kvevict.Auto} {
		b.Run("strategy="+string(s), func(b *testing.B) {
			var opts []kvevict.Option
			if s.Adaptive() {
				opts = append(opts, kvevict.WithCapacity(n))
			}
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				x, err := kvevict.NewIndex(s, opts...)
				if err != nil {
					b.Fatal(err)
				}
				for i := range n {
					x.UpdateAccess(uint64(i))
					c := kvevict.Candidate{ID: uint64(i), Blocks: blocks[i : i+1 : i+1], LastAccess: int64(i), AccessCount: i % 7}
					if err := x.Add(c); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := x.Evict(1); err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/seq")
				runtime.KeepAlive(x)
			}
		})
	}
}

// BenchmarkIndexAutoTier is an Index of Auto as an exclusive tier below
// the GPU uses it (package tier), at n = 10,000 one-block sequences: per
// op, k held sequences requested and taken up (UpdateAccess, Remove), k
// new ones demoted into it (UpdateAccess is not called for them: a
// demotion is no request), then k evicted and k more demoted. Auto's
// history keeps a removed id as resident until it is the least recently
// requested, so it drops long-held sequences no request touched and admits
// them again at the next eviction, with their old LastAccess.
func BenchmarkIndexAutoTier(b *testing.B) {
	const n = 10_000
	for _, k := range []int{16, 256} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			x, err := kvevict.NewIndex(kvevict.Auto, kvevict.WithCapacity(n), kvevict.WithTiming(false), kvevict.WithEvictionHistory(0))
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var held []uint64         // the held ids
			pos := map[uint64]int{}   // where each is in held
			free := make([]int, 0, n) // blocks no sequence holds
			blocks := make([]int, n)
			for i := range blocks {
				blocks[i] = i
				free = append(free, n-1-i)
			}
			next, tick := uint64(0), int64(0)
			add := func() {
				block := free[len(free)-1]
				free = free[:len(free)-1]
				tick++
				if err := x.Add(kvevict.Candidate{ID: next, Blocks: blocks[block : block+1 : block+1], LastAccess: tick}); err != nil {
					b.Fatal(err)
				}
				pos[next] = len(held)
				held = append(held, next)
				next++
			}
			gone := func(id uint64, block int) {
				i := pos[id]
				last := held[len(held)-1]
				held[i], pos[last] = last, i
				held = held[:len(held)-1]
				delete(pos, id)
				free = append(free, block)
			}
			for range n {
				add()
			}
			var victims []kvevict.Victim
			for b.Loop() {
				for range k {
					id := held[rng.IntN(len(held))]
					x.UpdateAccess(id)
					c, _ := x.Get(id)
					x.Remove(id)
					gone(id, c.Blocks[0])
				}
				for range k {
					add()
				}
				res, err := x.EvictAppend(victims[:0], k)
				if err != nil {
					b.Fatal(err)
				}
				victims = res.Victims
				for _, v := range victims {
					gone(v.ID, v.Blocks[0])
				}
				for range k {
					add()
				}
			}
		})
	}
}

// BenchmarkIndexAdaptiveChurn measures an Index of each adaptive strategy,
// with a capacity of n, under a churn of fresh IDs at n one-block
// sequences: per op, a request for a random held sequence, then a request
// for a fresh ID (UpdateAccess), one eviction and the Add of the fresh ID
// holding the victim's block, as a server's new turn arrives. With
// hit=touch the held sequence's request is UpdateAccess and Touch, so that
// it becomes the newest; with hit=request it is UpdateAccess alone, and
// keeps its LastAccess, as a sequence does that a request finds but has
// not run yet: Auto files it among those requested as often, in the
// middle of their order.
func BenchmarkIndexAdaptiveChurn(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		for _, s := range []kvevict.Strategy{kvevict.ARC, kvevict.S3FIFO, kvevict.SIEVE, kvevict.Auto} {
			for _, touch := range []bool{true, false} {
				hit := "request"
				if touch {
					hit = "touch"
				}
				b.Run(fmt.Sprintf("strategy=%s/hit=%s/n=%d", s, hit, n), func(b *testing.B) {
					x, err := kvevict.NewIndex(s, kvevict.WithCapacity(n))
					if err != nil {
						b.Fatal(err)
					}
					blocks := make([]int, n)
					owner := make([]uint64, n) // the ID holding each block
					for i := range n {
						blocks[i], owner[i] = i, uint64(i)
						x.UpdateAccess(uint64(i))
						if err := x.Add(kvevict.Candidate{ID: uint64(i), Blocks: blocks[i : i+1 : i+1], LastAccess: int64(i)}); err != nil {
							b.Fatal(err)
						}
					}
					hits := make([]int, 1<<16)
					rng := rand.New(rand.NewPCG(7, 8))
					for i := range hits {
						hits[i] = rng.IntN(n)
					}
					tick, fresh, i := int64(n), uint64(n), 0
					dst := make([]kvevict.Victim, 0, 1)
					b.ReportAllocs()
					for b.Loop() {
						tick++
						id := owner[hits[i&(len(hits)-1)]]
						i++
						x.UpdateAccess(id)
						if touch {
							if err := x.Touch(id, tick); err != nil {
								b.Fatal(err)
							}
						}
						x.UpdateAccess(fresh)
						res, err := x.EvictAppend(dst[:0], 1)
						if err != nil {
							b.Fatal(err)
						}
						block := res.Victims[0].Blocks[0]
						if err := x.Add(kvevict.Candidate{ID: fresh, Blocks: []int{block}, LastAccess: tick}); err != nil {
							b.Fatal(err)
						}
						owner[block] = fresh
						fresh++
					}
				})
			}
		}
	}
}
