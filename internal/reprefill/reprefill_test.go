package reprefill

import (
	"math/rand/v2"
	"testing"
)

// step is one operation of a script: evict id (saying from), access it, or
// clear it; want is what an access or a clear reports.
type step struct {
	op        byte // 'e' evict, 'a' access, 'c' clear
	id        uint64
	from      int
	wantAgain bool
	wantFrom  int
}

func run(t *testing.T, l *Ledger[int], steps []step) {
	t.Helper()
	for i, s := range steps {
		var from int
		var again bool
		switch s.op {
		case 'e':
			l.Evict(s.id, s.from)
			continue
		case 'a':
			from, again = l.Access(s.id)
		case 'c':
			from, again = l.Clear(s.id)
		}
		if again != s.wantAgain || from != s.wantFrom {
			t.Fatalf("step %d (%c %d): got (%d, %v), want (%d, %v)", i, s.op, s.id, from, again, s.wantFrom, s.wantAgain)
		}
	}
}

func check(t *testing.T, l *Ledger[int], evictions, rePrefills uint64, rate, fairness float64) {
	t.Helper()
	if l.Evictions() != evictions || l.RePrefills() != rePrefills || l.Rate() != rate || l.Fairness() != fairness {
		t.Fatalf("evictions %d, re-prefills %d, rate %v, fairness %v; want %d, %d, %v, %v",
			l.Evictions(), l.RePrefills(), l.Rate(), l.Fairness(), evictions, rePrefills, rate, fairness)
	}
}

// TestLedgerCountsEachEvictionOnce: evictions of 1, 1, 2, 1 then accesses
// of 1, 1, 2, 99: the first access of 1 is one re-prefill for its three
// evictions, the second none, 2 one, 99 was never evicted. Jain over the
// counts {3, 1}: 16 / (2 * 10).
func TestLedgerCountsEachEvictionOnce(t *testing.T) {
	l := New[int](8)
	check(t, &l, 0, 0, 0, 1)
	run(t, &l, []step{
		{op: 'e', id: 1}, {op: 'e', id: 1}, {op: 'e', id: 2}, {op: 'e', id: 1},
		{op: 'a', id: 1, wantAgain: true},
		{op: 'a', id: 1},
		{op: 'a', id: 2, wantAgain: true},
		{op: 'a', id: 99},
	})
	check(t, &l, 4, 2, 0.5, 0.8)
}

// TestLedgerForgetsTheOldest: with room for two evictions, evicting 1, 2,
// 3 forgets 1, so its access counts nothing; evicting 3 again forgets 2,
// whose eviction was still pending, and leaves {3, 3}: one unit, Jain 1.
func TestLedgerForgetsTheOldest(t *testing.T) {
	l := New[int](2)
	run(t, &l, []step{
		{op: 'e', id: 1}, {op: 'e', id: 2}, {op: 'e', id: 3},
		{op: 'a', id: 1},
		{op: 'a', id: 3, wantAgain: true},
	})
	if !l.Pending(2) || l.Pending(3) || l.Pending(1) {
		t.Fatalf("pending 1, 2, 3 = %v, %v, %v; want false, true, false", l.Pending(1), l.Pending(2), l.Pending(3))
	}
	check(t, &l, 3, 1, 1.0/3, 1) // counts {1, 1}
	run(t, &l, []step{{op: 'e', id: 3}})
	if l.Pending(2) {
		t.Fatal("2 still pending after its eviction left the ring")
	}
	check(t, &l, 4, 1, 0.25, 1) // counts {2}
	// Ring {3, 5}, then {5, 5}: counts {2} again; then 6: ring {5, 6}.
	run(t, &l, []step{{op: 'e', id: 5}, {op: 'e', id: 5}, {op: 'e', id: 6}})
	check(t, &l, 7, 1, 1.0/7, 1) // counts {1, 1}
}

// TestLedgerFairness: a ring of three holding 5, 5, 6 has counts {2, 1}:
// 9 / (2 * 5).
func TestLedgerFairness(t *testing.T) {
	l := New[int](3)
	run(t, &l, []step{{op: 'e', id: 4}, {op: 'e', id: 5}, {op: 'e', id: 5}, {op: 'e', id: 6}})
	check(t, &l, 4, 0, 0, 0.9)
}

// TestLedgerZeroRemembersNothing: limit 0, as the zero value, counts
// evictions and no re-prefill.
func TestLedgerZeroRemembersNothing(t *testing.T) {
	for name, l := range map[string]Ledger[int]{"New(0)": New[int](0), "zero value": {}} {
		run(t, &l, []step{{op: 'e', id: 1}, {op: 'e', id: 1}, {op: 'a', id: 1}})
		if l.Pending(1) {
			t.Errorf("%s: 1 pending", name)
		}
		check(t, &l, 2, 0, 0, 1)
	}
}

// TestLedgerUnboundedKeepsFrom: an unbounded ledger remembers an eviction
// however many follow, reports what the caller said of the latest one, and
// Clear ends a pending eviction without counting it.
func TestLedgerUnboundedKeepsFrom(t *testing.T) {
	l := New[int](Unbounded)
	run(t, &l, []step{{op: 'e', id: 10, from: 7}, {op: 'e', id: 10, from: 8}})
	for id := uint64(100); id < 1100; id++ {
		l.Evict(id, 0)
	}
	run(t, &l, []step{
		{op: 'a', id: 10, wantAgain: true, wantFrom: 8},
		{op: 'a', id: 10},
		{op: 'e', id: 11, from: 3},
		{op: 'c', id: 11, wantAgain: true, wantFrom: 3},
		{op: 'a', id: 11},
		{op: 'a', id: 1099, wantAgain: true},
	})
	if l.Evictions() != 1003 || l.RePrefills() != 2 {
		t.Fatalf("evictions %d, re-prefills %d; want 1003, 2", l.Evictions(), l.RePrefills())
	}
}

// TestLedgerAgainstLog checks random scripts against the definition read
// off a log of every operation: an access is a re-prefill when one of the
// last limit evictions took the unit after its latest access or clear.
func TestLedgerAgainstLog(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, limit := range []int{0, 1, 3, 16, Unbounded} {
		l := New[int](limit)
		var evicted []uint64         // every eviction, in order
		lastSeen := map[uint64]int{} // unit -> evictions recorded before its latest access or clear
		var rePrefills uint64
		for i := 0; i < 5000; i++ {
			id := uint64(rng.IntN(8))
			if rng.IntN(3) == 0 {
				l.Evict(id, i)
				evicted = append(evicted, id)
				continue
			}
			first := lastSeen[id]
			if limit >= 0 {
				first = max(first, len(evicted)-limit)
			}
			want := false
			for _, e := range evicted[first:] {
				want = want || e == id
			}
			counted := rng.IntN(4) > 0
			var again bool
			if counted {
				_, again = l.Access(id)
			} else {
				_, again = l.Clear(id)
			}
			if again != want {
				t.Fatalf("limit %d, op %d on %d: again %v, want %v", limit, i, id, again, want)
			}
			if again && counted {
				rePrefills++
			}
			lastSeen[id] = len(evicted)
		}
		if l.RePrefills() != rePrefills || l.Evictions() != uint64(len(evicted)) {
			t.Fatalf("limit %d: %d re-prefills of %d evictions, want %d of %d",
				limit, l.RePrefills(), l.Evictions(), rePrefills, len(evicted))
		}
	}
}
