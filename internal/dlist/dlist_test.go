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
// them against the model after each push, insertion and remove.
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
			if s[n] != (Link{Prev: None, Next: None}) {
				t.Fatalf("removed slot %d keeps links %+v", n, s[n])
			}
		} else {
			l := rng.IntN(nLists)
			switch rng.IntN(3) {
			case 0:
				s.PushBack(&lists[l], n)
				m[l] = append(m[l], n)
			case 1:
				s.PushFront(&lists[l], n)
				m[l] = slices.Insert(m[l], 0, n)
			default: // after a random member, or at the front
				at, i := None, 0
				if k := rng.IntN(len(m[l]) + 1); k > 0 {
					at, i = m[l][k-1], k
				}
				s.InsertAfter(&lists[l], at, n)
				m[l] = slices.Insert(m[l], i, n)
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

// TestSlots allocates and frees at random: a freed slot comes back before
// the slab grows, most recently freed first, and the free chain stays
// whole while a list threads the slots in use.
func TestSlots(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var s Slots
	used := Empty()
	var free []int32 // the model: freed slots, most recent last
	inUse := map[int32]bool{}
	for range 20_000 {
		if len(inUse) > 0 && rng.IntN(2) == 0 {
			n := used.Front
			for range rng.IntN(len(inUse)) {
				n = s.Next(n)
			}
			s.Remove(&used, n)
			s.Free(n)
			delete(inUse, n)
			free = append(free, n)
		} else {
			n, grown := s.Alloc()
			switch {
			case len(free) > 0:
				if want := free[len(free)-1]; n != want || grown {
					t.Fatalf("Alloc() = %d, %v, want the freed slot %d", n, grown, want)
				}
				free = free[:len(free)-1]
			case !grown || int(n) != len(s.Links)-1:
				t.Fatalf("Alloc() = %d, %v with nothing free and %d links", n, grown, len(s.Links))
			}
			if s.Links[n] != (Link{Prev: None, Next: None}) {
				t.Fatalf("allocated slot %d has links %+v", n, s.Links[n])
			}
			s.PushBack(&used, n)
			inUse[n] = true
		}
		if err := s.CheckFree(); err != nil {
			t.Fatal(err)
		}
		if err := s.Check(&used, nil); err != nil {
			t.Fatal(err)
		}
		if s.FreeLen() != len(free) || used.Len+len(free) != len(s.Links) {
			t.Fatalf("%d free (model %d), %d used, %d links", s.FreeLen(), len(free), used.Len, len(s.Links))
		}
	}
	s.Reset()
	if n, grown := s.Alloc(); n != 0 || !grown || s.FreeLen() != 0 {
		t.Fatalf("after Reset, Alloc() = %d, %v with %d free", n, grown, s.FreeLen())
	}
}

// TestNodesKeepValues: the list's operations move a node's links and
// leave its value as it was.
func TestNodesKeepValues(t *testing.T) {
	s := make(Nodes[int], 4)
	for n := range s {
		s[n].Val = 10 * n
	}
	l := Empty()
	s.PushBack(&l, 0)
	s.PushFront(&l, 1)
	s.InsertAfter(&l, 1, 2)
	s.PushBack(&l, 3)
	s.Remove(&l, 2)
	s.Remove(&l, 0)
	if err := s.Check(&l, nil); err != nil {
		t.Fatal(err)
	}
	for n := range s {
		if s[n].Val != 10*n {
			t.Fatalf("slot %d holds %d, want %d", n, s[n].Val, 10*n)
		}
	}
}
