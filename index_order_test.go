package kvevict

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/btree"
)

// btreeIndex is the alternative to the Index's order that BenchmarkIndexOrder
// measures: a slab and an ID map (a Go map, as the Index had when the two
// were first compared), with the evictable candidates in a google/btree
// BTreeG ordered by (key, ID). It does only what the benchmark
// needs: a touch re-ranks one candidate, an eviction takes the minimum.
type btreeIndex struct {
	params keyParams
	nodes  []Candidate
	free   []int32
	slots  map[uint64]int32
	tree   *btree.BTreeG[entry]
}

func newBtreeIndex(s Strategy) *btreeIndex {
	info, cfg, _ := resolve(s, nil, forIndex)
	return &btreeIndex{
		params: newKeyParams(info.kind, &cfg),
		slots:  make(map[uint64]int32),
		tree:   btree.NewG(32, func(a, b entry) bool { return less(&a, &b) }),
	}
}

func (x *btreeIndex) entryOf(slot int32) entry {
	c := &x.nodes[slot]
	return entry{Key: x.params.keyOf(c), id: c.ID, idx: slot, blocks: int32(len(c.Blocks))}
}

func (x *btreeIndex) add(c Candidate) {
	var slot int32
	if n := len(x.free); n > 0 {
		slot = x.free[n-1]
		x.free = x.free[:n-1]
		x.nodes[slot] = c
	} else {
		slot = int32(len(x.nodes))
		x.nodes = append(x.nodes, c)
	}
	x.slots[c.ID] = slot
	x.tree.ReplaceOrInsert(x.entryOf(slot))
}

func (x *btreeIndex) touch(id uint64, tick int64) {
	slot, ok := x.slots[id]
	if !ok {
		return
	}
	x.tree.Delete(x.entryOf(slot))
	x.nodes[slot].LastAccess = tick
	x.nodes[slot].AccessCount++
	x.tree.ReplaceOrInsert(x.entryOf(slot))
}

func (x *btreeIndex) evictOne() Candidate {
	e, _ := x.tree.DeleteMin()
	c := x.nodes[e.idx]
	delete(x.slots, c.ID)
	x.nodes[e.idx] = Candidate{}
	x.free = append(x.free, e.idx)
	return c
}

// BenchmarkIndexOrder compares the Index with a B-tree behind a slab and an
// ID map, on LRU: a touch of a random sequence, and the eviction of the
// least recently used one followed by its re-adding (so that n stays
// constant). On LRU with growing ticks the Index keeps every candidate in
// its run, not its heap; the heap-against-B-tree figures in Index's doc
// comment predate the run. The Index also keeps metrics and times each
// eviction, which the B-tree side does not.
func BenchmarkIndexOrder(b *testing.B) {
	for _, n := range []int{1000, 1_000_000} {
		blocks := make([]int, n)
		ids := make([]uint64, 1<<16)
		rng := rand.New(rand.NewPCG(3, 4))
		for i := range ids {
			ids[i] = uint64(rng.IntN(n))
		}
		newCand := func(i int, tick int64) Candidate {
			return Candidate{ID: uint64(i), Blocks: blocks[i : i+1 : i+1], LastAccess: tick}
		}
		b.Run(fmt.Sprintf("structure=index/op=touch/n=%d", n), func(b *testing.B) {
			x, _ := NewIndex(LRU)
			for i := range n {
				_ = x.Add(newCand(i, int64(i)))
			}
			tick, i := int64(n), 0
			b.ReportAllocs()
			for b.Loop() {
				tick++
				_ = x.Touch(ids[i&(len(ids)-1)], tick)
				i++
			}
		})
		b.Run(fmt.Sprintf("structure=btree/op=touch/n=%d", n), func(b *testing.B) {
			x := newBtreeIndex(LRU)
			for i := range n {
				x.add(newCand(i, int64(i)))
			}
			tick, i := int64(n), 0
			b.ReportAllocs()
			for b.Loop() {
				tick++
				x.touch(ids[i&(len(ids)-1)], tick)
				i++
			}
		})
		b.Run(fmt.Sprintf("structure=index/op=evict+add/n=%d", n), func(b *testing.B) {
			x, _ := NewIndex(LRU)
			for i := range n {
				_ = x.Add(newCand(i, int64(i)))
			}
			tick := int64(n)
			dst := make([]Victim, 0, 1)
			b.ReportAllocs()
			for b.Loop() {
				res, _ := x.EvictAppend(dst[:0], 1)
				tick++
				_ = x.Add(newCand(int(res.Victims[0].ID), tick))
			}
		})
		b.Run(fmt.Sprintf("structure=btree/op=evict+add/n=%d", n), func(b *testing.B) {
			x := newBtreeIndex(LRU)
			for i := range n {
				x.add(newCand(i, int64(i)))
			}
			tick := int64(n)
			b.ReportAllocs()
			for b.Loop() {
				c := x.evictOne()
				tick++
				x.add(newCand(int(c.ID), tick))
			}
		})
	}
}
