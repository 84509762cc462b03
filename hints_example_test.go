package kvevict_test

import (
	"fmt"

	"github.com/sagellm/kvevict"
)

// A pool that knows more than recency: an agent's final turn will not be
// continued, and a turn waiting on a tool call is leased until the tool's
// expected return. LRU alone would take sequence 1 and then 3, the oldest;
// with the hints it takes the released turn first, then the oldest without
// a lease, and leaves the leased turn alone.
func ExampleHints() {
	p, err := kvevict.New(kvevict.LRU)
	if err != nil {
		panic(err)
	}
	cands := []kvevict.Candidate{
		{ID: 1, Blocks: []int{10, 11}, LastAccess: 100},
		{ID: 2, Blocks: []int{20}, LastAccess: 300, Hints: kvevict.Hints{Released: true}},
		{ID: 3, Blocks: []int{30}, LastAccess: 50, Hints: kvevict.Hints{LeaseUntil: 1000}},
		{ID: 4, Blocks: []int{40}, LastAccess: 400},
	}
	res, err := p.SelectVictims(cands, 3)
	if err != nil {
		panic(err)
	}
	for _, v := range res.Victims {
		fmt.Println(v.ID, v.Blocks)
	}
	m := p.Metrics()
	fmt.Println("releases evicted:", m.ReleasesEvicted, "leased blocks:", m.LeasedBlocks)
	// Output:
	// 2 [20]
	// 1 [10 11]
	// releases evicted: 1 leased blocks: 1
}
