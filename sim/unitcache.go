package sim

// The unit cache replays accesses against a [kvevict.Policy] as a cache of
// unit-size entries: every entry is one candidate holding one block (the
// cache slot it occupies) and the cache holds a fixed number of them. It is
// the one harness that drives a policy over a trace: [Replay], the
// approximate index of the approx router, and the tests that check a
// policy against a reference cache (the same trace must give the same
// hits) all use it.
//
// A request names one or more ids. Following the access protocol, the
// cache calls UpdateAccess for each of them before the SelectVictims that
// makes room for them: when the missing ids do not fit the free slots, one
// SelectVictims over the residents, the request's own referenced so never
// chosen, frees the rest. Then the missing ids enter and every id of the
// request is touched, last first, so the first ends the most recent.
// Ticks count touches: a candidate's LastAccess is the tick of its latest
// touch, CreatedAt that of the request it entered with, AccessCount the
// requests that found it resident.

import (
	"errors"
	"fmt"
	"time"

	"github.com/sagellm/kvevict"
)

// unitCache is a cache of unit-size entries whose evictions a policy, or an
// index, chooses. It is not safe for concurrent use.
type unitCache struct {
	store    unitStore
	capacity int
	tick     int64
	hits     uint64
	misses   uint64

	slots []int               // slots[i] = i, for the slots used so far; a resident's Blocks is its slot's element
	owner []uint64            // owner[i]: the id in slot i, if it is not free
	free  []int               // used slots no resident holds now
	ids   []uint64            // scratch: one request's distinct ids
	hit   []bool              // scratch: whether ids[i] was resident
	one   [1]uint64           // scratch: Access's request
	seen  map[uint64]struct{} // scratch for distinct
}

// A unitStore holds the residents as candidates and has them ranked: by a
// Policy over a slice ([newPolicyCache]), the contract path, or by an Index
// ([newIndexCache]), which makes a request O(log n) instead of O(n).
type unitStore interface {
	access(id uint64)
	// reference marks resident id as in use by the request, or reports
	// that it is not resident.
	reference(id uint64) bool
	unreference(id uint64)
	// evict frees need entries among the unreferenced residents and
	// returns the victims, valid until the next call.
	evict(need int) ([]kvevict.Victim, time.Duration, error)
	// enter adds id, referenced, holding block.
	enter(id uint64, block []int, created int64) error
	// touch sets a referenced resident's request fields and unreferences
	// it.
	touch(id uint64, tick int64, prio kvevict.Priority, hit bool) error
	markPartial(id uint64) bool
	contains(id uint64) bool
	len() int
	// check verifies the store against c's slots, for tests.
	check(c *unitCache, free []bool) error
}

// newPolicyCache returns an empty cache of capacity entries driven by p,
// through Policy.SelectVictims over every resident at each eviction.
// Capacity must be at least 1. Memory grows with the residents, not with the capacity.
func newPolicyCache(p kvevict.Policy, capacity int) (*unitCache, error) {
	if p == nil {
		return nil, errors.New("sim: unit cache: nil policy")
	}
	return newUnitCache(&sliceStore{policy: p, index: make(map[uint64]int)}, capacity)
}

// newIndexCache returns an empty cache of capacity entries kept in x, which
// must be empty: the same requests pick the same victims as
// [newPolicyCache] with a Policy of x's strategy and options (an Index
// picks as SelectVictims does), in O(log n) per id instead of O(n) per
// eviction.
func newIndexCache(x *kvevict.Index, capacity int) (*unitCache, error) {
	if x == nil || x.Len() != 0 {
		return nil, errors.New("sim: unit cache: nil or non-empty index")
	}
	return newUnitCache(&indexStore{x: x}, capacity)
}

func newUnitCache(s unitStore, capacity int) (*unitCache, error) {
	if capacity < 1 {
		return nil, fmt.Errorf("sim: unit cache: capacity must be at least 1, got %d", capacity)
	}
	return &unitCache{store: s, capacity: capacity, seen: make(map[uint64]struct{})}, nil
}

// Access requests the single id and reports whether it was resident: a
// [unitCache.Request] of one id with the lowest priority.
func (c *unitCache) Access(id uint64) (hit bool, err error) {
	c.one[0] = id
	out, err := c.Request(c.one[:], kvevict.PriorityLow)
	return out.Loaded == 0 && err == nil, err
}

// outcome is what one [unitCache.Request] did.
type outcome struct {
	// Loaded is how many of the request's ids were not resident and
	// entered.
	Loaded int
	// Victims are the residents the selection removed, in the policy's
	// order; valid until the next request. Selected says whether a
	// selection ran, and Elapsed is the time it took.
	Victims  []kvevict.Victim
	Selected bool
	Elapsed  time.Duration
}

// Request makes ids resident as one request with priority prio: it calls
// UpdateAccess for every id in order (repeats included), then, if the
// distinct ids missing do not fit the free slots, asks the policy in one
// SelectVictims over the residents (the request's own referenced) for the
// rest and removes the victims; then the missing ids enter, and every id is
// touched, last first, taking prio and losing any partial mark. A request
// of more distinct ids than the capacity keeps the first Capacity. An error
// from the policy, or victims that are not resident or free too little, is
// returned with the cache unchanged but for the policy's own state.
// O(len(ids)) plus the selection: O(n) for n residents with [newPolicyCache],
// O(len(ids) log n) with [newIndexCache].
func (c *unitCache) Request(ids []uint64, prio kvevict.Priority) (outcome, error) {
	for _, id := range ids {
		c.store.access(id)
	}
	c.ids = distinct(ids, c.capacity, c.ids, c.seen)
	c.hit = c.hit[:0]
	missing := 0
	for _, id := range c.ids {
		hit := c.store.reference(id)
		c.hit = append(c.hit, hit)
		if !hit {
			missing++
		}
	}
	var out outcome
	if need := missing - (c.capacity - c.store.len()); need > 0 {
		victims, elapsed, err := c.store.evict(need)
		if err != nil {
			for i, id := range c.ids {
				if c.hit[i] {
					c.store.unreference(id)
				}
			}
			return outcome{}, fmt.Errorf("request at tick %d: %w", c.tick, err)
		}
		for _, v := range victims {
			c.free = append(c.free, v.Blocks[0])
		}
		out = outcome{Victims: victims, Selected: true, Elapsed: elapsed}
	}
	out.Loaded = missing
	c.misses += uint64(missing)
	c.hits += uint64(len(c.ids) - missing)
	created := c.tick + 1
	for i, id := range c.ids {
		if c.hit[i] {
			continue
		}
		slot := c.slot()
		c.owner[slot] = id
		if err := c.store.enter(id, c.slots[slot:slot+1:slot+1], created); err != nil {
			return outcome{}, fmt.Errorf("request at tick %d: %w", c.tick, err)
		}
	}
	for j := len(c.ids) - 1; j >= 0; j-- {
		c.tick++
		if err := c.store.touch(c.ids[j], c.tick, prio, c.hit[j]); err != nil {
			return outcome{}, fmt.Errorf("request at tick %d: %w", c.tick, err)
		}
	}
	return out, nil
}

// MarkPartial marks resident id as the partial last block of the request
// that just touched it (Candidate.LastBlockPartial), until a request touches
// it again. It reports whether id is resident. O(1) with [newPolicyCache],
// O(log n) with [newIndexCache].
func (c *unitCache) MarkPartial(id uint64) bool { return c.store.markPartial(id) }

// slot returns a slot no resident holds: a freed one, or a new one. The
// residents' Blocks keep pointing into the old array when slots grows; its
// elements never change. Amortized O(1).
func (c *unitCache) slot() int {
	if n := len(c.free); n > 0 {
		s := c.free[n-1]
		c.free = c.free[:n-1]
		return s
	}
	s := len(c.slots)
	c.slots = append(c.slots, s)
	c.owner = append(c.owner, 0)
	return s
}

// Check verifies the cache's bookkeeping, for tests: at most capacity
// residents, each holding one slot of its own, unreferenced; every slot
// used so far held by one resident or free. O(n).
func (c *unitCache) Check() error {
	n := c.store.len()
	if n > c.capacity {
		return fmt.Errorf("unit cache: %d residents, capacity %d", n, c.capacity)
	}
	free, err := c.freeSlots()
	if err != nil {
		return err
	}
	if n+len(c.free) != len(c.slots) {
		return fmt.Errorf("unit cache: %d residents + %d free slots != %d slots", n, len(c.free), len(c.slots))
	}
	for s := range c.slots {
		if !free[s] && !c.store.contains(c.owner[s]) {
			return fmt.Errorf("unit cache: slot %d: its owner %d is not resident", s, c.owner[s])
		}
	}
	return c.store.check(c, free)
}

// freeSlots marks the free slots among those used so far, and reports the
// first free slot out of range or listed twice. O(slots).
func (c *unitCache) freeSlots() (free []bool, err error) {
	free = make([]bool, len(c.slots))
	for _, s := range c.free {
		if s < 0 || s >= len(free) || free[s] {
			if err == nil {
				err = fmt.Errorf("unit cache: free slot %d is out of range or free twice", s)
			}
			continue
		}
		free[s] = true
	}
	return free, err
}

// Contains reports whether id is resident. O(1).
func (c *unitCache) Contains(id uint64) bool { return c.store.contains(id) }

// Len returns how many entries are resident.
func (c *unitCache) Len() int { return c.store.len() }

// Residents returns the resident ids, in no particular order. O(slots).
func (c *unitCache) Residents() []uint64 {
	free, _ := c.freeSlots() // Check reports a broken free list
	ids := make([]uint64, 0, c.store.len())
	for s := range c.slots {
		if !free[s] {
			ids = append(ids, c.owner[s])
		}
	}
	return ids
}

// Hits returns how many ids, over all requests, were resident when
// requested (a request's repeats count once).
func (c *unitCache) Hits() uint64 { return c.hits }

// Misses returns how many ids, over all requests, were not resident when
// requested (a request's repeats count once).
func (c *unitCache) Misses() uint64 { return c.misses }

// distinct returns ids without repeats, in order of first appearance, at
// most limit of them, in buf's storage; seen is scratch, cleared first.
// O(len(ids)).
func distinct(ids []uint64, limit int, buf []uint64, seen map[uint64]struct{}) []uint64 {
	clear(seen)
	buf = buf[:0]
	for _, id := range ids {
		if len(buf) == limit {
			break
		}
		if _, ok := seen[id]; !ok {
			seen[id] = struct{}{}
			buf = append(buf, id)
		}
	}
	return buf
}
