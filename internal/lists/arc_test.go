package lists

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"github.com/sagellm/kvevict/internal/rank"
)

// selectOne makes one selection over h among the resident ids, as a
// Policy's selection does for candidates of one block each, all evictable
// and equally old: the pending request placed first if it is among them,
// the others admitted by ID, all marked; then one victim is chosen and
// evicted. It returns the victim's id.
func selectOne(t *testing.T, h ListHistory, residents []uint64) uint64 {
	t.Helper()
	tab := h.Nodes()
	if id, ok := h.PendingID(); ok && slices.Contains(residents, id) {
		h.Commit()
	}
	tab.NextEpoch()
	var admit []int32
	for i, id := range residents {
		if n := tab.Lookup(id); n >= 0 && tab.Resident(n) {
			tab.Mark(n, int32(i))
		} else {
			admit = append(admit, int32(i))
		}
	}
	slices.SortFunc(admit, func(a, b int32) int { return cmp.Compare(residents[a], residents[b]) })
	for _, i := range admit {
		h.Admit(residents[i])
		tab.Mark(tab.Lookup(residents[i]), i)
	}
	n := h.Victim()
	if n < 0 {
		t.Fatal("no victim among marked nodes")
	}
	victim := tab.Slab[n].ID
	tab.Unmark(n)
	tab.Choose(n)
	for _, n := range tab.EndChoice() {
		h.Evict(n)
	}
	h.Finish()
	return victim
}

// checkHistory fails t if h breaks an invariant of its strategy or tracks
// more than 2c ids.
func checkHistory(t *testing.T, h History, c int) {
	t.Helper()
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	if n := h.Nodes().Tracked(); n > 2*c {
		t.Fatalf("%d ids tracked, more than 2c = %d", n, 2*c)
	}
}

// TestARCGhostAdaptation steps ARC (c = 2) by hand through the paper's
// cases: a b1 hit grows p, which sends REPLACE to t2; a b2 hit shrinks it,
// which sends REPLACE back to t1. Each step is an access, then a selection
// of one block over the other residents.
func TestARCGhostAdaptation(t *testing.T) {
	a := New(rank.KindARC, &rank.Config{Capacity: 2, GhostCap: 1 << 16}).(*arc)
	a.Access(1)
	a.Access(1) // t2 [1]
	a.Access(2) // t1 [2]
	steps := []struct {
		access    uint64
		residents []uint64
		victim    uint64
		p         float64
		t1, t2    []uint64 // LRU first, after the step
		b1, b2    []uint64
	}{
		// Case IV: |t1| = 1 > p = 0, so 2 goes to b1; 3 enters t1.
		{3, []uint64{1, 2}, 2, 0, []uint64{3}, []uint64{1}, []uint64{2}, nil},
		// Case II: p grows by max(1, 0/1) = 1; |t1| = p, so t2's 1 goes.
		{2, []uint64{1, 3}, 1, 1, []uint64{3}, []uint64{2}, nil, []uint64{1}},
		// Case III: p shrinks to 0; |t1| = 1 > 0, so t1's 3 goes.
		{1, []uint64{3, 2}, 3, 0, nil, []uint64{2, 1}, []uint64{3}, nil},
		// Case IV with t1 empty: t2's LRU 2 goes to b2.
		{4, []uint64{2, 1}, 2, 0, []uint64{4}, []uint64{1}, []uint64{3}, []uint64{2}},
		// Case II: p = 1 = |t1| again: t2's 1 goes, b2 holds 2 and 1.
		{3, []uint64{4, 1}, 1, 1, []uint64{4}, []uint64{3}, nil, []uint64{2, 1}},
		// Case III: max(1, 0/2) = 1 takes p to 0; t1's 4 goes.
		{2, []uint64{4, 3}, 4, 0, nil, []uint64{3, 2}, []uint64{4}, []uint64{1}},
	}
	ids := func(l uint8) []uint64 {
		var out []uint64
		for n := a.Tail(l); n >= 0; n = a.Newer(n) {
			out = append(out, a.Slab[n].ID)
		}
		return out
	}
	for i, st := range steps {
		a.Access(st.access)
		victim := selectOne(t, a, st.residents)
		checkHistory(t, a, 2)
		got := fmt.Sprint(victim, a.p, ids(arcT1), ids(arcT2), ids(arcB1), ids(arcB2))
		want := fmt.Sprint(st.victim, st.p, st.t1, st.t2, st.b1, st.b2)
		if got != want {
			t.Fatalf("step %d (access %d): victim, p, t1, t2, b1, b2 = %s; want %s", i+1, st.access, got, want)
		}
	}
}
