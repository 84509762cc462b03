package sim

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sagellm/kvevict"
)

// cachedState is an EvictionState of a pool whose cached blocks hold
// hashes, hash h in block base+h, and nothing runs.
func cachedState(base int, hashes ...uint64) *EvictionState {
	blocks := make(map[uint64]int, len(hashes))
	for _, h := range hashes {
		blocks[h] = base + int(h)
	}
	return &EvictionState{cachedLen: len(hashes), lookup: func(h uint64) (int, bool) {
		b, ok := blocks[h]
		if !ok {
			return -1, false
		}
		return b, true
	}}
}

// TestBlockEvictorLeafFirst drives a block evictor by hand: a finished
// sequence's blocks go deepest first, a running sequence's never, and a
// need it cannot cover frees nothing.
func TestBlockEvictorLeafFirst(t *testing.T) {
	e, err := NewBlockEvictor(kvevict.LRU, 16)
	if err != nil {
		t.Fatal(err)
	}
	// Hash h lives in block 10+h.
	e.Admit(&Admission{Seq: 1, Hashes: []uint64{1, 2, 3}, Now: 100})
	e.Admit(&Admission{Seq: 2, Hashes: []uint64{1, 4}, Now: 200})
	e.Release(&CachedSequence{ID: 1, Blocks: []int{12, 13}, Released: 300})
	cached := func(hashes ...uint64) *EvictionState {
		st := cachedState(10, hashes...)
		st.Running = []RunningSequence{{ID: 2, Blocks: []int{11, 14}}}
		return st
	}
	_, err = e.Evict(cached(2, 3), 3)
	var ins *kvevict.InsufficientBlocksError
	if !errors.As(err, &ins) || ins.Required != 3 || ins.Available != 2 {
		t.Fatalf("evict 3 of 2 cached: err = %v", err)
	}
	res, err := e.Evict(cached(2, 3), 1)
	if err != nil || !slices.Equal(res.Blocks, []int{13}) {
		t.Fatalf("evict 1: %v, %v; want the deepest block 13", res.Blocks, err)
	}
	res, err = e.Evict(cached(2), 1)
	if err != nil || !slices.Equal(res.Blocks, []int{12}) {
		t.Fatalf("evict 1 more: %v, %v; want block 12", res.Blocks, err)
	}
	// Only the running sequence's blocks are left: nothing is evictable.
	if _, err := e.Evict(cached(), 1); !errors.Is(err, kvevict.ErrInsufficientBlocks) {
		t.Fatalf("evict with nothing cached: err = %v", err)
	}
	e.Release(&CachedSequence{ID: 2, Blocks: []int{11, 14}, Released: 400})
	e.Release(&CachedSequence{ID: 2, Released: 500}) // a second release is ignored
	res, err = e.Evict(cached(1, 4), 2)
	if err != nil || !slices.Equal(res.Blocks, []int{14, 11}) {
		t.Fatalf("evict 2 after release: %v, %v; want 14 then 11", res.Blocks, err)
	}
	if _, err := NewBlockEvictor(kvevict.ARC, 16); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("adaptive strategy: err = %v", err)
	}
	if _, err := NewBlockEvictor(kvevict.LRU, 0); !errors.Is(err, kvevict.ErrInvalidArgument) {
		t.Errorf("capacity 0: err = %v", err)
	}
	if _, err := e.Evict(cached(), -1); !errors.Is(err, kvevict.ErrInvalidArgument) {
		t.Errorf("negative need: err = %v", err)
	}
}

// TestBlockEvictorSharedHashes: when one hash follows different heads, the
// tree has a node per path but the pool one block; Evict still frees
// distinct cached blocks, exactly the need.
func TestBlockEvictorSharedHashes(t *testing.T) {
	e, _ := NewBlockEvictor(kvevict.LRU, 16)
	e.Admit(&Admission{Seq: 1, Hashes: []uint64{1, 9}, Now: 100})
	e.Admit(&Admission{Seq: 2, Hashes: []uint64{2, 9}, Now: 200})
	e.Release(&CachedSequence{ID: 1, Blocks: []int{1, 9}, Released: 300})
	e.Release(&CachedSequence{ID: 2, Blocks: []int{2}, Released: 400})
	res, err := e.Evict(cachedState(0, 1, 2, 9), 3)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(res.Blocks)
	if !slices.Equal(res.Blocks, []int{1, 2, 9}) {
		t.Errorf("freed %v, want blocks 1, 2 and 9 once each", res.Blocks)
	}
}

// TestMultiturnBlockBeatsSequence: on the multiturn workload, block
// granularity re-prefills fewer tokens than sequence granularity, and tail
// lies in between. Measured with LRU at 300 requests, seed 1: the factor
// (sequence / block re-prefill tokens) is 1.12 at 5,000 blocks and 1.30 at
// 9,000; the test asks for 1.05.
func TestMultiturnBlockBeatsSequence(t *testing.T) {
	w, err := Synthetic("multiturn", 1, 300)
	if err != nil {
		t.Fatal(err)
	}
	if raceEnabled {
		t.Skip("a long single-threaded serve run; run without -race")
	}
	capacities := []int{5000, 9000}
	if testing.Short() {
		capacities = capacities[:1]
	}
	for _, c := range capacities {
		got := map[Granularity]int64{}
		for _, g := range Granularities() {
			rep, err := Serve(w, kvevict.LRU, ServeConfig{Config: Config{Capacity: c}, Granularity: g})
			if err != nil {
				t.Fatal(err)
			}
			got[g] = rep.RePrefillTokens
		}
		seq, tail, block := got[GranularitySequence], got[GranularityTail], got[GranularityBlock]
		t.Logf("capacity %d: re-prefill tokens sequence %d, tail %d, block %d (factor %.2f)",
			c, seq, tail, block, float64(seq)/float64(block))
		if block == 0 || float64(seq) < 1.05*float64(block) || tail > seq {
			t.Errorf("capacity %d: re-prefill tokens sequence %d, tail %d, block %d; want sequence >= 1.05 x block, tail <= sequence",
				c, seq, tail, block)
		}
	}
}

// TestServeBlockAutoSizedByPool: at block granularity Serve gives Auto the
// pool's capacity, which sizes the miniature caches that choose its
// weight: a run equals one whose block evictor is told the pool's size,
// and differs from one told another size.
func TestServeBlockAutoSizedByPool(t *testing.T) {
	w, err := Synthetic("scan", 1, 400)
	if err != nil {
		t.Fatal(err)
	}
	const c = 250
	serve := func(ev Evictor) Report {
		t.Helper()
		rep, err := Serve(w, kvevict.Auto, ServeConfig{Config: Config{Capacity: c}, Granularity: GranularityBlock, Evictor: ev})
		if err != nil {
			t.Fatal(err)
		}
		rep.EvictionP50, rep.EvictionP99 = 0, 0 // wall-clock times
		rep.Granularity = ""                    // an Evictor given says none
		return rep
	}
	sized := func(capacity int) Evictor {
		t.Helper()
		e, err := NewBlockEvictor(kvevict.Auto, capacity, kvevict.WithTickDuration(time.Microsecond))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	got, told, other := serve(nil), serve(sized(c)), serve(sized(4096))
	if !reflect.DeepEqual(got, told) {
		t.Errorf("Serve %+v, with a block evictor told the pool's %d blocks %+v: want equal", got, c, told)
	}
	if reflect.DeepEqual(got, other) {
		t.Errorf("Serve equals a run sized for 4096 blocks: the pool's size is not passed")
	}
}
