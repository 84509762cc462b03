package main

import (
	"testing"

	"github.com/sagellm/kvevict"
)

// TestPoolAccounting replays the example's traffic under every strategy and
// checks after each request that every block is free or held by exactly one
// sequence, and that the metrics describe a run that evicted.
func TestPoolAccounting(t *testing.T) {
	for _, s := range kvevict.Strategies() {
		policy, err := kvevict.New(s)
		if err != nil {
			t.Fatal(err)
		}
		p := newPool(policy)
		for i := 0; i < 600; i++ {
			if err := p.serve(uint64(i%37+1), kvevict.PriorityNormal); err != nil {
				t.Fatalf("%s: request %d: %v", s, i, err)
			}
			owner := make(map[int]uint64, poolBlocks)
			for _, b := range p.free {
				owner[b] = 0
			}
			held := len(p.free)
			for id, seq := range p.seqs {
				for _, b := range seq.blocks {
					if prev, dup := owner[b]; dup {
						t.Fatalf("%s: block %d held by %d and %d", s, b, prev, id)
					}
					owner[b] = id
				}
				held += len(seq.blocks)
			}
			if held != poolBlocks {
				t.Fatalf("%s: request %d: %d blocks accounted for, pool has %d", s, i, held, poolBlocks)
			}
		}
		m := policy.Metrics()
		if m.TotalEvictions == 0 || m.EvictedBlocks == 0 {
			t.Errorf("%s: 37 sessions on a %d-block pool evicted nothing: %+v", s, poolBlocks, m)
		}
		if _, hit, err := run(s); err != nil || hit <= 0 || hit >= 1 {
			t.Errorf("%s: run: hit ratio %v, %v", s, hit, err)
		}
	}
}
