package kvevict_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/sagellm/kvevict"
)

// An allocator that needs three blocks asks the policy which sequences to
// evict. Sequence 3 is the least recently used but a running request holds
// it, so it is skipped.
func Example() {
	policy, err := kvevict.New(kvevict.LRU)
	if err != nil {
		log.Fatal(err)
	}
	candidates := []kvevict.Candidate{
		{ID: 1, Blocks: []int{10, 11}, LastAccess: 300},
		{ID: 2, Blocks: []int{12, 13}, LastAccess: 200},
		{ID: 3, Blocks: []int{14}, LastAccess: 100, RefCount: 1},
		{ID: 4, Blocks: []int{15}, LastAccess: 250},
	}
	res, err := policy.SelectVictims(candidates, 3)
	if err != nil {
		log.Fatal(err)
	}
	for _, v := range res.Victims {
		fmt.Printf("evict sequence %d, free blocks %v\n", v.ID, v.Blocks)
	}
	fmt.Println("freed", res.FreedBlocks)
	// Output:
	// evict sequence 2, free blocks [12 13]
	// evict sequence 4, free blocks [15]
	// freed 3
}

// Strategies come from configuration by name.
func ExampleParseStrategy() {
	s, err := kvevict.ParseStrategy("QoS_Aware")
	fmt.Println(s, err)
	_, err = kvevict.ParseStrategy("random")
	fmt.Println(errors.Is(err, kvevict.ErrUnknownStrategy))
	// Output:
	// qos_aware <nil>
	// true
}

// A sequence that allows partial eviction loses only the tail it must: the
// head, the prefix the next turn will match, stays cached.
func Example_tailTrimming() {
	policy, _ := kvevict.New(kvevict.LRU)
	session := kvevict.Candidate{ID: 7, Blocks: []int{1, 2, 3, 4, 5, 6}, AllowPartial: true}
	res, _ := policy.SelectVictims([]kvevict.Candidate{session}, 2)
	fmt.Println(res.Victims[0].Blocks, res.FreedBlocks)
	// Output: [5 6] 2
}

// When pinned and referenced sequences hold too much, nothing is evicted
// and the error says how much could have been.
func ExampleInsufficientBlocksError() {
	policy, _ := kvevict.New(kvevict.FIFO)
	_, err := policy.SelectVictims([]kvevict.Candidate{
		{ID: 1, Blocks: []int{1, 2}},
		{ID: 2, Blocks: []int{3, 4}, Pinned: true},
	}, 3)
	var ie *kvevict.InsufficientBlocksError
	if errors.As(err, &ie) {
		fmt.Printf("need %d, only %d evictable\n", ie.Required, ie.Available)
	}
	fmt.Println(errors.Is(err, kvevict.ErrInsufficientBlocks))
	// Output:
	// need 3, only 2 evictable
	// true
}

// UpdateAccess on every reuse lets the policy see which evictions had to be
// undone by a re-prefill.
func ExamplePolicy_Metrics() {
	policy, _ := kvevict.New(kvevict.LRU)
	cands := []kvevict.Candidate{
		{ID: 1, Blocks: []int{1}, LastAccess: 1},
		{ID: 2, Blocks: []int{2}, LastAccess: 2},
	}
	if _, err := policy.SelectVictims(cands, 2); err != nil {
		log.Fatal(err)
	}
	policy.UpdateAccess(1) // sequence 1 came back: its prefix is recomputed
	m := policy.Metrics()
	fmt.Printf("evictions %d, re-prefills %d, rate %.2f, fairness %.2f\n",
		m.TotalEvictions, m.RePrefills, m.RePrefillRate, m.FairnessScore)
	// Output: evictions 2, re-prefills 1, rate 0.50, fairness 1.00
}
