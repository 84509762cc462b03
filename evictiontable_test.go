package kvevict

import (
	"math/rand/v2"
	"testing"
)

// checkEvictionTable verifies that every stored record is reachable from
// its home slot without crossing an empty slot, and that len is the count
// of stored records.
func checkEvictionTable(t *testing.T, tb *evictionTable) {
	t.Helper()
	n := 0
	mask := uint64(len(tb.slots) - 1)
	for i, s := range tb.slots {
		if s.count == 0 {
			continue
		}
		n++
		for j := tb.home(s.id); j != uint64(i); j = (j + 1) & mask {
			if tb.slots[j].count == 0 {
				t.Fatalf("ID %d at slot %d is cut off from its home %d by an empty slot %d", s.id, i, tb.home(s.id), j)
			}
		}
	}
	if n != tb.len {
		t.Fatalf("len = %d, %d records stored", tb.len, n)
	}
	if len(tb.slots) > 0 && 2*tb.len > len(tb.slots) {
		t.Fatalf("load %d/%d above 1/2", tb.len, len(tb.slots))
	}
}

// TestEvictionTableMatchesMap runs random upserts, finds and removes
// against a Go map, with IDs drawn from small and clustered ranges so that
// probe runs collide and wrap.
func TestEvictionTableMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var tb evictionTable
	model := map[uint64]uint32{}
	for op := 0; op < 200_000; op++ {
		id := uint64(rng.IntN(300))
		if rng.IntN(4) == 0 {
			id = id<<58 | 1 // IDs that differ only in the high bits
		}
		switch rng.IntN(3) {
		case 0:
			i := tb.upsert(id)
			tb.slots[i].count++
			model[id]++
		case 1:
			i, ok := tb.find(id)
			if want, in := model[id]; ok != in || (ok && tb.slots[i].count != want) {
				t.Fatalf("op %d: find(%d) = %v, model %v %d", op, id, ok, in, want)
			}
		case 2:
			if i, ok := tb.find(id); ok {
				tb.remove(i)
				delete(model, id)
			}
		}
		if op%97 == 0 {
			checkEvictionTable(t, &tb)
		}
	}
	checkEvictionTable(t, &tb)
	if tb.len != len(model) {
		t.Fatalf("len %d, model %d", tb.len, len(model))
	}
	for id, want := range model {
		if i, ok := tb.find(id); !ok || tb.slots[i].count != want {
			t.Fatalf("ID %d: found %v, want count %d", id, ok, want)
		}
	}
	for id := range model {
		i, _ := tb.find(id)
		tb.remove(i)
	}
	if tb.len != 0 || len(tb.slots) != evictionTableMin {
		t.Fatalf("emptied table: len %d, %d slots", tb.len, len(tb.slots))
	}
}
