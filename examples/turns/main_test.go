package main

import (
	"testing"

	"github.com/sagellm/kvevict"
)

// TestTurns replays the example's traffic and checks the pool's accounting
// after each request (every block free or held by exactly one sequence,
// every cached hash owned by the sequence holding it), then what the
// example shows: with no sequence ID requested twice, Auto by ID ranks by
// recency alone and matches LRU exactly, while Auto told the content
// (HeadHash, UpdateAccessHashes) finds more of it.
func TestTurns(t *testing.T) {
	policy, err := kvevict.New(kvevict.Auto, kvevict.WithCapacity(poolBlocks))
	if err != nil {
		t.Fatal(err)
	}
	p := &pool{policy: policy, byHead: true, seqs: map[uint64]*sequence{}, owner: map[uint64]uint64{}}
	for b := range poolBlocks {
		p.free = append(p.free, b)
	}
	for i := range 3000 {
		c := uint64(i % 53)
		hashes := make([]uint64, 4+i/53%20)
		for j := range hashes {
			hashes[j] = c<<20 | uint64(j)
		}
		if err := p.serve(hashes); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		held := map[int]bool{}
		for _, b := range p.free {
			held[b] = true
		}
		for id, s := range p.seqs {
			for k, b := range s.blocks {
				if held[b] {
					t.Fatalf("request %d: block %d held twice", i, b)
				}
				held[b] = true
				if p.owner[s.hashes[k]] != id {
					t.Fatalf("request %d: hash %x held by %d, owned by %d", i, s.hashes[k], id, p.owner[s.hashes[k]])
				}
			}
		}
		if len(held) != poolBlocks {
			t.Fatalf("request %d: %d blocks accounted for, pool has %d", i, len(held), poolBlocks)
		}
	}
	lru, err := run(kvevict.LRU, false)
	if err != nil {
		t.Fatal(err)
	}
	byID, err := run(kvevict.Auto, false)
	if err != nil {
		t.Fatal(err)
	}
	byHead, err := run(kvevict.Auto, true, kvevict.WithCapacity(poolBlocks))
	if err != nil {
		t.Fatal(err)
	}
	if byID != lru || !(byHead > lru) {
		t.Fatalf("prefix hit: lru %.4f, auto by ID %.4f (want equal), auto by head %.4f (want above)", lru, byID, byHead)
	}
}
