package prefix_test

import (
	"bufio"
	"container/list"
	"encoding/json"
	"errors"
	"math"
	"os"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/prefix"
)

// traceRequest is one line of a Mooncake trace: the prompt's block hashes.
type traceRequest struct {
	HashIDs []uint64 `json:"hash_ids"`
}

// readTrace reads a Mooncake JSONL trace, skipping the test when the file
// is absent.
func readTrace(t *testing.T, path string) [][]uint64 {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("trace %s not present", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var reqs [][]uint64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r traceRequest
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s line %d: %v", path, len(reqs)+1, err)
		}
		reqs = append(reqs, r.HashIDs)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return reqs
}

// replayTree is a plain prefix-cache replay over a Tree of capacity
// blocks: each request's longest matched prefix counts as hits, the
// request holds it locked while the rest is inserted, and leaf-first
// eviction keeps the tree within capacity. It returns the block hit ratio.
func replayTree(t *testing.T, reqs [][]uint64, s kvevict.Strategy, capacity int) float64 {
	t.Helper()
	tr, err := prefix.New(s)
	if err != nil {
		t.Fatal(err)
	}
	hits, total := 0, 0
	for i, h := range reqs {
		if len(h) == 0 {
			continue
		}
		a := prefix.Access{Tick: int64(i)}
		m, err := tr.MatchLocked(h, a)
		if err != nil {
			t.Fatal(err)
		}
		hits += m
		total += len(h)
		if over := tr.Len() + len(h) - m - capacity; over > 0 {
			if _, err := tr.Evict(min(over, tr.Evictable())); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := tr.Insert(h, a); err != nil {
			t.Fatal(err)
		}
		if m > 0 {
			if err := tr.Unlock(h[:m]); err != nil {
				t.Fatal(err)
			}
		}
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

// TestMooncakeExcerpt replays the first 1,000 requests of the Mooncake
// conversation trace (testdata/README.md) at 3,000 blocks, small enough that
// strategies differ. The golden ratios were measured by this replay; flat
// tail-first LRU must agree with leaf-first LRU over the tree.
func TestMooncakeExcerpt(t *testing.T) {
	reqs := readTrace(t, "testdata/mooncake_excerpt.jsonl")
	const capacity, tolerance = 3000, 0.0005
	for _, tt := range []struct {
		strategy kvevict.Strategy
		want     float64
	}{
		{kvevict.LRU, 0.0601},
		{kvevict.MRU, 0.0847},
		{kvevict.FIFO, 0.0595},
		{kvevict.FILO, 0.0869},
		{kvevict.LFU, 0.0657},
		{kvevict.SLRU, 0.0619},
		{kvevict.FrequencyCost, 0.0657},
	} {
		got := replayTree(t, reqs, tt.strategy, capacity)
		if math.Abs(got-tt.want) > tolerance {
			t.Errorf("%s: block hit ratio %.4f, want %.4f +- %.4f", tt.strategy, got, tt.want, tolerance)
		}
	}
	tree, flat := replayTree(t, reqs, kvevict.LRU, capacity), replayFlatLRU(reqs, capacity)
	if math.Abs(tree-flat) > tolerance {
		t.Errorf("leaf-first LRU over the tree %.4f, flat tail-first LRU %.4f: differ by more than %.4f", tree, flat, tolerance)
	}
}

// TestMooncakeCrossCheck replays the whole conversation trace at 10,000
// blocks: leaf-first LRU over the tree and flat LRU with tail-first
// touching both give a block hit ratio of 0.212.
func TestMooncakeCrossCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 12,031 requests")
	}
	reqs := readTrace(t, "../../shared/traces/mooncake_conversation.jsonl")
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
