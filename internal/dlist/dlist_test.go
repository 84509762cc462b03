package dlist

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// model is the reference: each list as a slice of slots, front first.
type model [][]int32

func (m model) remove(l int, n int32) {
	i := slices.Index(m[l], n)
	m[l] = slices.Delete(m[l], i, i+1)
}

// checkAll verifies every list against the model, after every operation.
func checkAll(t *testing.T, s Links, lists []List, m model) {
	t.Helper()
	for l := range lists {
		var got []int32
		if err := s.Check(&lists[l], func(n int32) error {
			got = append(got, n)
			return nil
		}); err != nil {
			t.Fatalf("list %d: %v", l, err)
		}
		if !slices.Equal(got, m[l]) {
			t.Fatalf("list %d holds %v, want %v", l, got, m[l])
		}
	}
}

// TestRandomOperations threads three lists through one slab and checks
// them against the model after each push and remove.
func TestRandomOperations(t *testing.T) {
	const slots, nLists = 50, 3
	rng := rand.New(rand.NewPCG(1, 2))
	s := make(Links, slots)
	lists := []List{Empty(), Empty(), Empty()}
	m := make(model, nLists)
	in := make([]int, slots) // the list holding each slot, or -1
	for i := range in {
		in[i] = -1
	}
	for range 20_000 {
		n := int32(rng.IntN(slots))
		if l := in[n]; l >= 0 {
			s.Remove(&lists[l], n)
			m.remove(l, n)
			in[n] = -1
			if s[n] != (Link{None, None}) {
				t.Fatalf("removed slot %d keeps links %+v", n, s[n])
			}
		} else {
			l := rng.IntN(nLists)
			if rng.IntN(2) == 0 {
				s.PushBack(&lists[l], n)
				m[l] = append(m[l], n)
			} else {
				s.PushFront(&lists[l], n)
				m[l] = slices.Insert(m[l], 0, n)
			}
			in[n] = l
		}
		checkAll(t, s, lists, m)
	}
}

// TestCheckFindsBrokenLinks makes sure the checker is not vacuous.
func TestCheckFindsBrokenLinks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(s Links, l *List)
	}{
		{"prev", func(s Links, l *List) { s[1].Prev = 2 }},
		{"cycle", func(s Links, l *List) { s[2].Next = 0; s[0].Prev = 2 }},
		{"back", func(s Links, l *List) { l.Back = 1 }},
		{"len", func(s Links, l *List) { l.Len++ }},
		{"range", func(s Links, l *List) { s[2].Next = 7 }},
	} {
		s := make(Links, 3)
		l := Empty()
		for n := range int32(3) {
			s.PushBack(&l, n)
		}
		if err := s.Check(&l, nil); err != nil {
			t.Fatalf("%s: intact list: %v", tc.name, err)
		}
		tc.spoil(s, &l)
		if err := s.Check(&l, nil); err == nil {
			t.Errorf("%s: broken list passed the check", tc.name)
		}
	}
}
