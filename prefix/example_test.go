package prefix_test

import (
	"errors"
	"fmt"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/prefix"
)

// A pool of six blocks serves requests: Admit matches each request's
// prefix, locks it while it evicts leaves to make room, inserts the rest
// and unlocks. The events show what left the tree.
func Example() {
	const capacity = 6 // blocks
	tree, err := prefix.New(kvevict.LRU, capacity, prefix.WithEvents(func(e prefix.Event) {
		if e.Kind == prefix.Removed {
			fmt.Println("  evicted", e.Hashes)
		}
	}))
	if err != nil {
		panic(err)
	}
	serve := func(tick int64, hashes ...uint64) {
		hit, err := tree.Admit(hashes, prefix.Access{Tick: tick})
		if err != nil {
			panic(err)
		}
		fmt.Printf("t=%d: %d of %d blocks hit, %d resident\n", tick, hit, len(hashes), tree.Len())
	}
	serve(1, 10, 11, 12, 13) // a conversation's first turn
	serve(2, 20, 21)         // another conversation
	serve(3, 10, 11, 12, 13, 14)
	serve(4, 30, 31, 32)
	serve(5, 40, 41, 42, 43, 44, 45, 46) // longer than the pool: cut short
	// Output:
	// t=1: 0 of 4 blocks hit, 4 resident
	// t=2: 0 of 2 blocks hit, 6 resident
	//   evicted [21]
	// t=3: 4 of 5 blocks hit, 6 resident
	//   evicted [20 14 13]
	// t=4: 0 of 3 blocks hit, 6 resident
	//   evicted [12 11 10 32 31 30]
	// t=5: 0 of 7 blocks hit, 6 resident
}

// Evict sheds an idle conversation from its deepest block up, keeping the
// prefix its next turn will match, and never touches a locked path.
func ExampleTree_Evict() {
	tree, _ := prefix.New(kvevict.QoSAware, 100)
	tree.Insert([]uint64{1, 2, 3}, prefix.Access{Tick: 1, Priority: kvevict.PriorityHigh})
	tree.Insert([]uint64{1, 4, 5}, prefix.Access{Tick: 2, Priority: kvevict.PriorityLow})
	tree.Insert([]uint64{6, 7}, prefix.Access{Tick: 3, Priority: kvevict.PriorityLow})
	tree.Lock([]uint64{6, 7}) // a running request

	evicted, _ := tree.Evict(3)
	fmt.Println("evicted", evicted)
	fmt.Println("evictable", tree.EvictableBlocks(), "protected", tree.Protected())

	_, err := tree.Evict(4)
	fmt.Println(errors.Is(err, kvevict.ErrInsufficientBlocks), err)
	// Output:
	// evicted [5 4 3]
	// evictable 2 protected 2
	// true kvevict: insufficient evictable blocks: need 4, 2 available
}

// WithEvents keeps an external index, such as a KV-aware router's map of
// which blocks a server holds, in step with the tree.
func ExampleWithEvents() {
	index := make(map[uint64]bool) // the router's view of this server
	tree, _ := prefix.New(kvevict.LRU, 100, prefix.WithEvents(func(e prefix.Event) {
		fmt.Println(e.Kind, e.Hashes)
		for _, h := range e.Hashes {
			index[h] = e.Kind == prefix.Stored
		}
	}))
	tree.Insert([]uint64{1, 2, 3}, prefix.Access{Tick: 1})
	tree.Insert([]uint64{1, 2, 4}, prefix.Access{Tick: 2})
	tree.Evict(2)
	fmt.Println(index)
	// Output:
	// stored [1 2 3]
	// stored [4]
	// removed [3 4]
	// map[1:true 2:true 3:false 4:false]
}
