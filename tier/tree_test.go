package tier

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/prefix"
)

// TestTreeEvents drives random prompts with shared prefixes through a
// Tree under every write policy and inclusion, and replays its events, the
// tree's and the tiers', in the order they came, into one set of blocks
// per medium, as an index that follows them would. After each request
// every set is what its tier holds; at every event no set holds more than
// its tier's capacity; and every block a tier below the GPU stores is, at
// that moment, held on some tier (the GPU's capacity exceeds every
// request): an index that finds a lower tier's store through an entry it
// already has (llm-d's) never meets a block it does not know.
func TestTreeEvents(t *testing.T) {
	for _, mode := range writeModes {
		t.Run(mode.name, func(t *testing.T) {
			capacity := []int{24, 48, 96}
			mediums := []Medium{GPU, CPU, Storage}
			held := make([]map[uint64]bool, 3)
			for i := range held {
				held[i] = map[uint64]bool{}
			}
			var request int
			apply := func(i int, kind EventKind, hashes []uint64) {
				for _, id := range hashes {
					switch kind {
					case Stored:
						if i > 0 && !held[0][id] && !held[1][id] && !held[2][id] {
							t.Fatalf("request %d: %s stores block %d, held on no tier", request, mediums[i], id)
						}
						held[i][id] = true
					case Removed:
						if !held[i][id] {
							t.Fatalf("request %d: %s removes block %d, which it does not hold", request, mediums[i], id)
						}
						delete(held[i], id)
					}
				}
				if len(held[i]) > capacity[i] {
					t.Fatalf("request %d: the events leave %d blocks on %s, of %d", request, len(held[i]), mediums[i], capacity[i])
				}
			}
			var gpuHits int64
			tr, err := NewTree(Config{
				Levels: []Level{lru(GPU, capacity[0]), {CPU, capacity[1], kvevict.ARC, nil}, {Storage, capacity[2], kvevict.S3FIFO, nil}},
				Write:  mode.write, Threshold: mode.threshold, Exclusive: mode.exclusive,
				Events: func(e Event) { apply(e.Medium.rank(), e.Kind, e.Hashes) },
			}, func(e prefix.Event) { apply(0, e.Kind, e.Hashes) })
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(5, uint64(mode.write)))
			for request = range 3000 {
				hashes := make([]uint64, 1+rng.IntN(12))
				base := uint64(rng.IntN(60)) * 16
				for i := range hashes {
					hashes[i] = base + uint64(i)
				}
				m, err := tr.Request(hashes, prefix.Access{Tick: int64(request)})
				if err != nil {
					t.Fatalf("request %d: %v", request, err)
				}
				gpuHits += int64(m.Runs[0])
				if m.Hits()+m.Misses != len(hashes) || tr.Peek(hashes) != len(hashes) {
					t.Fatalf("request %d: runs %v, %d misses, %d on the GPU after it, of %d blocks", request, m.Runs, m.Misses, tr.Peek(hashes), len(hashes))
				}
				for i := range held {
					if tr.Len(i) != len(held[i]) {
						t.Fatalf("request %d: %s holds %d blocks, its events leave %d", request, mediums[i], tr.Len(i), len(held[i]))
					}
					for id := range held[i] {
						if i > 0 && !tr.Contains(i, id) {
							t.Fatalf("request %d: %s's events leave block %d there, which it does not hold", request, mediums[i], id)
						}
					}
				}
			}
			st := tr.Stats()
			if st[0].Hits != gpuHits || st[0].Stored-st[0].Evicted != int64(tr.Len(0)) {
				t.Fatalf("GPU stats %+v: %d hits, %d held", st[0], gpuHits, tr.Len(0))
			}
			if st[1].Hits == 0 || st[2].Hits == 0 {
				t.Fatalf("the script exercises little: %+v", st)
			}
		})
	}
}

// TestTreeIsTheCalls: a Tree serves each request as a hierarchy with
// ExternalGPU under a prefix tree driven by hand with the calls its
// documentation lists (the runs, the victims and the counts), and
// refuses vLLM's mode and a strategy a prefix tree does not rank by.
func TestTreeIsTheCalls(t *testing.T) {
	levels := []Level{lru(GPU, 16), lru(CPU, 40)}
	tr, err := NewTree(Config{Levels: levels, Write: WriteBack}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var victims []uint64
	pool, err := prefix.New(kvevict.LRU, 16, prefix.WithEvents(func(e prefix.Event) {
		if e.Kind == prefix.Removed {
			victims = append(victims, e.Hashes...)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	h := newHierarchy(t, Config{Levels: levels, Write: WriteBack, ExternalGPU: true})
	rng := rand.New(rand.NewPCG(7, 7))
	for r := range 1000 {
		hashes := make([]uint64, 1+rng.IntN(8))
		base := uint64(rng.IntN(20)) * 16
		for i := range hashes {
			hashes[i] = base + uint64(i)
		}
		got, err := tr.Request(hashes, prefix.Access{Tick: int64(r)})
		if err != nil {
			t.Fatal(err)
		}
		want := h.LookupBelow(hashes, pool.Peek(hashes))
		if err := h.Load(hashes, want); err != nil {
			t.Fatal(err)
		}
		victims = victims[:0]
		if _, err := pool.Admit(hashes, prefix.Access{Tick: int64(r)}); err != nil {
			t.Fatal(err)
		}
		if err := h.Demote(victims); err != nil {
			t.Fatal(err)
		}
		if err := h.Offer(hashes); err != nil {
			t.Fatal(err)
		}
		gotStats, wantStats := tr.Stats(), h.Stats()
		gotStats[0].Stored = 0 // the tree's, which the hierarchy does not count
		if !slices.Equal(got.Runs, want.Runs) || got.Misses != want.Misses || !slices.Equal(gotStats, wantStats) || tr.Len(0) != pool.Len() {
			t.Fatalf("request %d: runs %v, %d misses, %+v; by hand %v, %d, %+v", r, got.Runs, got.Misses, gotStats, want.Runs, want.Misses, wantStats)
		}
	}
	if st := tr.Stats(); st[1].Hits == 0 || st[0].Stored == 0 {
		t.Fatalf("the script exercises little: %+v", st)
	}
	if _, err := NewTree(Config{Levels: levels, Write: WriteVLLM}, nil); err == nil {
		t.Error("vLLM's mode over a tree: no error")
	}
	if _, err := NewTree(Config{Levels: []Level{{GPU, 16, kvevict.ARC, nil}, lru(CPU, 40)}}, nil); err == nil {
		t.Error("a tree ranked by ARC: no error")
	}
}
