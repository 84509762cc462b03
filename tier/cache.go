package tier

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/internal/idmap"
)

// Cache is one tier's blocks: a cache of blocks named by hash, each one
// candidate holding one block (the slot it occupies), at most a capacity of
// them, whose evictions a strategy chooses. It is the one harness that
// drives a strategy over block references: each tier of a [Hierarchy],
// package sim's replay and its routers' approximate indexes, and the tests
// that check a strategy against a reference cache (the same trace must
// give the same hits) all use it.
//
// A request names one or more blocks. Following kvevict's access protocol,
// the cache calls UpdateAccess for each of them before the SelectVictims
// that makes room for them: when the missing blocks do not fit the free
// slots, one SelectVictims over the residents, the request's own
// referenced so never chosen, frees the rest. Then the missing blocks enter
// and every block of the request is touched, last first, so the first ends
// the most recent. Ticks count touches: a candidate's LastAccess is the
// tick of its latest touch, CreatedAt that of the request it entered with,
// AccessCount the requests that found it resident. Once a request gives a
// time ([Cache.RequestHints]), the ticks start from the time each request
// gives, if later, and count its touches from there.
//
// A Cache is not safe for concurrent use.
type Cache struct {
	store    store
	capacity int
	tick     int64
	hits     uint64
	misses   uint64
	// hints are the blocks' hints of the request under way
	// (RequestHints), or each its block's (a demotion's: each[j] is
	// ids[j]'s); clocked says the ticks run on the hints' clock since a
	// request gave a time. kept are the hints of the residents that carry
	// any, once clocked, and victimHints those of the latest victims, in
	// their order: a block demoted takes its hints down.
	hints       kvevict.Hints
	each        []kvevict.Hints
	clocked     bool
	kept        map[uint64]kvevict.Hints
	victimHints []kvevict.Hints

	slots   []int               // slots[i] = i, for the slots used so far; a resident's Blocks is its slot's element
	owner   []uint64            // owner[i]: the id in slot i, if it is not free
	free    []int               // used slots no resident holds now
	ids     []uint64            // scratch: one request's distinct ids
	hit     []bool              // scratch: whether ids[i] was resident
	entered []uint64            // scratch: the ids a request added
	one     [1]uint64           // scratch: Access's request
	seen    idmap.Map[struct{}] // scratch for Distinct
}

// A store holds the residents as candidates and has them ranked: by a
// Policy over a slice ([NewPolicyCache]), the contract path, or by an Index
// ([newIndexCache]), which makes a request O(log n) instead of O(n).
type store interface {
	access(id uint64)
	// reference marks resident id, the request's jth distinct block, as
	// in use by the request, or reports that it is not resident.
	reference(j int, id uint64) bool
	unreference(id uint64)
	// evict frees need entries among the unreferenced residents at tick
	// now, and returns the victims, valid until the next call. With
	// clocked, the residents' hints are read at now, which the store
	// tells the structure (clockID).
	evict(need int, now int64, clocked bool) ([]kvevict.Victim, time.Duration, error)
	// enter adds id, the request's jth distinct block, referenced,
	// holding block.
	enter(j int, id uint64, block []int, created int64) error
	// touch sets the request fields of id, its jth distinct block, which
	// reference or enter saw, and its hints h, and unreferences it.
	touch(j int, id uint64, tick int64, prio kvevict.Priority, h *kvevict.Hints, hit bool) error
	markPartial(id uint64) bool
	// remove drops an unreferenced resident and returns its slot, or
	// reports that id is not one.
	remove(id uint64) (slot int, ok bool)
	// uses returns a resident's AccessCount + 1, 0 for no resident.
	uses(id uint64) int
	contains(id uint64) bool
	len() int
	// check verifies the store against c's slots, for tests.
	check(c *Cache, free []bool) error
}

// NewCache returns an empty cache of capacity blocks under strategy s and
// opts: kept in a [kvevict.Index], O(log n) per block, where
// [kvevict.IndexRanks] allows one, else handed to a [kvevict.Policy] at
// each eviction, O(n), where only a Policy serves s and opts. Capacity must
// be at least 1.
func NewCache(s kvevict.Strategy, capacity int, opts ...kvevict.Option) (*Cache, error) {
	switch err := kvevict.IndexRanks(s, opts...); {
	case err == nil:
		x, err := kvevict.NewIndex(s, opts...)
		if err != nil {
			return nil, err
		}
		return newIndexCache(x, capacity)
	case !errors.Is(err, errors.ErrUnsupported):
		return nil, err
	}
	p, err := kvevict.New(s, opts...)
	if err != nil {
		return nil, err
	}
	return NewPolicyCache(p, capacity)
}

// NewPolicyCache returns an empty cache of capacity blocks driven by p,
// through Policy.SelectVictims over every resident at each eviction: the
// contract path, which [NewCache] takes only where no Index serves.
// Capacity must be at least 1. Memory grows with the residents, not with
// the capacity.
func NewPolicyCache(p kvevict.Policy, capacity int) (*Cache, error) {
	if p == nil {
		return nil, errors.New("tier: cache: nil policy")
	}
	return newCache(&sliceStore{policy: p, index: make(map[uint64]int)}, capacity)
}

// newIndexCache returns an empty cache of capacity blocks kept in x, which
// must be empty: the same requests pick the same victims as
// [NewPolicyCache] with a Policy of x's strategy and options (an Index
// picks as SelectVictims does), in O(log n) per block instead of O(n) per
// eviction.
func newIndexCache(x *kvevict.Index, capacity int) (*Cache, error) {
	if x == nil || x.Len() != 0 {
		return nil, errors.New("tier: cache: nil or non-empty index")
	}
	return newCache(&indexStore{x: x}, capacity)
}

func newCache(s store, capacity int) (*Cache, error) {
	if capacity < 1 {
		return nil, fmt.Errorf("tier: cache: capacity must be at least 1 block, got %d", capacity)
	}
	return &Cache{store: s, capacity: capacity}, nil
}

// Grow makes room for n residents without reallocating, where the cache
// keeps an Index: for a caller that knows how many blocks it will hold at
// most (the lesser of the capacity and the distinct blocks it will see).
func (c *Cache) Grow(n int) {
	if s, ok := c.store.(*indexStore); ok {
		s.x.Grow(n)
	}
}

// Access requests the single block id and reports whether it was
// resident: a [Cache.Request] of one block with the lowest priority.
func (c *Cache) Access(id uint64) (hit bool, err error) {
	c.one[0] = id
	out, err := c.Request(c.one[:], kvevict.PriorityLow)
	return out.Loaded == 0 && err == nil, err
}

// Outcome is what one [Cache.Request] did.
type Outcome struct {
	// Loaded is how many of the request's blocks were not resident and
	// entered, and Entered lists them, in the request's order; valid until
	// the next request.
	Loaded  int
	Entered []uint64
	// Over is how many of the request's distinct blocks it did not keep,
	// past the cache's capacity.
	Over int
	// Victims are the residents the selection removed, in the policy's
	// order; valid until the next request. Selected says whether a
	// selection ran, and Elapsed is the time it took.
	Victims  []kvevict.Victim
	Selected bool
	Elapsed  time.Duration
	// VictimHints are the victims' hints, in Victims' order, once the
	// cache has been given a time ([Cache.RequestHints]); nil before.
	// Valid until the next request.
	VictimHints []kvevict.Hints
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
// O(len(ids)) plus the selection: O(n) for n residents with [NewPolicyCache],
// O(len(ids) log n) in an Index.
func (c *Cache) Request(ids []uint64, prio kvevict.Priority) (Outcome, error) {
	c.note(ids)
	return c.admit(ids, prio, true)
}

// admit is [Cache.Request] without its first step, the strategy's note of
// the request. requested says ids are a request's: when they are not (a
// demotion from the tier above, which no request asked of this tier), a
// block found resident is touched but counts no hit and no use, and a
// block that enters no miss.
func (c *Cache) admit(ids []uint64, prio kvevict.Priority, requested bool) (Outcome, error) {
	c.ids = idmap.Distinct(ids, len(ids), c.ids, &c.seen)
	over := max(0, len(c.ids)-c.capacity)
	c.ids = c.ids[:len(c.ids)-over]
	c.hit = c.hit[:0]
	missing := 0
	for j, id := range c.ids {
		hit := c.store.reference(j, id)
		c.hit = append(c.hit, hit)
		if !hit {
			missing++
		}
	}
	var out Outcome
	if need := missing - (c.capacity - c.store.len()); need > 0 {
		victims, elapsed, err := c.store.evict(need, c.tick+1, c.clocked)
		if err != nil {
			for i, id := range c.ids {
				if c.hit[i] {
					c.store.unreference(id)
				}
			}
			return Outcome{}, fmt.Errorf("request at tick %d: %w", c.tick, err)
		}
		c.victimHints = c.victimHints[:0]
		for _, v := range victims {
			c.free = append(c.free, v.Blocks[0])
			if c.clocked {
				c.victimHints = append(c.victimHints, c.kept[v.ID])
				delete(c.kept, v.ID)
			}
		}
		out = Outcome{Victims: victims, Selected: true, Elapsed: elapsed}
		if c.clocked {
			out.VictimHints = c.victimHints
		}
	}
	out.Loaded, out.Over = missing, over
	c.entered = c.entered[:0]
	if requested {
		c.misses += uint64(missing)
		c.hits += uint64(len(c.ids) - missing)
	}
	created := c.tick + 1
	for i, id := range c.ids {
		if c.hit[i] {
			continue
		}
		c.entered = append(c.entered, id)
		slot := c.slot()
		c.owner[slot] = id
		if err := c.store.enter(i, id, c.slots[slot:slot+1:slot+1], created); err != nil {
			return Outcome{}, fmt.Errorf("request at tick %d: %w", c.tick, err)
		}
	}
	out.Entered = c.entered
	for j := len(c.ids) - 1; j >= 0; j-- {
		c.tick++
		h := &c.hints
		if c.each != nil {
			h = &c.each[j]
		}
		if err := c.store.touch(j, c.ids[j], c.tick, prio, h, requested && c.hit[j]); err != nil {
			return Outcome{}, fmt.Errorf("request at tick %d: %w", c.tick, err)
		}
		if c.clocked {
			c.keep(c.ids[j], h)
		}
	}
	return out, nil
}

// keep notes resident id's hints h, for when it is demoted.
func (c *Cache) keep(id uint64, h *kvevict.Hints) {
	switch {
	case *h != kvevict.Hints{}:
		if c.kept == nil {
			c.kept = make(map[uint64]kvevict.Hints)
		}
		c.kept[id] = *h
	case c.kept != nil:
		delete(c.kept, id)
	}
}

// RequestHints is [Cache.Request] for a request whose blocks take hints h,
// each block the latest request's as a tree's blocks do, at tick now. now
// and h's ends count the cache's ticks: the ticks move to now, if later,
// before the request's touches, one tick each, so that a resident's
// LastAccess compares with a hint's end; a caller whose clock is coarser
// than its requests' blocks scales it (package sim: microseconds times
// 4,096). The structure is told the time before it evicts. A cache given
// a time keeps its ticks on that clock. It returns an error matching
// [kvevict.ErrInvalidArgument] for a negative now or hint end, or a
// request naming the id math.MaxUint64 (the structure's clock), and one
// matching [kvevict.ErrInvalidCandidate] for hints no class holds
// (kvevict.Hints.Validate), with the cache unchanged.
func (c *Cache) RequestHints(ids []uint64, prio kvevict.Priority, h kvevict.Hints, now int64) (Outcome, error) {
	if err := checkHinted(ids, &h, now); err != nil {
		return Outcome{}, err
	}
	return c.requestAt(ids, prio, h, now)
}

// requestAt is RequestHints for hints checkHinted took.
func (c *Cache) requestAt(ids []uint64, prio kvevict.Priority, h kvevict.Hints, now int64) (Outcome, error) {
	c.clock(now)
	c.hints = h
	defer func() { c.hints = kvevict.Hints{} }()
	return c.Request(ids, prio)
}

// checkHinted refuses a hinted request RequestHints cannot take.
func checkHinted(ids []uint64, h *kvevict.Hints, now int64) error {
	switch {
	case now < 0 || h.LeaseUntil < 0 || h.RetainUntil < 0:
		return fmt.Errorf("tier: %w: a negative tick: now %d, hints %+v", kvevict.ErrInvalidArgument, now, *h)
	case slices.Contains(ids, clockID):
		return fmt.Errorf("tier: %w: block id %d is a cache's clock", kvevict.ErrInvalidArgument, uint64(clockID))
	}
	if err := h.Validate(); err != nil {
		return fmt.Errorf("tier: %w", err)
	}
	return nil
}

// clock moves the cache's ticks to now, if later, on the hints' clock
// from then on.
func (c *Cache) clock(now int64) {
	c.tick, c.clocked = max(c.tick, now), true
}

// clockID is the ID of the candidate, of no block, by which a clocked
// cache tells its structure the time.
const clockID = math.MaxUint64

// note tells the strategy of a request for ids, in order (repeats
// included), and stores none of them: Request's first step, and all a
// tier does for a request whose blocks it is not given. O(len(ids)).
func (c *Cache) note(ids []uint64) {
	for _, id := range ids {
		c.store.access(id)
	}
}

// MarkPartial marks resident id as the partial last block of the request
// that just touched it (Candidate.LastBlockPartial), until a request touches
// it again. It reports whether id is resident. O(1) with [newPolicyCache],
// O(log n) with [newIndexCache].
func (c *Cache) MarkPartial(id uint64) bool { return c.store.markPartial(id) }

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
	c.owner = append(c.owner, 0)
	return s
}

// Check verifies the cache's bookkeeping, for tests: at most capacity
// residents, each holding one slot of its own, unreferenced; every slot
// used so far held by one resident or free. O(n).
func (c *Cache) Check() error {
	n := c.store.len()
	if n > c.capacity {
		return fmt.Errorf("tier: cache: %d residents, capacity %d", n, c.capacity)
	}
	free, err := c.freeSlots()
	if err != nil {
		return err
	}
	if n+len(c.free) != len(c.slots) {
		return fmt.Errorf("tier: cache: %d residents + %d free slots != %d slots", n, len(c.free), len(c.slots))
	}
	for s := range c.slots {
		if !free[s] && !c.store.contains(c.owner[s]) {
			return fmt.Errorf("tier: cache: slot %d: its owner %d is not resident", s, c.owner[s])
		}
	}
	return c.store.check(c, free)
}

// freeSlots marks the free slots among those used so far, and reports the
// first free slot out of range or listed twice. O(slots).
func (c *Cache) freeSlots() (free []bool, err error) {
	free = make([]bool, len(c.slots))
	for _, s := range c.free {
		if s < 0 || s >= len(free) || free[s] {
			if err == nil {
				err = fmt.Errorf("tier: cache: free slot %d is out of range or free twice", s)
			}
			continue
		}
		free[s] = true
	}
	return free, err
}

// Remove drops block id, as when another tier takes it, and reports
// whether it was resident; it counts no eviction. O(1) with
// [NewPolicyCache], O(log n) in an Index.
func (c *Cache) Remove(id uint64) bool {
	slot, ok := c.store.remove(id)
	if ok {
		c.free = append(c.free, slot)
		delete(c.kept, id)
	}
	return ok
}

// Capacity returns the most blocks the cache holds.
func (c *Cache) Capacity() int { return c.capacity }

// Contains reports whether id is resident. O(1).
func (c *Cache) Contains(id uint64) bool { return c.store.contains(id) }

// Len returns how many entries are resident.
func (c *Cache) Len() int { return c.store.len() }

// Residents returns the resident ids, in no particular order. O(slots).
func (c *Cache) Residents() []uint64 {
	free, _ := c.freeSlots() // Check reports a broken free list
	ids := make([]uint64, 0, c.store.len())
	for s := range c.slots {
		if !free[s] {
			ids = append(ids, c.owner[s])
		}
	}
	return ids
}

// Hits returns how many blocks, over all requests, were resident when
// requested (a request's repeats count once).
func (c *Cache) Hits() uint64 { return c.hits }

// Misses returns how many blocks, over all requests, were not resident
// when requested (a request's repeats count once).
func (c *Cache) Misses() uint64 { return c.misses }

// Uses returns how many requests have referenced resident block id: the
// one it entered with and every one that found it resident since; 0 if it
// is not resident. O(1) with [NewPolicyCache], O(1) expected in an Index.
func (c *Cache) Uses(id uint64) int { return c.store.uses(id) }
