package kvevict_test

import (
	"errors"
	"fmt"

	"github.com/sagellm/kvevict"
)

// An allocator keeps its sequences in an Index: it adds them as they get
// blocks, touches them on reuse, references them while a request runs, and
// evicts when it needs blocks, without rebuilding a candidate slice.
func ExampleIndex() {
	idx, err := kvevict.NewIndex(kvevict.LRU)
	if err != nil {
		panic(err)
	}
	for id := uint64(1); id <= 4; id++ {
		_ = idx.Add(kvevict.Candidate{ID: id, Blocks: []int{int(id) * 10, int(id)*10 + 1}, LastAccess: int64(id)})
	}
	_ = idx.Touch(1, 5) // sequence 1 is reused: now the most recent
	_ = idx.Lock(2)     // a running request holds sequence 2
	res, err := idx.Evict(3)
	if err != nil {
		panic(err)
	}
	for _, v := range res.Victims {
		fmt.Println("evict", v.ID, v.Blocks)
	}
	fmt.Println("left", idx.Len(), "evictable blocks", idx.EvictableBlocks())
	_, err = idx.Evict(5)
	fmt.Println(errors.Is(err, kvevict.ErrInsufficientBlocks), err)
	// Output:
	// evict 3 [30 31]
	// evict 4 [40 41]
	// left 2 evictable blocks 2
	// true kvevict: insufficient evictable blocks: need 5, 2 available
}

// EvictAppend reuses the caller's slice, so a steady-state eviction
// allocates nothing. A candidate that allows partial eviction loses only
// the tail it must and stays in the index with the head of its blocks.
func ExampleIndex_EvictAppend() {
	idx, _ := kvevict.NewIndex(kvevict.FIFO)
	_ = idx.Add(kvevict.Candidate{ID: 7, Blocks: []int{1, 2, 3, 4}, CreatedAt: 1, AllowPartial: true})
	_ = idx.Add(kvevict.Candidate{ID: 8, Blocks: []int{5, 6}, CreatedAt: 2})
	buf := make([]kvevict.Victim, 0, 16)
	res, _ := idx.EvictAppend(buf[:0], 3)
	fmt.Println(res.Victims, res.FreedBlocks)
	c, _ := idx.Get(7)
	fmt.Println(c.Blocks, idx.Metrics().PartialEvictions)
	// Output:
	// [{7 [2 3 4]}] 3
	// [1] 1
}

// WithSampling trades exactness for speed on the slice API: each victim is
// the best of a small pool fed by k random draws, so a selection among a
// million candidates costs microseconds.
func ExampleWithSampling() {
	cands := make([]kvevict.Candidate, 100_000)
	for i := range cands {
		cands[i] = kvevict.Candidate{ID: uint64(i), Blocks: []int{i}, LastAccess: int64(i)}
	}
	p, err := kvevict.New(kvevict.LRU, kvevict.WithSampling(5))
	if err != nil {
		panic(err)
	}
	res, err := p.SelectVictims(cands, 10)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(res.Victims), res.FreedBlocks)
	// Output:
	// 10 10
}

// An Index of an adaptive strategy hears every request through
// UpdateAccess, as a Policy does, before the Evict that makes room for it.
// ARC keeps sequence 1, requested twice, and evicts 2, requested once,
// though 1 was touched before 2 arrived: LRU would evict 1.
func ExampleIndex_UpdateAccess() {
	for _, s := range []kvevict.Strategy{kvevict.ARC, kvevict.LRU} {
		idx, err := kvevict.NewIndex(s)
		if err != nil {
			panic(err)
		}
		request := func(id uint64, tick int64) {
			idx.UpdateAccess(id)
			if idx.Touch(id, tick) != nil { // not held: it gets a block
				_ = idx.Add(kvevict.Candidate{ID: id, Blocks: []int{int(id)}, LastAccess: tick})
			}
		}
		request(1, 1)
		request(1, 2)
		request(2, 3)
		request(3, 4)
		res, _ := idx.Evict(1)
		fmt.Println(s, "evicts", res.Victims[0].ID)
	}
	// Output:
	// arc evicts 2
	// lru evicts 1
}
