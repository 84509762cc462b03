package kvevents

import (
	"math/rand/v2"
	"testing"
)

// TestIntTableAgainstMap applies random puts and deletes (by slot and by
// key, in turn), on keys drawn from a small range so that runs form and
// deletions shift entries back, to an intTable and a Go map, and checks
// after each that every key of the range is found exactly when the map
// holds it, under its slot.
func TestIntTableAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tab intTable
	ref := make(map[uint64]int32)
	slab := make([]block, 20_000) // slot step holds the key put at that step
	for step := range 20_000 {
		k := rng.Uint64N(512)
		if _, ok := ref[k]; ok {
			if step%2 == 0 {
				tab.delete(tab.mix(k), ref[k])
			} else if got, ok := tab.deleteKey(k, slab); !ok || got != ref[k] {
				t.Fatalf("step %d: deleteKey(%d) = %d, %v; want %d, true", step, k, got, ok, ref[k])
			}
			delete(ref, k)
		} else {
			slab[step].hash = k
			_, mix, _ := tab.find(k, slab)
			tab.put(mix, int32(step))
			ref[k] = int32(step)
		}
		if step%1000 == 999 {
			tab.clear()
			clear(ref)
		}
		if tab.count != len(ref) {
			t.Fatalf("step %d: count %d, want %d", step, tab.count, len(ref))
		}
		if step%97 != 0 {
			continue
		}
		for k := range uint64(512) {
			got, _, ok := tab.find(k, slab)
			want, in := ref[k]
			if ok != in || got != want {
				t.Fatalf("step %d: find(%d) = %d, %v; want %d, %v", step, k, got, ok, want, in)
			}
		}
		// Absent: no effect. The slot is one no put used; slot 0 is filed
		// under step 0's key, and deleting it under another key's mix took
		// it out whenever that mix's probe reached it.
		tab.delete(tab.mix(1<<40), int32(len(slab)))
		if got, ok := tab.deleteKey(1<<40, slab); ok {
			t.Fatalf("step %d: deleteKey of an absent key = %d, true", step, got)
		}
		n := 0
		tab.all(func(slot int32) {
			if k := slab[slot].hash; ref[k] != slot {
				t.Fatalf("step %d: all gives %d under %d, want %d", step, k, slot, ref[k])
			}
			n++
		})
		if n != len(ref) {
			t.Fatalf("step %d: all gives %d keys, want %d", step, n, len(ref))
		}
	}
}
