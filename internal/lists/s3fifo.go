package lists

import (
	"fmt"

	"github.com/sagellm/kvevict/internal/rank"
)

// s3fifo is S3-FIFO, from J. Yang, Y. Zhang, Z. Qiu, Y. Yue and K. V.
// Rashmi, "FIFO queues are all you need for cache eviction", SOSP'23
// (Algorithm 1), over a cache of c sequences:
//
//   - small is a FIFO of about 10% of c that new sequences enter; main is a
//     FIFO of the rest; ghost is a FIFO of the ids evicted from small, as
//     many as main holds.
//   - Each resident sequence has a frequency counter capped at 3, raised by
//     every access; an access never moves anything (lazy promotion).
//   - An eviction takes from small while small holds at least its share,
//     else from main. Small's tail goes to main's head if it was accessed
//     there, else it is evicted to ghost; main's tail goes back to main's
//     head with its counter decremented if the counter is positive, else it
//     is evicted. A request for a ghost enters main instead of small.
//
// Two choices the paper's pseudocode leaves open follow the authors'
// libCacheSim: a sequence moves from small to main when it was accessed at
// least once in small (s3fifoMoveToMain), and its counter restarts at zero
// there. Moving to main never evicts by itself: when main outgrows its share,
// small has shrunk below its own, so the next eviction takes from main.
//
// A miss waits as the pending request until the selection that makes room
// for it, as in [arc]. The selection skips the nodes that are not this
// call's evictable candidates without touching them.
type s3fifo struct {
	Table
	c        int // cache size in sequences
	smallCap int // small's share: evict from small while it holds this many
	ghostCap int // most ids ghost holds

	pending uint64 // a miss not yet placed; it may be a ghost
	hasPend bool

	cursor [2]int32 // per resident list, the last victim chosen: the scan resumes there (victims stay in their list until the selection ends)
}

// S3-FIFO's lists.
const (
	s3Small uint8 = iota
	s3Main
	s3Ghost
)

// Tuning of S3-FIFO, as the paper sets it.
const (
	s3fifoSmallPercent = 10 // small's share of the cache, in percent
	s3fifoMaxFreq      = 3  // the frequency counter's cap (two bits)
	s3fifoMoveToMain   = 1  // accesses in small that earn a place in main
)

func newS3FIFO(cfg *rank.Config) ListHistory {
	small := max(1, cfg.Capacity*s3fifoSmallPercent/100)
	return &s3fifo{
		Table:    NewTable(s3Small, s3Main),
		c:        cfg.Capacity,
		smallCap: small,
		ghostCap: min(cfg.GhostCap, cfg.Capacity-small),
		cursor:   [2]int32{-1, -1},
	}
}

func (s *s3fifo) Nodes() *Table { return &s.Table }

func (s *s3fifo) PendingID() (uint64, bool) { return s.pending, s.hasPend }

func (s *s3fifo) Access(id uint64) {
	s.Commit()
	if n := s.Lookup(id); n >= 0 && s.Slab[n].List != s3Ghost {
		x := &s.Slab[n]
		x.Bits = min(x.Bits+1, s3fifoMaxFreq)
		return
	}
	s.pending, s.hasPend = id, true
}

// Commit places the pending miss: the paper's insert, which evicts first
// and then asks the ghost, so a ghost that this eviction pushes out of the
// ghost FIFO enters small.
func (s *s3fifo) Commit() {
	if !s.hasPend {
		return
	}
	s.hasPend = false
	if s.Size(s3Small)+s.Size(s3Main) >= s.c {
		s.Evict(s.step(false))
	}
	if n := s.Lookup(s.pending); n >= 0 {
		s.Drop(n) // a ghost
		s.add(s.pending, s3Main)
	} else {
		s.add(s.pending, s3Small)
	}
	s.normalize()
}

// normalize restores the capacity bounds after candidates were admitted
// beyond them, evicting inside the history.
func (s *s3fifo) normalize() {
	for s.Size(s3Small)+s.Size(s3Main) > s.c {
		s.Evict(s.step(false))
	}
	for s.Size(s3Ghost) > s.ghostCap {
		s.Drop(s.Tail(s3Ghost))
	}
}

func (s *s3fifo) Admit(id uint64) {
	if n := s.Lookup(id); n >= 0 {
		s.Drop(n) // a ghost that still holds blocks
	}
	s.add(id, s3Small)
}

func (s *s3fifo) Victim() int32 { return s.step(true) }

// step runs the eviction until it finds a victim and returns it, or -1 if
// there is none. restricted limits the victims, and the nodes the step
// moves, to marked nodes. O(moved nodes + skipped nodes).
func (s *s3fifo) step(restricted bool) int32 {
	fromSmall := s.live(s3Small) >= s.smallCap
	if restricted {
		if s.lists[s3Small].marked == 0 {
			fromSmall = false
		} else if s.lists[s3Main].marked == 0 {
			fromSmall = true
		}
	} else if s.Size(s3Main) == 0 {
		fromSmall = true
	}
	if fromSmall {
		if n := s.evictSmall(restricted); n >= 0 {
			return n
		}
	}
	return s.evictMain(restricted)
}

// start returns where a scan of resident list l begins.
func (s *s3fifo) start(l uint8, restricted bool) int32 {
	if n := s.cursor[l]; restricted && n >= 0 && s.Slab[n].List == l {
		return n
	}
	return s.Tail(l)
}

// resume notes where a restricted scan of list l stopped, n, so that the
// selection's next scan starts there. An unrestricted scan leaves the
// cursors alone: it runs outside the selection, and the node it stops on
// may be evicted, forgotten and its slot reused before a selection reads
// them.
func (s *s3fifo) resume(l uint8, n int32, restricted bool) {
	if restricted {
		s.cursor[l] = n
	}
}

func (s *s3fifo) eligible(n int32, restricted bool) bool {
	return !restricted || s.Marked(n)
}

// evictSmall moves small's accessed tail nodes to main and returns the first
// that was not accessed, or -1.
func (s *s3fifo) evictSmall(restricted bool) int32 {
	for n := s.start(s3Small, restricted); n >= 0; {
		x := &s.Slab[n]
		next := s.Newer(n)
		if s.eligible(n, restricted) {
			if x.Bits < s3fifoMoveToMain {
				s.resume(s3Small, n, restricted)
				return n
			}
			x.Bits = 0
			s.MoveHead(s3Main, n)
		}
		n = next
	}
	s.resume(s3Small, -1, restricted)
	return -1
}

// evictMain reinserts main's tail nodes with a positive counter, decrementing
// it, and returns the first whose counter is zero, or -1. Each pass over main
// decrements every eligible counter, so it ends within s3fifoMaxFreq+1 passes.
func (s *s3fifo) evictMain(restricted bool) int32 {
	if s.Size(s3Main) == 0 || restricted && s.lists[s3Main].marked == 0 {
		return -1
	}
	n := s.start(s3Main, restricted)
	for {
		if n < 0 {
			n = s.Tail(s3Main)
		}
		x := &s.Slab[n]
		next := s.Newer(n)
		if s.eligible(n, restricted) {
			if x.Bits == 0 {
				s.resume(s3Main, n, restricted)
				return n
			}
			x.Bits--
			s.MoveHead(s3Main, n)
		}
		n = next
	}
}

func (s *s3fifo) Evict(n int32) {
	x := &s.Slab[n]
	if x.List == s3Small {
		x.Bits = 0
		s.MoveHead(s3Ghost, n)
		if s.Size(s3Ghost) > s.ghostCap {
			s.Drop(s.Tail(s3Ghost))
		}
		return
	}
	s.Drop(n)
}

func (s *s3fifo) Finish() {
	s.cursor = [2]int32{-1, -1}
	s.Commit()
	s.normalize()
}

// String describes the lists and the pending request, for tests.
func (s *s3fifo) String() string {
	return fmt.Sprintf("%vpending %d %v", &s.Table, s.pending, s.hasPend)
}

func (s *s3fifo) Check() error {
	if err := s.CheckTable(); err != nil {
		return err
	}
	small, main, ghost := s.Size(s3Small), s.Size(s3Main), s.Size(s3Ghost)
	if small+main > s.c {
		return fmt.Errorf("s3fifo: |small|+|main| = %d+%d > c = %d", small, main, s.c)
	}
	if ghost > s.ghostCap {
		return fmt.Errorf("s3fifo: |ghost| = %d > %d", ghost, s.ghostCap)
	}
	for _, l := range []uint8{s3Small, s3Main} {
		for n := s.Tail(l); n >= 0; n = s.Newer(n) {
			if s.Slab[n].Bits > s3fifoMaxFreq {
				return fmt.Errorf("s3fifo: id %d has frequency %d > %d", s.Slab[n].ID, s.Slab[n].Bits, s3fifoMaxFreq)
			}
		}
	}
	if n := s.Lookup(s.pending); s.hasPend && n >= 0 && s.Slab[n].List != s3Ghost {
		return fmt.Errorf("s3fifo: pending id %d is also resident", s.pending)
	}
	return nil
}
