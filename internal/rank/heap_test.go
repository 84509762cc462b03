package rank

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestHeapRandomOps drives a Heap through random pushes, removals, fixes,
// replacements and rekeys against a map of the live entries, checking
// the heap's invariants after every operation and that Min is the smallest
// live entry by (key, ID).
func TestHeapRandomOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h Heap
	live := map[int32]Entry{}
	nextID := uint64(0)
	key := func() Key { return Key{Major: rng.Int64N(8), Minor: rng.Int64N(8)} }
	for step := range 20_000 {
		slot := int32(rng.IntN(64))
		_, in := live[slot]
		switch op := rng.IntN(5); {
		case !in && op < 3:
			nextID++
			e := Entry{Key: key(), ID: nextID, Slot: slot, Blocks: 1}
			h.Push(e)
			live[slot] = e
		case in && op == 0:
			h.Remove(slot)
			delete(live, slot)
		case in && op == 1:
			e := live[slot]
			e.Key = key()
			h.Fix(slot, e.Key, e.Blocks)
			live[slot] = e
		case in && op == 2:
			// Replace slot's entry, or the smallest, by an entry at a slot
			// that is free or the one replaced.
			if rng.IntN(2) == 0 {
				slot = h.Min().Slot
			}
			to := int32(rng.IntN(64))
			if _, taken := live[to]; taken && to != slot {
				to = slot
			}
			delete(live, slot)
			nextID++
			e := Entry{Key: key(), ID: nextID, Slot: to, Blocks: 1}
			h.Replace(slot, e)
			live[to] = e
		case op == 3 && step%100 == 0:
			shift := rng.Int64N(5)
			h.Rekey(func(e *Entry) Key { return Key{Major: shift - e.Major, Minor: e.Minor} })
			for s, e := range live {
				e.Key = Key{Major: shift - e.Major, Minor: e.Minor}
				live[s] = e
			}
		}
		if err := h.Check(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if h.Len() != len(live) {
			t.Fatalf("step %d: heap holds %d, %d live", step, h.Len(), len(live))
		}
		for s, e := range live {
			if !h.Contains(s) || *h.At(s) != e {
				t.Fatalf("step %d: slot %d holds %+v, want %+v", step, s, *h.At(s), e)
			}
		}
		if len(live) > 0 {
			all := make([]Entry, 0, len(live))
			for _, e := range live {
				all = append(all, e)
			}
			smallest := slices.MinFunc(all, func(a, b Entry) int {
				if Less(&a, &b) {
					return -1
				}
				return 1
			})
			if *h.Min() != smallest {
				t.Fatalf("step %d: Min %+v, want %+v", step, *h.Min(), smallest)
			}
		}
	}
}
