// Package unitcache replays an access trace against a [kvevict.Policy] as a
// cache of unit-size entries: every sequence holds one block and the cache
// holds a fixed number of them. It is the harness that checks a policy
// against a reference cache (the same trace must give the same hits) and
// that the simulator reuses to measure hit ratios.
//
// Each access calls UpdateAccess; a miss with the cache full calls
// SelectVictims over the residents for one block and removes the victims,
// then the missed sequence enters. Ticks count accesses, so a candidate's
// LastAccess is the number of its latest access and CreatedAt that of its
// entry.
package unitcache

import (
	"errors"
	"fmt"

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
	slot  map[uint64]int      // resident id -> index in cands
	block []int               // block[i] = i; each resident's Blocks is one element of it
}

// New returns an empty cache of capacity entries driven by p. Capacity must
// be at least 1.
func New(p kvevict.Policy, capacity int) (*Cache, error) {
	if p == nil {
		return nil, errors.New("unitcache: nil policy")
	}
	if capacity < 1 {
		return nil, fmt.Errorf("unitcache: capacity must be at least 1, got %d", capacity)
	}
	block := make([]int, capacity)
	for i := range block {
		block[i] = i
	}
	return &Cache{
		policy:   p,
		capacity: capacity,
		cands:    make([]kvevict.Candidate, 0, capacity),
		slot:     make(map[uint64]int, capacity),
		block:    block,
	}, nil
}

// Access requests id and reports whether it was resident. On a miss with
// the cache full it asks the policy for one block and removes the victims;
// an error from the policy, or victims that free no resident, is returned
// and leaves id out. O(1) on a hit; a miss costs one selection over the
// residents.
func (c *Cache) Access(id uint64) (hit bool, err error) {
	c.tick++
	c.policy.UpdateAccess(id)
	if i, ok := c.slot[id]; ok {
		c.cands[i].LastAccess = c.tick
		c.cands[i].AccessCount++
		c.hits++
		return true, nil
	}
	c.misses++
	if len(c.cands) >= c.capacity {
		res, err := c.policy.SelectVictims(c.cands, 1)
		if err != nil {
			return false, fmt.Errorf("unitcache: access %d of id %d: %w", c.tick, id, err)
		}
		for _, v := range res.Victims {
			if _, ok := c.slot[v.ID]; !ok {
				return false, fmt.Errorf("unitcache: access %d: victim %d is not resident", c.tick, v.ID)
			}
			c.remove(v.ID)
		}
		if len(c.cands) >= c.capacity {
			return false, fmt.Errorf("unitcache: access %d: selection freed no entry", c.tick)
		}
	}
	b := c.block[len(c.cands)]
	c.slot[id] = len(c.cands)
	c.cands = append(c.cands, kvevict.Candidate{
		ID:         id,
		Blocks:     []int{b},
		LastAccess: c.tick,
		CreatedAt:  c.tick,
	})
	return false, nil
}

// remove drops resident id, moving the last resident into its slot.
func (c *Cache) remove(id uint64) {
	i := c.slot[id]
	last := len(c.cands) - 1
	c.cands[i] = c.cands[last]
	c.slot[c.cands[i].ID] = i
	c.cands = c.cands[:last]
	delete(c.slot, id)
}

// Contains reports whether id is resident. O(1).
func (c *Cache) Contains(id uint64) bool {
	_, ok := c.slot[id]
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

// Hits returns how many accesses so far found their id resident.
func (c *Cache) Hits() uint64 { return c.hits }

// Misses returns how many accesses so far did not find their id resident.
func (c *Cache) Misses() uint64 { return c.misses }
