package tier_test

import (
	"fmt"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/tier"
)

// A GPU of 2 blocks over a host tier of 4, written back and exclusive: the
// GPU's victims go down to the host, and a later request loads them back.
func ExampleHierarchy() {
	h, err := tier.New(tier.Config{
		Levels: []tier.Level{
			{Medium: tier.GPU, Capacity: 2, Strategy: kvevict.LRU},
			{Medium: tier.CPU, Capacity: 4, Strategy: kvevict.LRU},
		},
		Write:     tier.WriteBack,
		Exclusive: true,
		Events: func(e tier.Event) {
			fmt.Printf("  %s %s %v\n", e.Medium, e.Kind, e.Hashes)
		},
	})
	if err != nil {
		panic(err)
	}
	for _, prompt := range [][]uint64{{1, 2}, {3, 4}, {1, 2, 5}} {
		fmt.Println("request", prompt)
		m, err := h.Request(prompt, kvevict.PriorityLow)
		if err != nil {
			panic(err)
		}
		fmt.Printf("  found: %d on the GPU, %d on the host, %d to compute\n", m.Runs[0], m.Runs[1], m.Misses)
	}
	// Output:
	// request [1 2]
	//   GPU stored [1 2]
	//   found: 0 on the GPU, 0 on the host, 2 to compute
	// request [3 4]
	//   CPU stored [2 1]
	//   GPU removed [2 1]
	//   GPU stored [3 4]
	//   found: 0 on the GPU, 0 on the host, 2 to compute
	// request [1 2 5]
	//   CPU removed [1 2]
	//   CPU stored [4 3]
	//   GPU removed [4 3]
	//   GPU stored [1 2]
	//   found: 0 on the GPU, 2 on the host, 1 to compute
}
