// Package unitcache replays accesses against a [kvevict.Policy] as a cache
// of unit-size entries: every entry is one candidate holding one block (the
// cache slot it occupies) and the cache holds a fixed number of them. It is
// the one harness that drives a policy over a trace: the tests that check
// a policy against a reference cache (the same trace must give the same
// hits) and the simulator's plain replay ([sim.Replay]) both use it.
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
//
// [sim.Replay]: https://pkg.go.dev/github.com/sagellm/kvevict/sim#Replay
package unitcache

import (
	"errors"
	"fmt"
	"time"

	"github.com/sagellm/kvevict"
)

// Cache is a cache of unit-size entries whose evictions a policy chooses.
// It is not safe for concurrent use.
type Cache struct {
	policy   kvevict.Policy
	capacity int
	tick     int64
	hits     uint64
	misses   uint64

	cands []kvevict.Candidate // the residents, in no order
	index map[uint64]int      // resident id -> index in cands
	slots []int               // slots[i] = i, for the slots used so far; a resident's Blocks is its slot's element
	free  []int               // used slots no resident holds now
	ids   []uint64            // scratch: one request's distinct ids
	one   [1]uint64           // scratch: Access's request
	seen  map[uint64]struct{} // scratch for Distinct
}

// New returns an empty cache of capacity entries driven by p. Capacity must
// be at least 1. Memory grows with the residents, not with the capacity.
func New(p kvevict.Policy, capacity int) (*Cache, error) {
	if p == nil {
		return nil, errors.New("unitcache: nil policy")
	}
	if capacity < 1 {
		return nil, fmt.Errorf("unitcache: capacity must be at least 1, got %d", capacity)
	}
	return &Cache{
		policy:   p,
		capacity: capacity,
		index:    make(map[uint64]int),
		seen:     make(map[uint64]struct{}),
	}, nil
}

// Access requests the single id and reports whether it was resident: a
// [Cache.Request] of one id with the lowest priority.
func (c *Cache) Access(id uint64) (hit bool, err error) {
	c.one[0] = id
	out, err := c.Request(c.one[:], kvevict.PriorityLow)
	return out.Loaded == 0 && err == nil, err
}

// Outcome is what one [Cache.Request] did.
type Outcome struct {
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
// touched, last first, taking prio and losing any partial mark. A request of more distinct ids than the
// capacity keeps the first Capacity. An error from the policy, or victims
// that are not resident or free too little, is returned with the cache
// unchanged but for the policy's own state. O(len(ids)) plus the selection.
func (c *Cache) Request(ids []uint64, prio kvevict.Priority) (Outcome, error) {
	for _, id := range ids {
		c.policy.UpdateAccess(id)
	}
	c.ids = Distinct(ids, c.capacity, c.ids, c.seen)
	missing := 0
	for _, id := range c.ids {
		if k, ok := c.index[id]; ok {
			c.cands[k].RefCount = 1 // in use by this request
		} else {
			missing++
		}
	}
	var out Outcome
	if need := missing - (c.capacity - len(c.cands)); need > 0 {
		res, err := c.policy.SelectVictims(c.cands, need)
		if err == nil {
			err = c.checkVictims(res.Victims, need)
		}
		if err != nil {
			c.unreference()
			return Outcome{}, fmt.Errorf("unitcache: request at tick %d: %w", c.tick, err)
		}
		for _, v := range res.Victims {
			c.remove(v.ID)
		}
		out = Outcome{Victims: res.Victims, Selected: true, Elapsed: res.Elapsed}
	}
	out.Loaded = missing
	c.misses += uint64(missing)
	c.hits += uint64(len(c.ids) - missing)
	created := c.tick + 1
	for _, id := range c.ids {
		if k, ok := c.index[id]; ok {
			c.cands[k].AccessCount++
			continue
		}
		slot := c.slot()
		c.index[id] = len(c.cands)
		c.cands = append(c.cands, kvevict.Candidate{ID: id, Blocks: c.slots[slot : slot+1 : slot+1], CreatedAt: created})
	}
	for j := len(c.ids) - 1; j >= 0; j-- {
		c.tick++
		cand := &c.cands[c.index[c.ids[j]]]
		cand.LastAccess = c.tick
		cand.RefCount = 0
		cand.Priority = prio // of the latest request to use it
		cand.LastBlockPartial = false
	}
	return out, nil
}

// MarkPartial marks resident id as the partial last block of the request
// that just touched it (Candidate.LastBlockPartial), until a request touches
// it again. It reports whether id is resident. O(1).
func (c *Cache) MarkPartial(id uint64) bool {
	k, ok := c.index[id]
	if ok {
		c.cands[k].LastBlockPartial = true
	}
	return ok
}

// slot returns a slot no resident holds: a freed one, or a new one. The
// residents' Blocks keep pointing into the old array when slots grows; its
// elements never change. Amortized O(1).
func (c *Cache) slot() int {
	if n := len(c.free); n > 0 {
		s := c.free[n-1]
		c.free = c.free[:n-1]
		return s
	}
	s := len(c.slots)
	c.slots = append(c.slots, s)
	return s
}

// checkVictims returns an error unless victims are distinct unreferenced
// residents, at least need of them. It marks each victim referenced (a
// second mention is then caught) and clears the marks if it fails; the
// caller removes the victims if it succeeds. O(len(victims)).
func (c *Cache) checkVictims(victims []kvevict.Victim, need int) error {
	var err error
	checked := 0
	for _, v := range victims {
		k, ok := c.index[v.ID]
		if !ok || c.cands[k].RefCount != 0 {
			err = fmt.Errorf("victim %d is not an unreferenced resident, or chosen twice", v.ID)
			break
		}
		c.cands[k].RefCount = 1
		checked++
	}
	if err == nil && checked < need {
		err = fmt.Errorf("selection freed %d entries, %d needed", checked, need)
	}
	if err != nil {
		for _, v := range victims[:checked] {
			c.cands[c.index[v.ID]].RefCount = 0
		}
	}
	return err
}

// unreference clears the references a failed request set.
func (c *Cache) unreference() {
	for _, id := range c.ids {
		if k, ok := c.index[id]; ok {
			c.cands[k].RefCount = 0
		}
	}
}

// remove drops resident id, moving the last resident into its place and
// freeing its slot. O(1).
func (c *Cache) remove(id uint64) {
	k := c.index[id]
	c.free = append(c.free, c.cands[k].Blocks[0])
	last := len(c.cands) - 1
	if k != last {
		c.cands[k] = c.cands[last]
		c.index[c.cands[k].ID] = k
	}
	c.cands[last] = kvevict.Candidate{}
	c.cands = c.cands[:last]
	delete(c.index, id)
}

// Check verifies the cache's bookkeeping, for tests: at most capacity
// residents, each indexed at its position, unreferenced, holding one slot
// of its own; every slot used so far held by one resident or free. O(n).
func (c *Cache) Check() error {
	if len(c.cands) > c.capacity || len(c.index) != len(c.cands) {
		return fmt.Errorf("unitcache: %d residents, %d indexed, capacity %d", len(c.cands), len(c.index), c.capacity)
	}
	held := make([]bool, len(c.slots))
	for i := range c.cands {
		cand := &c.cands[i]
		if k, ok := c.index[cand.ID]; !ok || k != i || cand.RefCount != 0 || len(cand.Blocks) != 1 {
			return fmt.Errorf("unitcache: resident %d at %d: index %d, %d references, %d blocks",
				cand.ID, i, k, cand.RefCount, len(cand.Blocks))
		}
		s := cand.Blocks[0]
		if s < 0 || s >= len(held) || held[s] {
			return fmt.Errorf("unitcache: resident %d holds slot %d, out of range or shared", cand.ID, s)
		}
		held[s] = true
	}
	for _, s := range c.free {
		if s < 0 || s >= len(held) || held[s] {
			return fmt.Errorf("unitcache: free slot %d is out of range, held or free twice", s)
		}
		held[s] = true
	}
	if len(c.cands)+len(c.free) != len(c.slots) {
		return fmt.Errorf("unitcache: %d residents + %d free slots != %d slots", len(c.cands), len(c.free), len(c.slots))
	}
	return nil
}

// Contains reports whether id is resident. O(1).
func (c *Cache) Contains(id uint64) bool {
	_, ok := c.index[id]
	return ok
}

// Len returns how many entries are resident.
func (c *Cache) Len() int { return len(c.cands) }

// Residents returns the resident ids, in no particular order.
func (c *Cache) Residents() []uint64 {
	ids := make([]uint64, len(c.cands))
	for i := range c.cands {
		ids[i] = c.cands[i].ID
	}
	return ids
}

// Hits returns how many ids, over all requests, were resident when
// requested (a request's repeats count once).
func (c *Cache) Hits() uint64 { return c.hits }

// Misses returns how many ids, over all requests, were not resident when
// requested (a request's repeats count once).
func (c *Cache) Misses() uint64 { return c.misses }

// Distinct returns ids without repeats, in order of first appearance, at
// most limit of them, in buf's storage; seen is scratch, cleared first.
// O(len(ids)).
func Distinct(ids []uint64, limit int, buf []uint64, seen map[uint64]struct{}) []uint64 {
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
