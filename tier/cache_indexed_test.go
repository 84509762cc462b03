package tier

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sagellm/kvevict"
)

// TestIndexedMatchesPolicy: for every strategy, a cache kept
// in an Index gives, request for request, the outcome of the contract path
// (a Policy's SelectVictims over every resident): the same ids loaded, the
// same victims in the same order. The requests are random multi-id prompts
// with repeats, priorities and partial last blocks, over a small pool so
// that nearly every request evicts, with blocks removed between them as
// another tier takes them; both count the same uses.
func TestIndexedMatchesPolicy(t *testing.T) {
	if raceEnabled {
		t.Skip("single-threaded: the detector finds nothing in it; run without -race")
	}
	for _, s := range kvevict.Strategies() {
		t.Run(string(s), func(t *testing.T) {
			for seed := range uint64(4) {
				var opts []kvevict.Option
				if s.Adaptive() {
					opts = append(opts, kvevict.WithCapacity(48))
				}
				p, err := kvevict.New(s, opts...)
				if err != nil {
					t.Fatal(err)
				}
				x, err := kvevict.NewIndex(s, opts...)
				if err != nil {
					t.Fatal(err)
				}
				const capacity = 32
				slow, err := NewPolicyCache(p, capacity)
				if err != nil {
					t.Fatal(err)
				}
				fast, err := newIndexCache(x, capacity)
				if err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(seed, 11))
				evicted := 0
				for r := range 3000 {
					ids := make([]uint64, 1+rng.IntN(12))
					base := uint64(rng.IntN(40)) * 4 // shared prefixes
					for i := range ids {
						ids[i] = base + uint64(i)
						if rng.IntN(5) == 0 {
							ids[i] = uint64(rng.IntN(200))
						}
					}
					prio := kvevict.Priority(rng.IntN(3))
					want, wantErr := slow.Request(ids, prio)
					got, gotErr := fast.Request(ids, prio)
					if (wantErr == nil) != (gotErr == nil) {
						t.Fatalf("seed %d, request %d: error %v, contract path %v", seed, r, gotErr, wantErr)
					}
					if got.Loaded != want.Loaded || got.Selected != want.Selected || !sameVictims(got.Victims, want.Victims) {
						t.Fatalf("seed %d, request %d %v: loaded %d, victims %v; contract path loaded %d, victims %v",
							seed, r, ids, got.Loaded, got.Victims, want.Loaded, want.Victims)
					}
					evicted += len(got.Victims)
					if rng.IntN(3) == 0 {
						if slow.MarkPartial(ids[len(ids)-1]) != fast.MarkPartial(ids[len(ids)-1]) {
							t.Fatalf("seed %d, request %d: MarkPartial disagrees", seed, r)
						}
					}
					// Another tier takes a block now and then, and the
					// strategies that count uses read the same counts.
					id := uint64(rng.IntN(200))
					if u, v := slow.Uses(id), fast.Uses(id); u != v {
						t.Fatalf("seed %d, request %d: Uses(%d) = %d, contract path %d", seed, r, id, v, u)
					}
					if rng.IntN(10) == 0 {
						if w, g := slow.Remove(id), fast.Remove(id); w != g {
							t.Fatalf("seed %d, request %d: Remove(%d) = %v, contract path %v", seed, r, id, g, w)
						}
					}
					if r%101 == 0 {
						for _, c := range []*Cache{slow, fast} {
							if err := c.Check(); err != nil {
								t.Fatalf("seed %d, request %d: %v", seed, r, err)
							}
						}
						if !slices.Equal(sorted(slow.Residents()), sorted(fast.Residents())) {
							t.Fatalf("seed %d, request %d: residents differ", seed, r)
						}
					}
				}
				if evicted < 1000 {
					t.Fatalf("seed %d: only %d evictions: the test exercises little", seed, evicted)
				}
			}
		})
	}
}

func sameVictims(a, b []kvevict.Victim) bool {
	return slices.EqualFunc(a, b, func(v, w kvevict.Victim) bool { return v.ID == w.ID })
}

func sorted(ids []uint64) []uint64 { slices.Sort(ids); return ids }
