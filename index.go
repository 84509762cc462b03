package kvevict

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"

	"github.com/sagellm/kvevict/internal/blockcount"
	"github.com/sagellm/kvevict/internal/dlist"
	"github.com/sagellm/kvevict/internal/idmap"
	"github.com/sagellm/kvevict/internal/lists"
	"github.com/sagellm/kvevict/internal/options"
	"github.com/sagellm/kvevict/internal/rank"
)

// Index keeps the candidates of a KV pool ordered by a key strategy between
// evictions, so that an eviction costs O(k log n) for k victims among n
// sequences instead of the O(n) pass of [Policy.SelectVictims], and a request
// costs O(log n). It follows the access protocol of the package
// documentation under its own verbs, because it holds the candidates: the
// allocator adds a [Candidate] when a request's sequence is not resident
// ([Index.Add]), reports every request of a resident one with
// [Index.Touch], other changes with [Index.Update], [Index.Pin] or
// [Index.Lock], and calls [Index.Evict] when it needs blocks; the index
// removes its victims.
//
// Evict follows the rules of SelectVictims exactly: greedy smallest key
// first within the classes of [Hints] (released candidates first, live soft
// leases last, live hard leases never), equal keys broken by ID, pinned
// and referenced candidates skipped,
// the last victim trimmed to a tail of its blocks when it allows partial
// eviction, and nothing evicted (an error matching [ErrInsufficientBlocks])
// when the evictable blocks cannot cover the need. For the same candidates it
// picks the same victims as a [Policy] of the same strategy and options. It
// also refuses, with an error matching [ErrInvalidCandidate], an eviction
// whose victims would free a block that another held candidate lists,
// which a Policy, shown one call's candidates, checks among its victims only.
//
// Every strategy works with the index, with one exception, which no
// incremental order can follow and [NewIndex] rejects: a key that depends
// on the current tick (FrequencyCost with [WithCostDecay] > 0) changes for
// every candidate as time passes; a [Policy] over a candidate slice serves
// it. The adaptive strategies (ARC, S3-FIFO, SIEVE, Auto) rank by a history
// of requests, as their Policy does: call [Index.UpdateAccess] for every
// request, before the Evict that makes room for it.
//
// # Costs
//
// An Evict of k victims costs O(k log n) for n held sequences, and O(k)
// under LRU with ticks that only grow, as an allocator's clock does;
// Touch, Update, Pin, Lock and Unlock cost O(log n), a Touch under LRU
// with growing ticks O(1); Add and Remove O(log n) plus the candidate's
// blocks. Under ARC, S3-FIFO and SIEVE an eviction costs the steps their
// lists take from their tails, as in their papers; under Auto, the steps
// over its groups of candidates requested as often. A candidate with
// hints costs O(log n) more per change, and a lease that ends O(log n)
// once.
// docs/index.md says how each order keeps these bounds and what memory a
// sequence takes.
//
// # Metrics
//
// [Index.Metrics] reports the same fields as [Policy.Metrics]: an Evict that
// removes something counts as a selection. Re-prefill detection follows
// UpdateAccess where it means the same: adding an ID that was evicted
// (its prefill is redone) counts a re-prefill, as does the first Touch of a
// sequence after a partial eviction trimmed its tail. A Touch of a sequence
// that lost nothing counts nothing.
//
// # Memory and concurrency
//
// The index keeps each Candidate by value, including its Blocks slice header
// (not a copy of the blocks): the caller must not modify a Blocks slice while
// its candidate is in the index, and a Victim's Blocks share it. Memory is
// O(peak number of sequences and of blocks listed), plus the
// bounded eviction history of [WithEvictionHistory] and an adaptive
// strategy's history ([WithCapacity], [WithGhostCap]). An Index is not safe
// for concurrent use: the allocator guards it with the lock that guards
// its pool.
type Index struct {
	strategy Strategy
	logger   *slog.Logger
	watch    stopwatch // Result.Elapsed

	held      int     // candidates held
	made      int32   // slots made, held or free
	free      []int32 // the free slots
	available int     // blocks held by evictable candidates

	// listed counts the held candidates that list each block (twice for
	// one that lists it twice), so that Evict refuses to free a block
	// another candidate still lists: the allocator would free it twice.
	// Running sequences may share blocks, as a prefix cache's do; only a
	// victim's must be its own.
	listed blockcount.Counts

	// slots holds the candidates by slot, each beside what its order
	// keeps of it, and ids finds them by ID, but in an Index of ARC,
	// S3-FIFO or SIEVE, whose history's table finds them (byHistory): one
	// look-up finds a candidate and its history's node, where two tables
	// would take two, each a cache miss in a large index.
	slots     dlist.Nodes[held]
	ids       idmap.Map[int32]
	byHistory bool
	// hist is an adaptive strategy's history and the links of its nodes to
	// the slots (indexhistory.go); nil for a key strategy.
	hist *tracked
	// ord keeps the ranked candidates in eviction order: by key
	// (orderkey.go), by an adaptive strategy's lists (orderlist.go) or by
	// Auto's groups (orderauto.go). fix is ord's, if it has one; prep
	// Auto's.
	ord   order
	fix   fixer
	prep  *autoOrder
	txn   transaction
	taken []int32 // the slots of the victims of the transaction under way

	// The hints' classes (see [Hints]): the candidates their hints set
	// apart from the order, and the clock that ends leases.
	now    int64      // the latest tick told
	params keyParams  // the strategy's keys, by which a key strategy orders each class
	apart  rank.Apart // the evictable candidates set apart, and the ends
	hard   int        // blocks under live hard leases, not available
	// The eviction under way: how many blocks the order gives, and has
	// given, and the order's victims among taken.
	ordNeed, ordFreed int
	ordTaken          []int32

	stats stats
}

// held is a slot of an Index: its candidate, and beside it its key while
// a key order keeps it in its run (orderkey.go).
type held struct {
	c   Candidate
	key rank.Key
}

// order keeps the ranked candidates of an Index (evictable, not set apart
// by their hints) in eviction order between evictions: one small interface,
// as heap.Interface is, that the Index calls and that never calls it
// back. The Index owns the slots and tells the order of a slot that
// becomes ranked (insert) or stops being ranked (remove); an eviction
// calls next until the victims cover the need, then the Index removes
// the victims or inserts them back. The costs are each implementation's.
type order interface {
	// insert ranks the candidate in slot; one the order ranks already
	// stays as it is.
	insert(slot int32)
	// remove takes the candidate in slot out of the order, if it is in it.
	remove(slot int32)
	// next takes the next victim out of the order and returns its slot.
	// The ranked candidates must hold blocks.
	next() int32
}

// fixer is an order that a ranked candidate's fields move (a key order,
// Auto's groups); the lists of ARC, S3-FIFO and SIEVE follow requests
// alone.
type fixer interface {
	// fix files the ranked candidate in slot again after its fields
	// changed, or, in Auto's order, its count of requests.
	fix(slot int32)
}

// maxIndexLen bounds how many sequences an index holds, so slots and heap
// positions fit an int32.
const maxIndexLen = math.MaxInt32

// NewIndex returns an empty index ranking by strategy s, configured by the
// same options as [New] but [WithSampling]. It returns [IndexRanks]'s
// error where that is not nil: one matching [ErrUnknownStrategy] for an
// unregistered strategy, one matching [errors.ErrUnsupported] for what
// only a Policy serves, and one matching [ErrInvalidArgument] for an
// invalid or inapplicable option.
func NewIndex(s Strategy, opts ...Option) (*Index, error) {
	info, cfg, err := resolveIndex(s, opts)
	if err != nil {
		return nil, err
	}
	x := &Index{
		params:   newKeyParams(info.Kind, &cfg),
		now:      math.MinInt64,
		strategy: Strategy(info.Name),
		logger:   cfg.Logger,
		stats:    newStats(Strategy(info.Name), &cfg),
		watch:    newStopwatch(&cfg),
	}
	switch {
	case info.Kind == rank.KindAuto:
		a := newAuto(&cfg)
		x.hist = newTracked(a, &x.slots)
		x.prep = newAutoOrder(a, &x.slots, &x.hist.st)
		x.ord, x.hist.fix = x.prep, x.prep
	case info.Kind.Adaptive():
		h := lists.New(info.Kind, &cfg.Config)
		x.hist = newTracked(h, &x.slots)
		x.ord, x.byHistory = &listOrder{lists: h, t: h.Nodes(), st: &x.hist.st}, true
	default:
		o := newKeyOrder(x.params, &x.slots)
		x.ord, x.fix = o, o
	}
	if x.hist != nil {
		x.hist.ord = x.ord
	}
	return x, nil
}

// IndexRanks reports whether an [Index] keeps candidates in strategy s's
// order under opts: nil exactly when NewIndex(s, opts...) returns an
// index. Where s and opts ask for what only a [Policy] does, it returns an
// error matching [errors.ErrUnsupported], and New(s, opts...) serves them:
// a key that changes with the current tick (FrequencyCost with
// [WithCostDecay] > 0), which no incremental order can follow, and a
// sampled selection ([WithSampling], whose error matches
// [ErrInvalidArgument] too). Otherwise it returns NewIndex's error for an
// unknown strategy or an invalid option. It builds nothing: O(len(opts)).
func IndexRanks(s Strategy, opts ...Option) error {
	_, _, err := resolveIndex(s, opts)
	return err
}

// resolveIndex is resolve for NewIndex, which also refuses a key that
// reads the current tick (Auto reads the tick too, and its groups follow
// it).
func resolveIndex(s Strategy, opts []Option) (options.Info, options.Config, error) {
	info, cfg, err := options.Resolve(string(s), opts, options.ForIndex)
	if err == nil && rank.UsesNow(info.Kind, &cfg.Config) {
		err = fmt.Errorf("kvevict: NewIndex(%q) with cost decay: %w: the key changes with the current tick, which no incremental order can follow; use a Policy", s, errors.ErrUnsupported)
	}
	return info, cfg, err
}

// Grow makes room for n more sequences, so that the next n Adds do not
// reallocate the index's tables, as [slices.Grow] does for a slice: for an
// allocator that knows how many sequences its pool holds at most, which
// saves the copies of a table that doubles as it fills. The count of the
// blocks listed gets room for one block a sequence numbered as a pool
// numbers its blocks, from 0 up; other blocks, and blocks listed twice,
// grow it as they come. n <= 0 does nothing. O(sequences held + n), once.
func (x *Index) Grow(n int) {
	if n <= 0 {
		return
	}
	n = min(n, maxIndexLen-x.held)
	x.slots = slices.Grow(x.slots, n)
	if !x.byHistory {
		x.ids.Reserve(n)
	}
	if x.hist != nil {
		x.hist.grow(n)
	}
	x.listed.Reserve(x.held + n)
}

// Len returns how many sequences the index holds, evictable or not. O(1).
func (x *Index) Len() int { return x.held }

// EvictableBlocks returns how many blocks the evictable sequences hold
// (unpinned, unreferenced, under no live hard lease): the most one Evict
// can free. O(1).
func (x *Index) EvictableBlocks() int { return x.available }

// Get returns the candidate with the given ID as the index holds it. O(1).
func (x *Index) Get(id uint64) (Candidate, bool) {
	slot, ok := x.find(id)
	if !ok {
		return Candidate{}, false
	}
	c := *x.cand(slot)
	c.apart, c.leaseHit = false, false
	return c, true
}

// Add inserts c. It returns an error matching [ErrInvalidCandidate] if c has
// a negative RefCount, AccessCount, EstimatedLifetime, SeqLen or MaxLen,
// its ID is already in the index, or, in an index of [Auto], the id Auto
// counts it by (its HeadHash, else its ID) is another held candidate's;
// and one matching [ErrInvalidArgument] if the index already holds
// math.MaxInt32 sequences. c may list blocks that other held candidates
// list, as running sequences share a cached prefix, but [Index.Evict]
// refuses to free such a block. Adding an ID that an earlier Evict took
// counts a re-prefill. O(log n + b) for b blocks, each counted by a bit
// (or, listed twice or numbered far beyond the others, in a hash table).
func (x *Index) Add(c Candidate) error {
	if err := x.check(-1, &c); err != nil {
		return err
	}
	if _, dup := x.find(c.ID); dup {
		return fmt.Errorf("%w: ID %d is already in the index", ErrInvalidCandidate, c.ID)
	}
	if x.held >= maxIndexLen {
		return fmt.Errorf("%w: the index is full (%d sequences)", ErrInvalidArgument, x.held)
	}
	var slot int32
	if n := len(x.free); n > 0 {
		slot, x.free = x.free[n-1], x.free[:n-1]
	} else {
		slot = x.made
		x.made++
	}
	x.held++
	x.list(c.Blocks)
	x.stats.evictions.Access(c.ID)
	x.tell(c.LastAccess)
	if int(slot) == len(x.slots) {
		x.slots = append(x.slots, dlist.Node[held]{Prev: dlist.None, Next: dlist.None})
	}
	x.slots[slot].Val.c = c // its key is set when a key order files it
	p := x.cand(slot)
	p.leaseHit = false
	if p.hinted() {
		x.file(slot, p)
	} else if p.evictable() { // file's case without hints, for a new slot
		x.available += len(p.Blocks)
	}
	if !x.byHistory {
		x.ids.Put(c.ID, slot)
	}
	switch {
	case x.hist != nil:
		x.hist.add(slot)
	case p.ranked():
		x.ord.insert(slot)
	}
	return nil
}

// find returns the slot of the candidate of ID id, if held. O(1).
func (x *Index) find(id uint64) (int32, bool) {
	if x.byHistory {
		return x.hist.find(id)
	}
	return x.ids.Get(id)
}

// cand returns the candidate in slot.
func (x *Index) cand(slot int32) *Candidate { return &x.slots[slot].Val.c }

// check reports a candidate the index cannot hold in slot (-1: a new
// one): one with a negative field, or one the order refuses.
func (x *Index) check(slot int32, c *Candidate) error {
	if !valid(c) {
		field, value := negativeField(c)
		return fmt.Errorf("%w: ID %d has negative %s %v", ErrInvalidCandidate, c.ID, field, value)
	}
	if err := checkHints(&c.Hints); err != nil {
		return invalidHints(c, -1, err)
	}
	if x.prep != nil {
		return x.hist.accepts(slot, c)
	}
	return nil
}

// list counts blocks as listed by one more held candidate, unlist as by
// one fewer.
func (x *Index) list(blocks []int) {
	for _, b := range blocks {
		x.listed.Add(b)
	}
}

func (x *Index) unlist(blocks []int) {
	for _, b := range blocks {
		x.listed.Remove(b)
	}
}

// sharedBlock reports an error matching ErrInvalidCandidate if victims
// would free a block that another held candidate lists, or that they
// list twice: the allocator would free it twice. It is the Index's check
// before a transaction commits, in place of the one over the victims
// alone that a Policy makes: one look-up per freed block, and none while
// no block is listed twice.
func (x *Index) sharedBlock(victims []Victim) error {
	if !x.listed.Shared() {
		return nil
	}
	for i := range victims {
		for _, b := range victims[i].Blocks {
			if x.listed.Count(b) > 1 {
				return x.sharedError(victims[i].ID, b)
			}
		}
	}
	return nil
}

// sharedError describes block b, which victim id would free while another
// held candidate lists it, or while id lists it twice. O(n) for n held
// candidates: it runs only on the refusal.
func (x *Index) sharedError(id uint64, b int) error {
	for slot := range x.made {
		c := x.cand(slot)
		if c.ID != id && slices.Contains(c.Blocks, b) {
			return fmt.Errorf("%w: block %d, which ID %d would free, is listed by ID %d too", ErrInvalidCandidate, b, id, c.ID)
		}
	}
	return fmt.Errorf("%w: ID %d lists block %d twice", ErrInvalidCandidate, id, b)
}

// Remove deletes the sequence with the given ID, as when it finishes and the
// allocator frees its blocks itself, and reports whether it was there. It
// counts no eviction. O(log n).
func (x *Index) Remove(id uint64) bool {
	slot, ok := x.find(id)
	if !ok {
		return false
	}
	x.unfile(slot, x.cand(slot))
	x.release(slot, false)
	return true
}

// release frees a slot: its candidate leaves the order and the index,
// and, a victim released by its hints, the order's history.
func (x *Index) release(slot int32, victim bool) {
	x.unlist(x.cand(slot).Blocks)
	x.drop(slot, victim)
}

// drop is release for a candidate whose blocks are already unlisted.
func (x *Index) drop(slot int32, victim bool) {
	if x.apart.Ending() {
		x.apart.SetEnd(slot, 0, 0)
	}
	c := x.cand(slot)
	if x.hist != nil {
		x.hist.remove(slot, victim && c.Hints.Released)
	} else {
		x.ord.remove(slot)
	}
	if !x.byHistory {
		x.ids.Del(c.ID)
	}
	x.slots[slot].Val.c = Candidate{} // drop the Blocks reference
	x.held--
	x.free = append(x.free, slot)
}

// Touch records a request of resident sequence id at tick, as
// [Policy.UpdateAccess] does for a policy: LastAccess = tick and
// AccessCount + 1 (saturating), then it re-ranks the sequence. It returns an error
// matching [ErrUnknownSequence] if the index does not hold id. It allocates
// nothing. O(log n); O(1) when the new key sorts after every key in the run,
// as every touch does under LRU with growing ticks (see Order structure).
func (x *Index) Touch(id uint64, tick int64) error {
	slot, ok := x.find(id)
	if !ok {
		return unknownSequence(id)
	}
	// A held sequence has a pending eviction only if a partial one trimmed
	// it since its last access: that Touch is a re-prefill.
	x.stats.evictions.Access(id)
	x.tell(tick)
	c := x.cand(slot)
	if c.Hints.LeaseUntil > x.now && !c.leaseHit {
		c.leaseHit = true
		x.stats.leaseHonoured(true)
	}
	if c.apart {
		x.change(slot, func(c *Candidate) { touch(c, tick) })
		return nil
	}
	old, was := c.LastAccess, c.ranked()
	touch(c, tick)
	x.refile(slot, was, old)
	return nil
}

// touch records a request of c at tick.
func touch(c *Candidate, tick int64) {
	c.LastAccess = tick
	if c.AccessCount < math.MaxInt {
		c.AccessCount++
	}
}

// Update replaces every field of the held candidate with c.ID by c's and
// re-ranks it, for changes Touch does not cover (blocks appended by decoding,
// a new priority or lifetime estimate). It returns an error matching
// [ErrUnknownSequence] if the index does not hold c.ID and one matching
// [ErrInvalidCandidate] if c has a negative field or, in an index of Auto,
// would be counted by another held candidate's HeadHash. A new HeadHash
// (the pool took the candidate's head blocks) files it under the new head.
// O(log n + b) for the b blocks of the old candidate and the new.
func (x *Index) Update(c Candidate) error {
	slot, ok := x.find(c.ID)
	if !ok {
		if err := x.check(-1, &c); err != nil {
			return err
		}
		return unknownSequence(c.ID)
	}
	if err := x.check(slot, &c); err != nil {
		return err
	}
	x.tell(c.LastAccess)
	x.unlist(x.cand(slot).Blocks)
	x.list(c.Blocks)
	x.change(slot, func(old *Candidate) {
		if c.Hints.LeaseUntil == old.Hints.LeaseUntil {
			c.leaseHit = old.leaseHit
		} else if old.Hints.LeaseUntil > x.now && !old.leaseHit {
			x.stats.leaseHonoured(false) // replaced or withdrawn unread: it ends here
		}
		*old = c
	})
	return nil
}

// Pin sets whether sequence id is pinned (never evicted). It returns an
// error matching [ErrUnknownSequence] if the index does not hold id.
// O(log n).
func (x *Index) Pin(id uint64, pinned bool) error {
	slot, ok := x.find(id)
	if !ok {
		return unknownSequence(id)
	}
	x.change(slot, func(c *Candidate) { c.Pinned = pinned })
	return nil
}

// Lock adds one reference to sequence id: a running request uses its
// blocks, so it is not evicted until the matching [Index.Unlock]. It returns
// an error matching [ErrUnknownSequence] if the index does not hold id and
// one matching [ErrInvalidArgument] if the count would overflow. O(log n).
func (x *Index) Lock(id uint64) error {
	slot, ok := x.find(id)
	if !ok {
		return unknownSequence(id)
	}
	if x.cand(slot).RefCount == math.MaxInt {
		return fmt.Errorf("%w: reference count of ID %d would overflow", ErrInvalidArgument, id)
	}
	x.change(slot, func(c *Candidate) { c.RefCount++ })
	return nil
}

// Unlock drops one reference to sequence id; at zero references it becomes
// evictable again unless pinned. It returns an error matching
// [ErrUnknownSequence] if the index does not hold id and one matching
// [ErrInvalidArgument] if id holds no reference. O(log n).
func (x *Index) Unlock(id uint64) error {
	slot, ok := x.find(id)
	if !ok {
		return unknownSequence(id)
	}
	if x.cand(slot).RefCount == 0 {
		return fmt.Errorf("%w: ID %d holds no reference to release", ErrInvalidArgument, id)
	}
	x.change(slot, func(c *Candidate) { c.RefCount-- })
	return nil
}

func unknownSequence(id uint64) error {
	return fmt.Errorf("%w: ID %d is not in the index", ErrUnknownSequence, id)
}

// change applies f to the candidate in slot and has the order file it
// again.
func (x *Index) change(slot int32, f func(*Candidate)) {
	c := x.cand(slot)
	x.unfile(slot, c)
	old, was := c.LastAccess, c.ranked()
	f(c)
	x.file(slot, c)
	x.refile(slot, was, old)
}

// refile has the order follow the candidate in slot after it changed:
// was says it was ranked before, old is its LastAccess before.
func (x *Index) refile(slot int32, was bool, old int64) {
	if x.hist != nil {
		x.hist.update(slot, old)
		return
	}
	switch now := x.cand(slot).ranked(); {
	case was && now:
		x.fix.fix(slot)
	case was:
		x.ord.remove(slot)
	case now:
		x.ord.insert(slot)
	}
}

// file counts the candidate c in slot, new or just changed, in its class
// at the index's clock: ranked by the order, set apart, or held by a hard
// lease; and in the ends if its class changes later. It sets c.apart
// before the order reads it. O(1) without hints, else O(log n).
func (x *Index) file(slot int32, c *Candidate) {
	if !c.hinted() {
		c.apart = false
		if c.evictable() {
			x.available += len(c.Blocks)
		}
		if x.apart.Ending() {
			x.apart.SetEnd(slot, c.ID, 0)
		}
		return
	}
	class := rank.ClassPlain
	var r int64
	if c.evictable() {
		r, class = hintRank(c, x.now)
	}
	c.apart = class != rank.ClassPlain
	n := len(c.Blocks)
	switch class {
	case rank.ClassPlain:
		if c.evictable() {
			x.available += n
		}
	case rank.ClassApart:
		x.available += n
		x.apart.Push(r, apartEntry(&x.params, c, r, slot))
	case rank.ClassHeld:
		x.hard += n
	}
	x.apart.SetEnd(slot, c.ID, rank.HintEnd(c.rankHint(), x.now))
}

// unfile undoes file's counts of the candidate c in slot before it
// changes or leaves; its end stays for file or release.
func (x *Index) unfile(slot int32, c *Candidate) {
	if !c.evictable() {
		return
	}
	n := len(c.Blocks)
	switch {
	case !c.apart:
		x.available -= n
	case x.apart.Contains(slot):
		x.available -= n
		x.apart.Remove(slot)
	default:
		x.hard -= n
	}
}

// tell advances the index's clock to tick, if later, and files again the
// candidates whose lease or retention priority ended by then: O(log n)
// each, once per end.
func (x *Index) tell(tick int64) {
	if tick > x.now {
		before := x.now
		x.now = tick
		if x.apart.Ending() {
			x.expire(before, tick)
		}
	}
}

// expire files again the candidates whose class changed after tick
// before, by tick, counting the leases that ended.
func (x *Index) expire(before, tick int64) {
	for {
		slot, ok := x.apart.Ended(tick)
		if !ok {
			return
		}
		if c := x.cand(slot); c.Hints.LeaseUntil > before && c.Hints.LeaseUntil <= tick && !c.leaseHit {
			x.stats.leaseHonoured(false)
		}
		x.change(slot, func(*Candidate) {})
	}
}

// UpdateAccess records a request for sequence id, held or not, as
// [Policy.UpdateAccess] does for an adaptive strategy: call it for every
// request before the Evict that makes room for it, and before Add for a
// sequence the index does not hold (ARC adapts to a request for a
// sequence it evicted lately). A key strategy learns nothing from it: its
// order follows the fields that Add, Touch and Update set. It costs what
// Policy.UpdateAccess costs: O(1), and for Auto O(log s) when the request
// falls in its miniature caches' sample of s ids.
func (x *Index) UpdateAccess(id uint64) {
	if x.hist != nil {
		x.hist.access(id)
	}
}

// UpdateAccessHashes records a request for the blocks of hashes, as
// [Policy.UpdateAccessHashes] does: [Auto] counts a request per block and
// ranks a candidate that sets HeadHash by its head's count; the other
// strategies ignore it. O(len(hashes)), each as UpdateAccess.
func (x *Index) UpdateAccessHashes(hashes []uint64) {
	if x.prep == nil {
		return
	}
	x.hist.auto.weights.Cautious = true // as auto.accessHashes
	for _, h := range hashes {
		x.hist.access(h)
	}
}

// Evict frees at least requiredBlocks blocks and removes the victims from the
// index, as [Index.EvictAppend] with a new slice. If the evictable blocks
// (those of the candidates neither pinned nor referenced,
// [Index.EvictableBlocks]) cannot cover requiredBlocks, it evicts nothing
// and returns an error matching [ErrInsufficientBlocks], an
// [InsufficientBlocksError] naming both counts; if a victim would free a
// block another held candidate lists, one matching [ErrInvalidCandidate].
func (x *Index) Evict(requiredBlocks int) (Result, error) {
	return x.EvictAppend(nil, requiredBlocks)
}

// EvictAppend picks victims as [Policy.SelectVictims] would over the held
// candidates, removes them from the index (a victim trimmed by a partial
// eviction stays with the head of its blocks) and appends them to dst, in
// eviction order. The returned Result's Victims are the appended elements;
// passing the previous Victims[:0] back as dst makes a steady-state eviction
// allocate nothing. If the evictable blocks cannot cover requiredBlocks it
// returns an error matching [ErrInsufficientBlocks] and changes nothing:
// the evictable blocks are those of the candidates neither pinned nor
// referenced, [Index.EvictableBlocks], whatever the victims' order. If a
// victim would free a block that another held candidate lists (or that it
// lists twice) it returns an error matching [ErrInvalidCandidate] and
// changes nothing, so that no Evict returns a block that another may
// return again. A negative requiredBlocks returns one matching
// [ErrInvalidArgument];
// requiredBlocks == 0 returns an empty Result. O(k log n) for k victims;
// O(k) when they come from the run.
func (x *Index) EvictAppend(dst []Victim, requiredBlocks int) (Result, error) {
	if err := checkRequired(requiredBlocks); err != nil {
		return Result{}, err
	}
	if x.available < requiredBlocks {
		return Result{}, &InsufficientBlocksError{Required: requiredBlocks, Available: x.available}
	}
	if requiredBlocks == 0 {
		return Result{Strategy: x.strategy}, nil
	}
	start := x.watch.start()
	first := len(dst)
	ranked := x.available - x.apart.Below - x.apart.Above
	x.ordNeed, x.ordFreed = min(ranked, max(0, requiredBlocks-x.apart.Below)), 0
	if x.ordNeed > 0 && x.hist != nil {
		x.hist.begin()
		if x.prep != nil {
			x.prep.prepare(x.ordNeed, ranked, x.hist.now())
		}
	}
	x.taken, x.ordTaken = x.taken[:0], x.ordTaken[:0]
	dst, freed, err := x.txn.cover(dst, requiredBlocks, x)
	if err != nil {
		return Result{}, err
	}
	res := Result{Victims: dst[first:], FreedBlocks: freed, Strategy: x.strategy}
	res.Elapsed = x.watch.elapsed(start)
	x.stats.record(&res, x.txn.partial)
	if x.logger != nil {
		logEviction(x.logger, &res)
	}
	return res, nil
}

// next, commit and rollback make the Index the source of its evictions'
// transaction: the order hands out the victims, and the Index removes
// those committed.

// The classes of [Hints] take the candidates set apart below the plain
// class first, then the order's, then those above it.
func (x *Index) next() (*Candidate, error) {
	if x.apart.Len() > 0 {
		if e, r := x.apart.Min(); r < rank.PlainRank || x.ordFreed >= x.ordNeed {
			slot := e.Slot
			x.apart.Remove(slot)
			x.taken = append(x.taken, slot)
			return x.cand(slot), nil
		}
	}
	slot := x.ord.next()
	c := x.cand(slot)
	x.ordTaken = append(x.ordTaken, slot)
	x.ordFreed += len(c.Blocks)
	x.taken = append(x.taken, slot)
	return c, nil
}

func (x *Index) commit(victims []Victim, trimmed bool) {
	apart := len(x.taken) > len(x.ordTaken) // some victims were set apart
	if x.ordNeed > 0 {
		freed, lastApart := 0, false
		for i := range victims {
			if !apart || !x.cand(x.taken[i]).apart {
				freed += len(victims[i].Blocks)
			}
		}
		if apart {
			lastApart = x.cand(x.taken[len(x.taken)-1]).apart
		}
		if x.hist != nil {
			x.hist.commit(x.ordTaken, freed, trimmed && !lastApart)
		}
	}
	// The whole victims' blocks leave the count first, in a pass of their
	// own: each victim's list and its bits are memory the rest of an
	// eviction does not touch, and in a small loop their loads overlap
	// across victims, where between the other steps of each release they
	// would wait one after the other.
	whole := x.taken
	if trimmed {
		whole = whole[:len(whole)-1]
	}
	for _, slot := range whole {
		x.unlist(x.cand(slot).Blocks)
	}
	for i, slot := range x.taken {
		c := x.cand(slot)
		if apart { // the order's victims are never released or leased
			x.stats.hinted(c, x.now)
		}
		n := len(c.Blocks)
		x.available -= n
		if trimmed && i == len(x.taken)-1 {
			keep := n - len(victims[i].Blocks)
			x.unlist(c.Blocks[keep:])
			c.Blocks = c.Blocks[:keep:keep]
			if c.apart {
				x.file(slot, c)
			} else {
				x.available += keep
				x.rank(slot)
			}
			continue
		}
		x.drop(slot, true)
	}
	x.taken, x.ordTaken = x.taken[:0], x.ordTaken[:0]
}

func (x *Index) rollback() {
	if x.ordNeed > 0 {
		if x.hist != nil {
			x.hist.rollback(x.ordTaken)
		} else {
			for _, slot := range x.ordTaken {
				x.ord.insert(slot)
			}
		}
	}
	for _, slot := range x.taken {
		if c := x.cand(slot); c.apart {
			r, _ := hintRank(c, x.now)
			x.apart.Push(r, apartEntry(&x.params, c, r, slot))
		}
	}
	x.taken, x.ordTaken = x.taken[:0], x.ordTaken[:0]
}

// rank has the order rank again the victim in slot that a partial
// eviction trimmed: it keeps a head of its blocks.
func (x *Index) rank(slot int32) {
	if x.hist != nil {
		x.hist.markHeld(slot)
		return
	}
	x.ord.insert(slot)
}

// Metrics returns a snapshot of the index's counters, the same fields as
// [Policy.Metrics]. O(1) but for sorting the latency window.
func (x *Index) Metrics() Metrics {
	m, window := x.stats.snapshot()
	m.P99EvictionTime = p99(window)
	m.LeasedBlocks = x.apart.Soft + x.hard
	return m
}
