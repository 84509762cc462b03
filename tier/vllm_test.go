package tier

import (
	"slices"
	"testing"

	"github.com/sagellm/kvevict/internal/dlist"
)

// keysOf returns the keys of list l, least recent first.
func keysOf(c *vllmCPU, l uint8) []uint64 {
	var keys []uint64
	for n := c.lists[l].Front; n != dlist.None; n = c.slots.Next(n) {
		keys = append(keys, c.nodes[n].key)
	}
	return keys
}

// TestVLLMARCFailsWhole steps vLLM's ARC through the case where a store
// fails although T1 holds an eligible block, a script run on vLLM's own
// arc.py and manager.py (c = 2; "store" is prepare_store then
// complete_store):
//
//	store [a]; store [b]  -> T1 [a b], p 0
//	store [c]             -> evicts a (|T1| 2 >= 0): T1 [b c], B1 [a]
//	touch [a]             -> a in B1: p = min(0 + max(1, 0/1), 2) = 1
//	store [a]             -> evicts b (2 >= 1): T1 [c a], B1 [b]
//	touch [b]             -> p = 2
//	store [e f]           -> c from T1 (2 >= 2), then |T1| left 1 < 2: T2
//	                         only, empty: the store fails, nothing changes
//	store [e]             -> evicts c
func TestVLLMARCFailsWhole(t *testing.T) {
	const a, b, c, e, f = 1, 2, 3, 5, 6
	m := newVLLMCPU(2, true)
	store := func(keys ...uint64) bool {
		stored, _, ok := m.store(keys)
		m.complete(stored)
		return ok
	}
	want := func(step string, t1, b1 []uint64, p float64) {
		t.Helper()
		if got := keysOf(m, 0); !slices.Equal(got, t1) {
			t.Fatalf("%s: T1 %v, want %v", step, got, t1)
		}
		if got := keysOf(m, 2); !slices.Equal(got, b1) {
			t.Fatalf("%s: B1 %v, want %v", step, got, b1)
		}
		if m.p != p || m.lists[1].Len != 0 {
			t.Fatalf("%s: p %v, |T2| %d; want %v, 0", step, m.p, m.lists[1].Len, p)
		}
	}
	store(a)
	store(b)
	want("store a, b", []uint64{a, b}, nil, 0)
	store(c)
	want("store c", []uint64{b, c}, []uint64{a}, 0)
	m.touch([]uint64{a})
	want("touch a", []uint64{b, c}, []uint64{a}, 1)
	store(a)
	want("store a", []uint64{c, a}, []uint64{b}, 1)
	m.touch([]uint64{b})
	want("touch b", []uint64{c, a}, []uint64{b}, 2)
	if store(e, f) {
		t.Fatal("store [e f] succeeded; vLLM's ARC fails it")
	}
	want("failed store", []uint64{c, a}, []uint64{b}, 2)
	if !store(e) {
		t.Fatal("store [e] failed")
	}
	want("store e", []uint64{a, e}, []uint64{b, c}, 2)
}

// TestVLLMLRUTouchAndProtect: vLLM's lru touches its keys last first, and a
// store never evicts the keys it was offered, failing rather than evicting them.
func TestVLLMLRUTouchAndProtect(t *testing.T) {
	m := newVLLMCPU(3, false)
	for _, k := range []uint64{1, 2, 3} {
		stored, _, _ := m.store([]uint64{k})
		m.complete(stored)
	}
	m.touch([]uint64{1, 2}) // 2 then 1 move to the back: [3 2 1]
	if got := keysOf(m, 0); !slices.Equal(got, []uint64{3, 2, 1}) {
		t.Fatalf("after touch [1 2]: %v, want [3 2 1]", got)
	}
	// Offered 3 (cached, so protected) and 4, 5: two to evict, only 2 and
	// 1 may go.
	stored, evicted, ok := m.store([]uint64{3, 4, 5})
	if !ok || !slices.Equal(stored, []uint64{4, 5}) || !slices.Equal(evicted, []uint64{2, 1}) {
		t.Fatalf("store [3 4 5]: stored %v, evicted %v, ok %v; want [4 5], [2 1], true", stored, evicted, ok)
	}
	// 4 and 5 are not ready until their store completes: never victims.
	if _, evicted, ok := m.store([]uint64{6}); !ok || !slices.Equal(evicted, []uint64{3}) {
		t.Fatalf("store [6]: evicted %v, ok %v; want [3], true", evicted, ok)
	}
	if _, _, ok := m.store([]uint64{7}); ok {
		t.Fatal("a store evicted a block still being stored")
	}
	m.complete([]uint64{4, 5, 6})
	if _, evicted, ok := m.store([]uint64{7}); !ok || !slices.Equal(evicted, []uint64{4}) {
		t.Fatalf("store [7]: evicted %v, ok %v; want [4], true", evicted, ok)
	}
}
