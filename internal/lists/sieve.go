package lists

import (
	"fmt"

	"github.com/sagellm/kvevict/internal/rank"
)

// sieve is SIEVE, from Y. Zhang, J. Yang, Y. Yue, Y. Vigfusson and K. V.
// Rashmi, "SIEVE is Simpler than LRU: an Efficient Turn-Key Eviction
// Algorithm for Web Caches", NSDI'24 (Fig. 2), over a cache of c sequences:
// one FIFO queue, new sequences at its head, a visited bit per sequence set
// by every access, and a hand that survives between evictions. To evict, the
// hand walks from where it stopped (the tail at first) toward the head,
// clearing visited bits, and evicts the first sequence whose bit is clear;
// it then rests on that sequence's newer neighbour, wrapping to the tail
// past the head. Nothing moves on a hit.
//
// A miss waits as the pending request until the selection that makes room
// for it, as in [arc]. The hand passes the nodes that are not this call's
// evictable candidates without touching their bits.
type sieve struct {
	Table
	c    int   // cache size in sequences
	hand int32 // where the next eviction starts; -1: the tail

	pending uint64 // a miss not yet placed
	hasPend bool
}

// sieveQueue is SIEVE's one list.
const sieveQueue uint8 = 0

func newSIEVE(cfg *rank.Config) ListHistory {
	return &sieve{Table: NewTable(sieveQueue), c: cfg.Capacity, hand: -1}
}

func (s *sieve) Nodes() *Table { return &s.Table }

func (s *sieve) PendingID() (uint64, bool) { return s.pending, s.hasPend }

func (s *sieve) Access(id uint64) {
	s.Commit()
	if n := s.Lookup(id); n >= 0 {
		s.Slab[n].Bits = 1
		return
	}
	s.pending, s.hasPend = id, true
}

func (s *sieve) Commit() {
	if !s.hasPend {
		return
	}
	s.hasPend = false
	if s.Size(sieveQueue) >= s.c {
		s.Evict(s.sweep(false))
	}
	s.add(s.pending, sieveQueue)
	s.normalize()
}

// normalize restores the capacity bound after candidates were admitted
// beyond it, evicting inside the history.
func (s *sieve) normalize() {
	for s.Size(sieveQueue) > s.c {
		s.Evict(s.sweep(false))
	}
}

func (s *sieve) Admit(id uint64) { s.add(id, sieveQueue) }

func (s *sieve) Victim() int32 { return s.sweep(true) }

// sweep moves the hand to the next victim and returns it, or -1 if there is
// none. restricted limits the victims, and the bits the hand clears, to
// marked nodes. The first pass clears every eligible bit, so it ends within
// two passes over the queue.
func (s *sieve) sweep(restricted bool) int32 {
	if s.Size(sieveQueue) == 0 || restricted && s.lists[sieveQueue].marked == 0 {
		return -1
	}
	n := s.hand
	for {
		if n < 0 {
			n = s.Tail(sieveQueue)
		}
		x := &s.Slab[n]
		if !restricted || s.Marked(n) {
			if x.Bits == 0 {
				s.hand = n
				return n
			}
			x.Bits = 0
		}
		n = s.Newer(n)
	}
}

func (s *sieve) Evict(n int32) {
	if s.hand == n { // the hand stops on the last victim chosen
		s.hand = s.Newer(n)
	}
	s.Drop(n)
}

// Forget evicts: SIEVE keeps no ghosts.
func (s *sieve) Forget(id uint64) {
	if n := s.Lookup(id); n >= 0 {
		s.Evict(n)
	}
}

func (s *sieve) Finish() {
	s.Commit()
	s.normalize()
}

// String describes the queue, the pending request and the hand, for
// tests.
func (s *sieve) String() string {
	return fmt.Sprintf("%vpending %d %v hand %d", &s.Table, s.pending, s.hasPend, s.hand)
}

func (s *sieve) Check() error {
	if err := s.CheckTable(); err != nil {
		return err
	}
	if q := s.Size(sieveQueue); q > s.c {
		return fmt.Errorf("sieve: |queue| = %d > c = %d", q, s.c)
	}
	if s.hand >= 0 && (int(s.hand) >= len(s.Slab) || s.Lookup(s.Slab[s.hand].ID) != s.hand) {
		return fmt.Errorf("sieve: hand %d is not a tracked node", s.hand)
	}
	if s.hasPend && s.Lookup(s.pending) >= 0 {
		return fmt.Errorf("sieve: pending id %d is also tracked", s.pending)
	}
	return nil
}
