package ghost

import "testing"

// TestCounts: a hand-worked sequence. Capacity 2: the third id pushes out
// the least recently put; Put refreshes an id and keeps its larger count;
// Take forgets.
func TestCounts(t *testing.T) {
	m := New(2)
	m.Put(1, Count{Requests: 3})
	m.Put(2, Count{Requests: 1, Tag: 2})
	m.Put(1, Count{Requests: 2, Tag: 1}) // refreshes 1: 2 is now the oldest
	m.Put(3, Count{Requests: 5})         // forgets 2
	check := func(id uint64, want Count, ok bool) {
		t.Helper()
		if got, had := m.Get(id); had != ok || got != want {
			t.Errorf("Get(%d) = %v, %v; want %v, %v", id, got, had, want, ok)
		}
	}
	check(1, Count{Requests: 3, Tag: 1}, true)
	check(2, Count{}, false)
	check(3, Count{Requests: 5}, true)
	if c, ok := m.Take(1); !ok || c.Requests != 3 {
		t.Errorf("Take(1) = %v, %v", c, ok)
	}
	check(1, Count{}, false)
	if m.Len() != 1 {
		t.Errorf("Len = %d, want 1", m.Len())
	}
	if err := m.Check(); err != nil {
		t.Error(err)
	}
	none := New(0)
	none.Put(7, Count{Requests: 1})
	if none.Len() != 0 {
		t.Errorf("a Counts of capacity 0 remembered %d ids", none.Len())
	}
}

// TestCountsBounded: however many ids pass, no more than the capacity are
// remembered, and the newest always are.
func TestCountsBounded(t *testing.T) {
	m := New(100)
	for id := range uint64(10_000) {
		m.Put(id%997, Count{Requests: uint32(id)})
		if m.Len() > 100 {
			t.Fatalf("%d remembered after %d puts", m.Len(), id+1)
		}
		if _, ok := m.Get(id % 997); !ok {
			t.Fatalf("id %d forgotten as it was put", id%997)
		}
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}
