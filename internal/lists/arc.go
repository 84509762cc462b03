package lists

import (
	"fmt"

	"github.com/sagellm/kvevict/internal/rank"
)

// arc is the Adaptive Replacement Cache of N. Megiddo and D. S. Modha,
// "ARC: A Self-Tuning, Low Overhead Replacement Cache", FAST'03 (Fig. 4),
// over a cache of c sequences:
//
//   - t1 holds sequences seen once lately, t2 those seen at least twice;
//     both are LRU lists (head: most recent).
//   - b1 and b2 are ghosts: the ids of the latest evictions from t1 and t2,
//     no data. A request that hits b1 says t1 was too small: p grows by
//     max(1, |b2|/|b1|); a hit in b2 shrinks p by max(1, |b1|/|b2|). p and
//     both ratios are real numbers, as in the paper: rounding the ratios
//     down would make p adapt in coarser steps than the paper's ARC.
//   - p is the target size of t1. REPLACE evicts t1's LRU end when
//     |t1| > p, or |t1| == p and the request hit b2; else t2's LRU end.
//
// The paper's bounds hold after every operation: |t1|+|t2| <= c,
// |t1|+|b1| <= c, |t1|+|t2|+|b1|+|b2| <= 2c, 0 <= p <= c; the ghosts also
// hold no more than the history cap together.
//
// The paper evicts at the moment of a miss; here the allocator evicts when
// it calls SelectVictims. So a miss (access of an id not in t1 or t2)
// adapts p at once and waits as the pending request; the selection that
// follows runs REPLACE for each victim, knowing whether the request hit b2,
// then places it (case IV's ghost upkeep included). If no selection comes,
// the next operation places it, running REPLACE inside the history when the
// cache is full. Victims are taken from the LRU ends, skipping the nodes
// that are not this call's evictable candidates; if REPLACE's list has none,
// the other list gives the victim.
type arc struct {
	Table
	c        int     // cache size in sequences
	p        float64 // target size of t1, in [0, c]
	ghostCap int     // most ids b1 and b2 hold together

	pending   uint64 // a miss not yet placed
	hasPend   bool
	pendingT2 bool // the pending request hit a ghost and goes to t2
	b2Hit     bool // the latest request hit b2: REPLACE's tie goes to t1

	cursor [2]int32 // per resident list, the last victim chosen: the scan resumes there (victims stay in their list until the selection ends)
}

// ARC's lists.
const (
	arcT1 uint8 = iota // resident, seen once
	arcT2              // resident, seen at least twice
	arcB1              // ghosts evicted from t1
	arcB2              // ghosts evicted from t2
)

func newARC(cfg *rank.Config) ListHistory {
	return &arc{
		Table:    NewTable(arcT1, arcT2),
		c:        cfg.Capacity,
		ghostCap: cfg.GhostCap,
		cursor:   [2]int32{-1, -1},
	}
}

func (a *arc) Nodes() *Table { return &a.Table }

func (a *arc) PendingID() (uint64, bool) { return a.pending, a.hasPend }

func (a *arc) Access(id uint64) {
	a.Commit()
	n := a.Lookup(id)
	if n < 0 {
		a.pending, a.hasPend, a.pendingT2, a.b2Hit = id, true, false, false
		return
	}
	b1, b2 := a.Size(arcB1), a.Size(arcB2)
	switch a.Slab[n].List {
	case arcT1, arcT2: // case I: a hit
		a.MoveHead(arcT2, n)
		return
	case arcB1: // case II
		a.p = min(float64(a.c), a.p+max(1, float64(b2)/float64(b1)))
		a.b2Hit = false
	case arcB2: // case III
		a.p = max(0, a.p-max(1, float64(b1)/float64(b2)))
		a.b2Hit = true
	}
	a.Drop(n)
	a.pending, a.hasPend, a.pendingT2 = id, true, true
}

func (a *arc) Commit() {
	if !a.hasPend {
		return
	}
	a.hasPend = false
	t1, t2, b1, b2 := a.Size(arcT1), a.Size(arcT2), a.Size(arcB1), a.Size(arcB2)
	if a.pendingT2 { // cases II and III
		if t1+t2 >= a.c {
			a.replace()
		}
		a.add(a.pending, arcT2)
	} else { // case IV
		switch {
		case t1+b1 >= a.c: // A: L1 is full
			if t1 < a.c {
				a.Drop(a.Tail(arcB1))
				if t1+t2 >= a.c {
					a.replace()
				}
			} else {
				a.Drop(a.Tail(arcT1))
			}
		case t1+t2+b1+b2 >= a.c: // B: L1 has room, the directory does not
			if t1+t2+b1+b2 >= 2*a.c {
				a.Drop(a.Tail(arcB2))
			}
			if t1+t2 >= a.c {
				a.replace()
			}
		}
		a.add(a.pending, arcT1)
	}
	a.b2Hit = false
	a.normalize()
}

// replacesT1 is REPLACE's test for a t1 of length t1 > 0: evict from t1
// when it is longer than its target p, or exactly p long and the request
// hit b2.
func (a *arc) replacesT1(t1 int) bool {
	return float64(t1) > a.p || (float64(t1) == a.p && a.b2Hit)
}

// replace is the paper's REPLACE inside the history: the LRU end of t1 or
// t2 becomes a ghost, whether or not it is a candidate. Only a full cache
// with no selection to make room calls it.
func (a *arc) replace() {
	t1 := a.Size(arcT1)
	if t1 > 0 && a.replacesT1(t1) || a.Size(arcT2) == 0 {
		a.MoveHead(arcB1, a.Tail(arcT1))
	} else {
		a.MoveHead(arcB2, a.Tail(arcT2))
	}
}

// normalize restores the bounds after candidates were admitted beyond the
// capacity or the history cap is below the paper's ghost bound.
func (a *arc) normalize() {
	for a.Size(arcT1)+a.Size(arcT2) > a.c {
		a.replace()
	}
	for a.Size(arcT1)+a.Size(arcB1) > a.c {
		a.Drop(a.Tail(arcB1))
	}
	for a.Size(arcT1)+a.Size(arcT2)+a.Size(arcB1)+a.Size(arcB2) > 2*a.c {
		a.dropGhost()
	}
	for a.Size(arcB1)+a.Size(arcB2) > a.ghostCap {
		a.dropGhost()
	}
}

// dropGhost forgets the oldest ghost of the longer ghost list, b2 on a tie.
func (a *arc) dropGhost() {
	if a.Size(arcB1) > a.Size(arcB2) {
		a.Drop(a.Tail(arcB1))
	} else {
		a.Drop(a.Tail(arcB2))
	}
}

func (a *arc) Admit(id uint64) {
	if n := a.Lookup(id); n >= 0 {
		a.Drop(n) // a ghost that still holds blocks
	}
	a.add(id, arcT1)
}

func (a *arc) Victim() int32 {
	first, second := arcT2, arcT1
	if t1 := a.live(arcT1); t1 > 0 && a.replacesT1(t1) {
		first, second = arcT1, arcT2
	}
	for _, l := range [2]uint8{first, second} {
		if a.lists[l].marked == 0 {
			continue
		}
		from := a.cursor[l]
		if from < 0 || a.Slab[from].List != l {
			from = a.Tail(l)
		}
		if n := a.scan(from); n >= 0 {
			a.cursor[l] = n
			return n
		}
	}
	return -1
}

func (a *arc) Evict(n int32) {
	if a.Slab[n].List == arcT1 {
		a.MoveHead(arcB1, n)
	} else {
		a.MoveHead(arcB2, n)
	}
}

func (a *arc) Finish() {
	a.cursor = [2]int32{-1, -1}
	a.Commit()
	a.normalize()
}

// String describes the lists and the adaptation, for tests.
func (a *arc) String() string {
	return fmt.Sprintf("%vpending %d %v p %v t2 %v b2 %v", &a.Table, a.pending, a.hasPend, a.p, a.pendingT2, a.b2Hit)
}

func (a *arc) Check() error {
	if err := a.CheckTable(); err != nil {
		return err
	}
	t1, t2, b1, b2 := a.Size(arcT1), a.Size(arcT2), a.Size(arcB1), a.Size(arcB2)
	switch {
	case t1+t2 > a.c:
		return fmt.Errorf("arc: |t1|+|t2| = %d+%d > c = %d", t1, t2, a.c)
	case t1+b1 > a.c:
		return fmt.Errorf("arc: |t1|+|b1| = %d+%d > c = %d", t1, b1, a.c)
	case t1+t2+b1+b2 > 2*a.c:
		return fmt.Errorf("arc: directory %d+%d+%d+%d > 2c = %d", t1, t2, b1, b2, 2*a.c)
	case b1+b2 > a.ghostCap:
		return fmt.Errorf("arc: ghosts %d+%d > history cap %d", b1, b2, a.ghostCap)
	case !(a.p >= 0 && a.p <= float64(a.c)):
		return fmt.Errorf("arc: p = %v outside [0, %d]", a.p, a.c)
	}
	if a.hasPend && a.Lookup(a.pending) >= 0 {
		return fmt.Errorf("arc: pending id %d is also tracked", a.pending)
	}
	return nil
}
