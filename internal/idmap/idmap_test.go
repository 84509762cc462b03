package idmap

import (
	"maps"
	"math"
	"math/rand/v2"
	"testing"
)

// TestIDMapRandomOps checks Map against a Go map under random puts and
// deletes over a small id space (long probe runs, many backward shifts),
// including ID math.MaxUint64, and what All yields.
func TestIDMapRandomOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var m Map[int32]
	ref := map[uint64]int32{}
	ids := []uint64{0, 1, math.MaxUint64, math.MaxUint64 - 1}
	for i := range uint64(200) {
		ids = append(ids, i*64) // ids whose hashes share low bits
	}
	for step := range 200_000 {
		id := ids[rng.IntN(len(ids))]
		if rng.IntN(3) == 0 {
			m.Del(id)
			delete(ref, id)
		} else {
			v := int32(rng.IntN(1000))
			m.Put(id, v)
			ref[id] = v
		}
		if step%1000 == 0 {
			if err := m.Check(); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			all := map[uint64]int32{}
			for id, v := range m.All() {
				all[id] = v
			}
			if !maps.Equal(all, ref) {
				t.Fatalf("step %d: All() yields %d ids, not the %d held", step, len(all), len(ref))
			}
		}
		if m.Len() != len(ref) {
			t.Fatalf("step %d: len %d, want %d", step, m.Len(), len(ref))
		}
		probe := ids[rng.IntN(len(ids))]
		want, ok := ref[probe]
		if got, found := m.Get(probe); found != ok || got != want {
			t.Fatalf("step %d: get(%d) = %d, want %d", step, probe, got, want)
		}
	}
}
