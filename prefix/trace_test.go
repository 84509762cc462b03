package prefix_test

import (
	"container/list"
	"math"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/prefix"
	"github.com/sagellm/kvevict/sim"

	"github.com/sagellm/kvevict/internal/tracetest"
)

// readTrace reads a Mooncake JSONL trace with sim's reader and returns each
// request's block hashes. A trace beside the repository is absent on a
// fresh clone: the test skips then, unless CI is "true", where a missing
// trace means the CI machine lost it.
func readTrace(t *testing.T, path string) [][]uint64 {
	t.Helper()
	w, err := sim.LoadTrace(path)
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([][]uint64, len(w.Requests))
	for i, r := range w.Requests {
		reqs[i] = r.HashIDs
	}
	return reqs
}

// replayTree is a plain prefix-cache replay over a Tree of capacity
// blocks, each request admitted as a pool admits it (Tree.Admit): its
// longest resident prefix counts as hits. It returns the block hit ratio.
func replayTree(t *testing.T, reqs [][]uint64, s kvevict.Strategy, capacity int) float64 {
	t.Helper()
	tr, err := prefix.New(s, capacity)
	if err != nil {
		t.Fatal(err)
	}
	hits, total := 0, 0
	for i, h := range reqs {
		m, err := tr.Admit(h, prefix.Access{Tick: int64(i)})
		if err != nil {
			t.Fatal(err)
		}
		hits += m
		total += len(h)
	}
	return float64(hits) / float64(total)
}

// replayFlatLRU is the same replay over a flat LRU list of blocks: hits are
// the longest prefix whose blocks are all resident, and a request touches
// its blocks tail first, so its head is the most recent and eviction takes
// tails first. It shares no code with the tree.
func replayFlatLRU(reqs [][]uint64, capacity int) float64 {
	order := list.New() // front: most recent
	where := make(map[uint64]*list.Element)
	hits, total := 0, 0
	for _, h := range reqs {
		m := 0
		for m < len(h) && where[h[m]] != nil {
			m++
		}
		hits += m
		total += len(h)
		for i := len(h) - 1; i >= 0; i-- {
			if e := where[h[i]]; e != nil {
				order.MoveToFront(e)
				continue
			}
			where[h[i]] = order.PushFront(h[i])
			if order.Len() > capacity {
				delete(where, order.Remove(order.Back()).(uint64))
			}
		}
	}
	return float64(hits) / float64(total)
}

// TestMooncakeExcerpt replays the committed excerpt of the Mooncake
// conversation trace (sim/testdata/README.md, its first 600 requests) at
// the capacities of sim's golden excerpt test: leaf-first LRU over the tree,
// flat tail-first LRU and sim.Replay's LRU are three separate
// implementations of one replay and must agree, on sim's golden numbers.
func TestMooncakeExcerpt(t *testing.T) {
	reqs := readTrace(t, "../sim/testdata/mooncake_conversation_excerpt.jsonl")
	const tolerance = 0.0005
	for _, tc := range []struct {
		capacity int
		want     float64 // sim's TestReplayGoldenExcerpt
	}{{400, 0.0363}, {1600, 0.0416}} {
		tree, flat := replayTree(t, reqs, kvevict.LRU, tc.capacity), replayFlatLRU(reqs, tc.capacity)
		if math.Abs(tree-tc.want) > tolerance || math.Abs(flat-tc.want) > tolerance {
			t.Errorf("capacity %d: leaf-first LRU over the tree %.4f, flat tail-first LRU %.4f, want %.4f +- %.4f",
				tc.capacity, tree, flat, tc.want, tolerance)
		}
	}
}

// TestMooncakeCrossCheck replays the whole conversation trace at 10,000
// blocks: leaf-first LRU over the tree and flat LRU with tail-first
// touching both give a block hit ratio of 0.212.
func TestMooncakeCrossCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 12,031 requests")
	}
	reqs := readTrace(t, tracetest.Conversation(t))
	const capacity, want, tolerance = 10_000, 0.212, 0.002
	tree := replayTree(t, reqs, kvevict.LRU, capacity)
	flat := replayFlatLRU(reqs, capacity)
	t.Logf("block hit ratio at %d blocks: tree leaf-first LRU %.4f, flat tail-first LRU %.4f", capacity, tree, flat)
	if math.Abs(tree-want) > tolerance {
		t.Errorf("tree leaf-first LRU: %.4f, want %.3f +- %.3f", tree, want, tolerance)
	}
	if math.Abs(flat-want) > tolerance {
		t.Errorf("flat tail-first LRU: %.4f, want %.3f +- %.3f", flat, want, tolerance)
	}
}
