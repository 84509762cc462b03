package kvevict

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sagellm/kvevict/internal/lists"
	"github.com/sagellm/kvevict/internal/rank"
)

// checkClass checks that the index files the candidate in slot as its hints
// say at the index's clock: set apart or not, in the apart heap with its
// rank and key, and in ends exactly when its class changes later.
func checkClass(t testing.TB, x *Index, slot int32, c *Candidate) {
	t.Helper()
	r, class := hintRank(c, x.now)
	if !c.evictable() {
		class = rank.ClassPlain
	}
	if !c.hinted() {
		class = rank.ClassPlain
	}
	if c.apart != (class != rank.ClassPlain) {
		t.Fatalf("ID %d: apart %v, class %d at %d (hints %+v)", c.ID, c.apart, class, x.now, c.Hints)
	}
	if x.apart.Contains(slot) != (class == rank.ClassApart) {
		t.Fatalf("ID %d: in the apart heap %v, class %d", c.ID, x.apart.Contains(slot), class)
	}
	if class == rank.ClassApart {
		want := apartEntry(&x.params, c, r, slot)
		if e, er := x.apart.At(slot); e.Key != want.Key || er != r {
			t.Fatalf("ID %d: apart under %v at rank %d, want %v at %d", c.ID, e.Key, er, want.Key, r)
		}
	}
	if end := rank.HintEnd(c.rankHint(), x.now); x.apart.End(slot) != end {
		t.Fatalf("ID %d: filed under end %d, next end %d", c.ID, x.apart.End(slot), end)
	}
}

// checkSides checks the index's sums of the blocks set apart and held.
func checkSides(t testing.TB, x *Index) {
	t.Helper()
	below, above, hard := 0, 0, 0
	for slot := range x.made {
		c := x.cand(slot)
		if got, ok := x.find(c.ID); !ok || got != slot || !c.evictable() {
			continue
		}
		switch r, class := hintRank(c, x.now); {
		case !c.hinted():
		case class == rank.ClassHeld:
			hard += len(c.Blocks)
		case class == rank.ClassApart && r < rank.PlainRank:
			below += len(c.Blocks)
		case class == rank.ClassApart:
			above += len(c.Blocks)
		}
	}
	if below != x.apart.Below || above != x.apart.Above || hard != x.hard {
		t.Fatalf("apart below %d, above %d, hard %d; index says %d, %d, %d", below, above, hard, x.apart.Below, x.apart.Above, x.hard)
	}
	if err := x.apart.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestHintsOrder checks the order of the classes on a hand-made pool under
// LRU, whose own order is the oldest LastAccess first: each candidate holds
// one block, and evicting them one at a time must give the order below,
// worked from the Hints documentation.
func TestHintsOrder(t *testing.T) {
	const now = 100
	cands := []Candidate{
		{ID: 1, LastAccess: 10},                                                               // plain, oldest
		{ID: 2, LastAccess: 90, Hints: Hints{Released: true}},                                 // released, recent
		{ID: 3, LastAccess: 20, Hints: Hints{LeaseUntil: 150}},                                // soft lease, ends second
		{ID: 4, LastAccess: 5, Hints: Hints{LeaseUntil: 120}},                                 // soft lease, ends first
		{ID: 5, LastAccess: 30, Hints: Hints{LeaseUntil: 200, HardLease: true}},               // hard: never
		{ID: 6, LastAccess: 40, Hints: Hints{Retention: 10, RetainUntil: 500}},                // priority 10
		{ID: 7, LastAccess: 50, Hints: Hints{Retention: 90, RetainUntil: 500}},                // priority 90
		{ID: 8, LastAccess: 60, Hints: Hints{Retention: 10, RetainUntil: 50}},                 // priority spent: plain
		{ID: 9, LastAccess: 70, Hints: Hints{LeaseUntil: 100}},                                // lease ended at now: plain
		{ID: 10, LastAccess: 80, Hints: Hints{Released: true, LeaseUntil: 400}},               // released beats a soft lease
		{ID: 11, LastAccess: now, Pinned: true},                                               // the clock
		{ID: 12, LastAccess: 15, Hints: Hints{Retention: DefaultRetention, RetainUntil: 500}}, // the default priority: plain
	}
	for i := range cands {
		if cands[i].ID != 11 {
			cands[i].Blocks = []int{int(cands[i].ID)}
		}
	}
	want := []uint64{10, 2, 6, 1, 12, 8, 9, 7, 4, 3}
	for _, s := range []Strategy{LRU} {
		p, err := New(s)
		if err != nil {
			t.Fatal(err)
		}
		x, err := NewIndex(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cands {
			if err := x.Add(c); err != nil {
				t.Fatal(err)
			}
		}
		res, err := p.SelectVictims(cands, len(want))
		if err != nil {
			t.Fatal(err)
		}
		if got := victimIDs(res.Victims); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s Policy: victims %v, want %v", s, got, want)
		}
		if _, err := p.SelectVictims(cands, len(want)+1); !errors.Is(err, ErrInsufficientBlocks) {
			t.Errorf("%s Policy: taking the hard lease: err %v, want ErrInsufficientBlocks", s, err)
		}
		if m := p.Metrics(); m.ReleasesEvicted != 2 || m.LeasesBroken != 2 || m.LeasedBlocks != 3 {
			t.Errorf("%s Policy: releases %d, broken %d, leased blocks %d; want 2, 2, 3", s, m.ReleasesEvicted, m.LeasesBroken, m.LeasedBlocks)
		}
		for i, id := range want {
			res, err := x.Evict(1)
			if err != nil {
				t.Fatal(err)
			}
			if res.Victims[0].ID != id {
				t.Fatalf("%s Index: victim %d is %d, want %d", s, i, res.Victims[0].ID, id)
			}
			checkIndex(t, x)
		}
		if _, err := x.Evict(1); !errors.Is(err, ErrInsufficientBlocks) {
			t.Errorf("%s Index: taking the hard lease: err %v, want ErrInsufficientBlocks", s, err)
		}
		// The hard lease ends at 200: then it is plain, and taken.
		if err := x.Touch(11, 200); err != nil {
			t.Fatal(err)
		}
		checkIndex(t, x)
		if res, err := x.Evict(1); err != nil || res.Victims[0].ID != 5 {
			t.Errorf("%s Index: after the hard lease ended: %v, %v; want victim 5", s, res.Victims, err)
		}
	}
}

func victimIDs(vs []Victim) []uint64 {
	ids := make([]uint64, len(vs))
	for i, v := range vs {
		ids[i] = v.ID
	}
	return ids
}

// TestHintsIndexMatchesSelectVictims is TestIndexMatchesSelectVictims with
// hints on: every Evict of an index must return exactly the victims
// SelectVictims picks over the same candidates, for every strategy, as
// leases and retention priorities start and end.
// TestHintsOrderWithinPriority checks by hand that a class of retention
// priority other than the default is taken in the strategy's own order, not
// by recency: under FIFO the first created goes first, under LFU the least
// requested, although the other one is the less recent of the two.
func TestHintsOrderWithinPriority(t *testing.T) {
	retain := Hints{Retention: 20, RetainUntil: 1000}
	for _, tc := range []struct {
		s     Strategy
		cands []Candidate
		want  []uint64
	}{
		{FIFO, []Candidate{
			{ID: 1, CreatedAt: 1, LastAccess: 90, Hints: retain},
			{ID: 2, CreatedAt: 2, LastAccess: 10, Hints: retain},
			{ID: 3, CreatedAt: 0, LastAccess: 5}, // plain: after the class of priority 20
		}, []uint64{1, 2, 3}},
		{LFU, []Candidate{
			{ID: 1, AccessCount: 9, LastAccess: 10, Hints: retain},
			{ID: 2, AccessCount: 1, LastAccess: 90, Hints: retain},
			{ID: 3, AccessCount: 0, LastAccess: 5},
		}, []uint64{2, 1, 3}},
	} {
		cands := append(tc.cands, Candidate{ID: 4, LastAccess: 100, Pinned: true}) // the clock
		for i := range cands {
			if !cands[i].Pinned {
				cands[i].Blocks = []int{int(cands[i].ID)}
			}
		}
		for _, opts := range [][]Option{nil, {WithSampling(2)}} {
			p, err := New(tc.s, opts...)
			if err != nil {
				t.Fatal(err)
			}
			res, err := p.SelectVictims(cands, len(tc.want))
			if got := victimIDs(res.Victims); err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("%s Policy %v: victims %v (%v), want %v", tc.s, opts, got, err, tc.want)
			}
		}
		x, err := NewIndex(tc.s)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cands {
			if err := x.Add(c); err != nil {
				t.Fatal(err)
			}
		}
		for i, id := range tc.want {
			res, err := x.Evict(1)
			if err != nil || res.Victims[0].ID != id {
				t.Fatalf("%s Index: victim %d is %v (%v), want %d", tc.s, i, res.Victims, err, id)
			}
			checkIndex(t, x)
		}
	}
}

func TestHintsIndexMatchesSelectVictims(t *testing.T) { testMatchesSelectVictims(t, true) }

// FuzzHintsIndex is FuzzIndex with hints on.
func FuzzHintsIndex(f *testing.F) {
	f.Add(uint8(0), []byte{0, 1, 2, 3, 9, 9, 9, 4, 5, 6, 7, 8, 9})
	f.Add(uint8(3), []byte("leases end and released turns go first"))
	fuzzIndex(f, newHintsRunner)
}

// TestHintsErrors checks that hints no class can hold are refused, by a
// Policy (whatever the need) and an Index alike.
func TestHintsErrors(t *testing.T) {
	bad := []Hints{
		{Retention: MaxRetention + 1, RetainUntil: 10},
		{Retention: 7},
		{HardLease: true},
	}
	for _, h := range bad {
		c := Candidate{ID: 1, Blocks: []int{1}, Hints: h}
		p, _ := New(LRU)
		for _, need := range []int{0, 1} {
			if _, err := p.SelectVictims([]Candidate{c}, need); !errors.Is(err, ErrInvalidCandidate) {
				t.Errorf("SelectVictims(%+v, %d): err %v, want ErrInvalidCandidate", h, need, err)
			}
		}
		c.Pinned = true // refused even where it could not be a victim
		if _, err := p.SelectVictims([]Candidate{c, {ID: 2, Blocks: []int{2}}}, 1); !errors.Is(err, ErrInvalidCandidate) {
			t.Errorf("SelectVictims(pinned %+v): err %v, want ErrInvalidCandidate", h, err)
		}
		x, _ := NewIndex(LRU)
		if err := x.Add(c); !errors.Is(err, ErrInvalidCandidate) {
			t.Errorf("Add(%+v): err %v, want ErrInvalidCandidate", h, err)
		}
	}
}

// TestHintsSampled: a sampled Policy whose sample meets a candidate with
// hints selects the call exactly, by the classes, as the exact Policy does:
// here every candidate carries hints, so every call does.
func TestHintsSampled(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 50 {
		cands := make([]Candidate, 200)
		for i := range cands {
			cands[i] = Candidate{ID: uint64(i), Blocks: []int{i}, LastAccess: int64(rng.IntN(1000))}
			cands[i].Hints = randomHints(500, rng.IntN)
			if cands[i].Hints == (Hints{}) {
				cands[i].Hints.Released = true
			}
		}
		exact, _ := New(LRU)
		sampled, _ := New(LRU, WithSampling(5))
		need := 1 + rng.IntN(20)
		want, werr := exact.SelectVictims(cands, need)
		got, gerr := sampled.SelectVictims(cands, need)
		if (werr == nil) != (gerr == nil) || !victimsEqual(got.Victims, want.Victims) {
			t.Fatalf("round %d: sampled %v (%v), exact %v (%v)", round, victimIDs(got.Victims), gerr, victimIDs(want.Victims), werr)
		}
	}
}

// tracks reports whether history h keeps id: a node, resident or a ghost,
// or Auto's ghost of its requests.
func tracks(h lists.History, id uint64) bool {
	if h.Nodes().Lookup(id) >= 0 {
		return true
	}
	if a, ok := h.(*auto); ok {
		_, ghost := a.ghosts.Get(id)
		return ghost
	}
	return false
}

// TestHintsReleasedLeavesNoGhost checks that an adaptive strategy's
// history forgets a released victim, in a Policy and an Index alike,
// while a victim evicted by the strategy's own order stays tracked (a
// ghost, or resident until the history's bounds push it out), so that
// the check can fail.
func TestHintsReleasedLeavesNoGhost(t *testing.T) {
	for _, s := range []Strategy{ARC, S3FIFO, SIEVE, Auto} {
		for _, released := range []bool{false, true} {
			cands := make([]Candidate, 4)
			for i := range cands {
				cands[i] = Candidate{ID: uint64(i + 1), Blocks: []int{i}, LastAccess: int64(i + 1), AccessCount: 1}
			}
			// ID 3 goes first when released; else the strategy's victim,
			// which the runs below name.
			cands[2].Hints.Released = released
			p, err := New(s, WithCapacity(8))
			if err != nil {
				t.Fatal(err)
			}
			x, err := NewIndex(s, WithCapacity(8))
			if err != nil {
				t.Fatal(err)
			}
			for i := range cands {
				p.UpdateAccess(cands[i].ID)
				x.UpdateAccess(cands[i].ID)
				if err := x.Add(cands[i]); err != nil {
					t.Fatal(err)
				}
			}
			pr, err := p.SelectVictims(cands, 1)
			if err != nil {
				t.Fatal(err)
			}
			xr, err := x.Evict(1)
			if err != nil {
				t.Fatal(err)
			}
			pv, xv := pr.Victims[0].ID, xr.Victims[0].ID
			if pv != xv || released && pv != 3 {
				t.Fatalf("%s, released %v: victims %d (Policy) and %d (Index), want the same (3 if released)", s, released, pv, xv)
			}
			xh := x.hist.h
			for name, h := range map[string]lists.History{"Policy": p.(*policy).history(), "Index": xh} {
				// SIEVE keeps no ghosts: its victims are never tracked.
				if got, want := tracks(h, pv), !released && s != SIEVE; got != want {
					t.Errorf("%s %s, released %v: the history tracks victim %d: %v", s, name, released, pv, got)
				}
			}
		}
	}
}

// TestHintsLeaseMetrics follows four leases through an Index, worked by
// hand: A's is honoured by a request under it (and not again when it
// ends), B's is renewed before any came (honoured, wasted), C's is broken
// by an eviction, and B's renewal ends unread (honoured, wasted).
func TestHintsLeaseMetrics(t *testing.T) {
	x, err := NewIndex(LRU)
	if err != nil {
		t.Fatal(err)
	}
	lease := func(id uint64, last, until int64) Candidate {
		return Candidate{ID: id, Blocks: []int{int(id)}, LastAccess: last, Hints: Hints{LeaseUntil: until}}
	}
	for _, c := range []Candidate{lease(1, 1, 10), lease(2, 2, 20), lease(3, 3, 30), {ID: 4, Blocks: []int{4}, LastAccess: 4}} {
		if err := x.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	step := func(what string, err error, honoured, wasted, broken uint64) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		m := x.Metrics()
		if m.LeasesHonoured != honoured || m.LeasesWasted != wasted || m.LeasesBroken != broken {
			t.Fatalf("after %s: honoured %d, wasted %d, broken %d; want %d, %d, %d", what,
				m.LeasesHonoured, m.LeasesWasted, m.LeasesBroken, honoured, wasted, broken)
		}
	}
	step("A touched under its lease", x.Touch(1, 5), 1, 0, 0)
	step("the clock past A's end", x.Touch(4, 12), 1, 0, 0)
	step("B renewed unread", x.Update(lease(2, 15, 40)), 2, 1, 0)
	// Three blocks: the plain ones by LRU, 1 (its lease over, last
	// touched at 5) and 4 (at 12), then the soft lease ending first, 3's
	// (30) before 2's (40).
	res, err := x.Evict(3)
	if err == nil && fmt.Sprint(res.Victims) != "[{1 [1]} {4 [4]} {3 [3]}]" {
		t.Fatalf("victims %v, want 1, 4, then 3", res.Victims)
	}
	step("C broken", err, 2, 1, 1)
	step("the clock past B's renewal", x.Add(Candidate{ID: 5, Blocks: []int{5}, LastAccess: 50}), 3, 2, 1)
}
