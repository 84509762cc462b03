package prefix

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/sagellm/kvevict/internal/dlist"
	"github.com/sagellm/kvevict/internal/ghost"
	"github.com/sagellm/kvevict/internal/options"
	"github.com/sagellm/kvevict/internal/rank"

	"github.com/sagellm/kvevict"
)

// Errors returned by the package, besides kvevict's. Match them with
// [errors.Is].
var (
	// ErrEmptyPath: a call was given no block hashes.
	ErrEmptyPath = errors.New("prefix: empty hash path")
	// ErrNotFound: Lock or Unlock was given a path that is not wholly in
	// the tree.
	ErrNotFound = errors.New("prefix: path not in tree")
	// ErrNotLocked: Unlock was given a path that no Lock ended at.
	ErrNotLocked = errors.New("prefix: path not locked")
)

// Access describes the request that touches a path: when, and with which
// quality-of-service class.
type Access struct {
	// Tick is the caller's clock (any monotonically increasing int64, as
	// for kvevict.Candidate.LastAccess). The tree never reads a clock.
	Tick int64
	// Priority is the request's QoS class. A block's priority is the
	// highest of the requests that inserted it.
	Priority kvevict.Priority
	// Hints are what the caller knows of the request's future. A block's
	// hints are the latest of the requests through it (Insert, Match and
	// their Locked forms): its leaf is taken in the order of the classes
	// of [kvevict.Hints], and a live hard lease protects the request's
	// path as a lock would, until it ends. The zero value means none.
	Hints kvevict.Hints
}

// Tree is a prefix tree of KV blocks keyed by block hash, one node per
// block, with reference counts and leaf-first eviction. See the package
// documentation for the model.
//
// A Tree is safe for concurrent use by multiple goroutines. Its memory is
// one node per resident block, with the node's index entries: Admit keeps
// it within the capacity given to [New], and a caller that inserts
// directly bounds it by calling Evict. Under [kvevict.Auto] it also
// remembers the request counts of up to [kvevict.WithGhostCap] evicted
// blocks, keeps its unreferenced leaves in five heaps rather than one,
// and Auto's miniature caches a bounded few thousand hashes, however large
// the pool.
// docs/prefix.md gives the sizes (BenchmarkMemory). The indexes do not
// shrink below their peak size, as Go maps do not.
type Tree struct {
	params   rank.Params  // a key strategy's; unused when meas ranks
	meas     measurements // Auto's; nil for a key strategy
	capacity int          // in blocks: what Admit keeps the tree within
	onEvent  func(Event)
	usesNow  bool
	// Events are delivered in the order of their changes, one call's at a
	// time: each call that queued events takes a ticket while it holds mu,
	// and delivers once served reaches it, without mu, so that fn may read
	// the tree while another call waits for its turn.
	turnMu sync.Mutex
	turn   sync.Cond // served moved on
	served uint64    // guarded by turnMu

	mu       sync.Mutex // guards everything below
	issued   uint64     // tickets for delivering events
	root     node
	children map[edge]*node
	// heaps hold the unreferenced leaves by slot, smallest key first: one
	// order per weight that Auto's measurements simulate (see Keys in the
	// package documentation), else one.
	heaps     []rank.Heap
	keyBuf    []rank.Key  // keys' answer, one key per heap
	bySlot    []*node     // bySlot[n.slot] == n for every node but the root
	slots     dlist.Slots // hands out the nodes' slots, reusing freed ones
	nextID    uint64
	evictable int          // nodes with ref == 0
	protected int          // nodes with ref > 0
	now       int64        // the largest tick seen
	keyedAt   int64        // the tick at which heap keys were computed (usesNow only)
	ghosts    ghost.Counts // evicted blocks' request counts, by hash, when meas ranks
	pending   []Event
	// apart holds the unreferenced leaves that hints set apart from the
	// heaps (see kvevict.Hints), and the ends: the leaves whose class
	// changes later and the nodes whose hard lease ends later, by tick.
	apart rank.Apart
	hints map[*node]nodeHints // the nodes with hints, or a hard lease
}

// node is one resident block.
type node struct {
	parent      *node
	hash        uint64
	id          uint64 // creation order, 1-based; breaks key ties
	lastAccess  int64
	createdAt   int64
	accessCount int
	requests    uint32 // Auto: Matches through it plus the Insert that made it, and those it had before its eviction
	ref         int    // locks whose path passes through this node
	ends        int    // locks whose path ends at this node
	children    int
	slot        int32 // the node's index in Tree.bySlot and its heap; -1 for the root
	priority    kvevict.Priority
}

// nodeHints is what a node keeps of hints, beside it in Tree.hints so
// that a tree without hints spends no byte on them: the latest request's
// through it, and the end of the hard lease that protects the path to it
// as a lock (ref) does, 0 when it holds none.
type nodeHints struct {
	hint      rank.Hint
	hardUntil int64
}

// edge names a node by its parent's id and its own hash.
type edge struct {
	parent uint64
	hash   uint64
}

// Option configures a Tree made by [New]. Only this package's With
// functions make one: the idiom of every option in kvevict's modules, a
// function over a configuration its users cannot name.
type Option func(*config)

// config is what a Tree's options set.
type config struct {
	onEvent func(Event)
	keyOpts []kvevict.Option // the strategy's options
}

// WithEvents makes the tree call fn with an [Event] for every batch of
// blocks it stores or removes, so that an external index (a KV-aware
// router) stays consistent. fn is called after the tree's lock is released,
// in the order the changes happened, one call at a time. fn may call the
// tree's other methods (Len, Peek...), even while other goroutines change
// the tree, but not Insert, InsertLocked or Evict, which would wait for fn
// to return before delivering their own events.
func WithEvents(fn func(Event)) Option {
	return func(c *config) { c.onEvent = fn }
}

// WithStrategyOptions configures the strategy that ranks the tree's leaves
// with kvevict's options, as kvevict.New would: WithTickDuration,
// WithLFUHalfLife and the other options of key strategies, and for a tree
// ranked by [kvevict.Auto] WithGhostCap, which bounds how many evicted
// blocks' request counts it remembers (the tree's candidates are blocks).
// WithSampling does not apply to a tree, and kvevict.WithCapacity, which
// counts sequences, neither: a tree's capacity is [New]'s, in blocks.
// New refuses them.
func WithStrategyOptions(opts ...kvevict.Option) Option {
	return func(c *config) { c.keyOpts = append(c.keyOpts, opts...) }
}

// New returns an empty tree for a pool of capacity blocks that ranks
// leaves by the keys of key strategy s, or by [kvevict.Auto]'s score (see
// Keys in the package documentation).
//
// The capacity is the tree's one size: [Tree.Admit] keeps the tree within
// it, and Auto's miniature caches, which choose its weight, simulate a
// pool of that many blocks. Insert and InsertLocked add blocks without
// evicting, so a caller that drives the tree with them, rather than with
// Admit, keeps it within the capacity by calling Evict. A capacity below
// 1 returns an error matching [kvevict.ErrInvalidArgument].
//
// New returns [Ranks]'s error for a strategy a tree does not rank by, and
// kvevict's errors for an unknown strategy or a bad option.
func New(s kvevict.Strategy, capacity int, opts ...Option) (*Tree, error) {
	if capacity < 1 {
		return nil, fmt.Errorf("prefix.New: %w: capacity must be at least 1 block, got %d", kvevict.ErrInvalidArgument, capacity)
	}
	t := &Tree{
		capacity: capacity,
		children: make(map[edge]*node),
		now:      math.MinInt64,
		keyedAt:  math.MinInt64,
	}
	t.root.slot = -1
	t.turn.L = &t.turnMu
	var c config
	for _, opt := range opts {
		if opt != nil {
			opt(&c)
		}
	}
	t.onEvent = c.onEvent
	info, cfg, err := options.Resolve(string(s), c.keyOpts, options.ForTree)
	if err != nil {
		return nil, fmt.Errorf("prefix.New: %w", err)
	}
	if err := ranks(info.Kind, s); err != nil {
		return nil, fmt.Errorf("prefix.New: %w", err)
	}
	if info.Kind == rank.KindAuto {
		h := newTreeAuto(capacity, cfg.GhostCap)
		horizons, _ := h.Horizons(t.now, 0)
		t.meas, t.ghosts = h, ghost.New(h.GhostCap())
		t.heaps, t.keyBuf = make([]rank.Heap, len(horizons)), make([]rank.Key, len(horizons))
		return t, nil
	}
	t.params = rank.NewParams(info.Kind, &cfg.Config)
	t.usesNow = t.params.UsesNow()
	t.heaps, t.keyBuf = make([]rank.Heap, 1), make([]rank.Key, 1)
	return t, nil
}

// Ranks reports whether a tree ranks its blocks by strategy s, in any
// spelling [kvevict.ParseStrategy] accepts: nil for every strategy that is
// not [kvevict.Strategy.Adaptive], and for [kvevict.Auto], whose score the
// tree keeps per block; an error matching errors.ErrUnsupported for the
// other adaptive strategies (ARC, S3-FIFO, SIEVE), whose order lives in
// lists of sequences rather than in a score per block, and which [New]
// refuses with it; one matching [kvevict.ErrUnknownStrategy] for an
// unknown name. O(1).
func Ranks(s kvevict.Strategy) error {
	info, ok := options.Lookup(string(s))
	if !ok {
		return fmt.Errorf("prefix.Ranks: %w", options.Unknown(string(s)))
	}
	if err := ranks(info.Kind, s); err != nil {
		return fmt.Errorf("prefix.Ranks: %w", err)
	}
	return nil
}

// ranks is Ranks for strategy s, whose mechanism is kind.
func ranks(kind rank.Kind, s kvevict.Strategy) error {
	if !kind.Scored() {
		return fmt.Errorf("%w: %q ranks by lists of sequences, which a tree of blocks does not keep", errors.ErrUnsupported, s)
	}
	return nil
}

// Len returns the number of blocks in the tree. O(1).
func (t *Tree) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.evictable + t.protected
}

// EvictableBlocks returns the number of blocks no lock holds: Evict can free up
// to that many. O(1).
func (t *Tree) EvictableBlocks() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.evictable
}

// Protected returns the number of blocks on some locked path. O(1).
func (t *Tree) Protected() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.protected
}

// Insert adds the blocks of hashes that are not yet in the tree, below the
// longest prefix that is, and returns how many it added. Every block on the
// path takes a.Tick as its latest access and the highest of its priority and
// a.Priority; new blocks also take a.Tick as their creation time and have
// no hits. Insert does not lock: new blocks are evictable at once. If it
// added any, it emits one [Stored] event with their hashes. Empty hashes
// return [ErrEmptyPath]. O(len(hashes) + log n), plus under Auto
// O(log s) per new block in its miniature caches' sample (see Keys in the
// package documentation).
func (t *Tree) Insert(hashes []uint64, a Access) (added int, err error) {
	if len(hashes) == 0 {
		return 0, fmt.Errorf("%w: Insert", ErrEmptyPath)
	}
	if err := checkAccess(&a); err != nil {
		return 0, err
	}
	return t.insert(hashes, a, false), nil
}

// InsertLocked is Insert followed by Lock(hashes), in one step, so that no
// concurrent Evict can free the new blocks in between. Release it with
// Unlock(hashes). O(len(hashes) + log n).
func (t *Tree) InsertLocked(hashes []uint64, a Access) (added int, err error) {
	if len(hashes) == 0 {
		return 0, fmt.Errorf("%w: InsertLocked", ErrEmptyPath)
	}
	if err := checkAccess(&a); err != nil {
		return 0, err
	}
	return t.insert(hashes, a, true), nil
}

func (t *Tree) insert(hashes []uint64, a Access, lock bool) (added int) {
	t.mu.Lock()
	defer t.unlockAndDeliver()
	t.observe(a.Tick)
	n, matched := t.walk(hashes)
	hint := (*rank.Hint)(&a.Hints)
	for m := n; m != &t.root; m = m.parent {
		m.lastAccess = a.Tick
		m.priority = max(m.priority, a.Priority)
		t.setHint(m, hint)
	}
	t.rekey(n)
	if matched < len(hashes) {
		t.unheap(n)
		parent := n
		for _, h := range hashes[matched:] {
			t.nextID++
			c := &node{
				parent:     n,
				hash:       h,
				id:         t.nextID,
				lastAccess: a.Tick,
				createdAt:  a.Tick,
				priority:   a.Priority,
			}
			t.place(c)
			t.setHint(c, hint)
			if t.meas != nil {
				// A block inserted again takes back the requests it had.
				r, _ := t.ghosts.Take(h)
				c.requests = rank.AddRequest(r.Requests)
				t.meas.Request(h, c.requests)
			}
			t.children[edge{n.id, h}] = c
			n.children++
			n = c
		}
		t.evictable += len(hashes) - matched
		t.push(n)
		if t.onEvent != nil {
			t.pending = append(t.pending, Event{
				Kind:      Stored,
				Hashes:    append([]uint64(nil), hashes[matched:]...),
				Parent:    parent.hash,
				HasParent: parent != &t.root,
				PrefixLen: matched,
			})
		}
	}
	if lock {
		t.lock(n)
	}
	t.holdHard(n, hint)
	return len(hashes) - matched
}

// Match returns the length of the longest prefix of hashes in the tree and
// records a hit on each of its blocks: the latest access becomes a.Tick and
// the hit count grows by one (a.Priority is not used; priorities come from
// Insert). Empty hashes return [ErrEmptyPath]. O(len(hashes) + log n),
// plus under Auto O(log s) per matched block in its miniature caches'
// sample.
func (t *Tree) Match(hashes []uint64, a Access) (matched int, err error) {
	if len(hashes) == 0 {
		return 0, fmt.Errorf("%w: Match", ErrEmptyPath)
	}
	if err := checkAccess(&a); err != nil {
		return 0, err
	}
	return t.match(hashes, a, false), nil
}

// MatchLocked is Match followed by Lock(hashes[:matched]) when matched > 0,
// in one step, so that no concurrent Evict can free the matched blocks in
// between. Release it with Unlock(hashes[:matched]). O(len(hashes) + log n).
func (t *Tree) MatchLocked(hashes []uint64, a Access) (matched int, err error) {
	if len(hashes) == 0 {
		return 0, fmt.Errorf("%w: MatchLocked", ErrEmptyPath)
	}
	if err := checkAccess(&a); err != nil {
		return 0, err
	}
	return t.match(hashes, a, true), nil
}

func (t *Tree) match(hashes []uint64, a Access, lock bool) (matched int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.observe(a.Tick)
	n, matched := t.walk(hashes)
	h := (*rank.Hint)(&a.Hints)
	for m := n; m != &t.root; m = m.parent {
		m.lastAccess = a.Tick
		m.accessCount++
		t.setHint(m, h)
		if t.meas != nil {
			m.requests = rank.AddRequest(m.requests)
			t.meas.Request(m.hash, m.requests)
		}
	}
	t.rekey(n)
	if lock && n != &t.root {
		t.lock(n)
	}
	if n != &t.root {
		t.holdHard(n, h)
	}
	return matched
}

// Peek returns the length of the longest prefix of hashes in the tree,
// changing nothing. O(len(hashes)).
func (t *Tree) Peek(hashes []uint64) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, matched := t.walk(hashes)
	return matched
}

// Lock protects the path of hashes, which must be wholly in the tree, from
// eviction until a matching Unlock: the reference count of every block from
// the root to the path's end grows by one. Locks nest; a block stays
// protected while any lock passes through it. A path not wholly in the tree
// returns an error matching [ErrNotFound] and locks nothing; empty hashes
// return [ErrEmptyPath]. O(len(hashes) + log n).
func (t *Tree) Lock(hashes []uint64) error {
	if len(hashes) == 0 {
		return fmt.Errorf("%w: Lock", ErrEmptyPath)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n, matched := t.walk(hashes)
	if matched < len(hashes) {
		return fmt.Errorf("%w: Lock of %d blocks, %d in tree", ErrNotFound, len(hashes), matched)
	}
	t.lock(n)
	return nil
}

// lock adds a lock ending at n.
func (t *Tree) lock(n *node) {
	n.ends++
	t.protect(n)
}

// protect adds a reference to the path from the root to n: a lock's, or a
// hard lease's.
func (t *Tree) protect(n *node) {
	t.unheap(n)
	for m := n; m != &t.root; m = m.parent {
		if m.ref == 0 {
			t.evictable--
			t.protected++
		}
		m.ref++
	}
}

// unprotect drops a reference protect added to the path to n, and makes n
// a leaf candidate again if nothing else holds it.
func (t *Tree) unprotect(n *node) {
	for m := n; m != &t.root; m = m.parent {
		m.ref--
		if m.ref == 0 {
			t.protected--
			t.evictable++
		}
	}
	if n.ref == 0 && n.children == 0 {
		t.push(n)
	}
}

// holdHard protects the path to n, the end of a request's path, while the
// request's hard lease h lives, as a lock until it ends: one reference
// per node however often renewed, held to the latest end.
func (t *Tree) holdHard(n *node, h *rank.Hint) {
	nh := t.hints[n]
	if !h.HardLease || t.now >= h.LeaseUntil || h.LeaseUntil <= nh.hardUntil {
		return
	}
	if nh.hardUntil == 0 {
		t.protect(n)
	}
	nh.hardUntil = h.LeaseUntil
	t.hints[n] = nh
	t.apart.SetEnd(n.slot, n.id, nh.hardUntil)
}

// setHint records h as the hints of n, the latest request's through it.
// O(1); nothing for a tree that has never seen a hint.
func (t *Tree) setHint(n *node, h *rank.Hint) {
	nh, ok := t.hints[n]
	switch {
	case !ok && *h == (rank.Hint{}):
	case nh.hardUntil == 0 && *h == (rank.Hint{}):
		delete(t.hints, n)
	default:
		if t.hints == nil {
			t.hints = make(map[*node]nodeHints)
		}
		nh.hint = *h
		t.hints[n] = nh
	}
}

// Unlock releases one Lock of exactly the path of hashes. A path not wholly
// in the tree returns an error matching [ErrNotFound]; a path no Lock ended
// at (including a prefix or an extension of a locked path) returns one
// matching [ErrNotLocked]; both change nothing. Empty hashes return
// [ErrEmptyPath]. O(len(hashes) + log n).
func (t *Tree) Unlock(hashes []uint64) error {
	if len(hashes) == 0 {
		return fmt.Errorf("%w: Unlock", ErrEmptyPath)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n, matched := t.walk(hashes)
	if matched < len(hashes) {
		return fmt.Errorf("%w: Unlock of %d blocks, %d in tree", ErrNotFound, len(hashes), matched)
	}
	if n.ends == 0 {
		return fmt.Errorf("%w: Unlock of %d blocks: no Lock ends there (%d locks pass through)", ErrNotLocked, len(hashes), n.ref)
	}
	n.ends--
	t.unprotect(n)
	return nil
}

// Evict removes exactly blocks unlocked blocks, leaves only, and returns
// their hashes in eviction order. Each step removes the unreferenced leaf
// with the smallest key (ties by creation order); a parent that becomes an
// unreferenced leaf joins the candidates at once, so a path is shed from its
// deepest block up. It emits one [Removed] event with the hashes.
//
// It is atomic: if fewer than blocks are evictable it returns an error
// matching [kvevict.ErrInsufficientBlocks] (a [*kvevict.InsufficientBlocksError])
// and removes nothing. A negative count returns an error matching
// [kvevict.ErrInvalidArgument]; zero returns nothing.
//
// The leaves are kept in a heap between calls (under Auto, one per weight),
// updated by every operation in O(log n), so Evict costs O(k log n) for k
// blocks, never a rebuild.
// The one exception is a key strategy whose keys depend on the current tick
// (FrequencyCost with decay): then the first
// Evict after the clock moved re-keys the heap in O(n). Auto keeps a heap
// per weight it simulates and never re-keys: see Keys in the package
// documentation. Under Auto each evicted block's requests are remembered,
// in O(1).
func (t *Tree) Evict(blocks int) ([]uint64, error) {
	if blocks < 0 {
		return nil, fmt.Errorf("%w: Evict of %d blocks", kvevict.ErrInvalidArgument, blocks)
	}
	if blocks == 0 {
		return nil, nil
	}
	t.mu.Lock()
	defer t.unlockAndDeliver()
	if blocks > t.evictable {
		return nil, &kvevict.InsufficientBlocksError{Required: blocks, Available: t.evictable}
	}
	if t.usesNow && t.keyedAt != t.now {
		t.keyedAt = t.now
		t.heaps[0].Rekey(func(e *rank.Entry) rank.Key { return t.keys(t.bySlot[e.Slot])[0] })
	}
	order := 0
	if t.meas != nil {
		_, order = t.meas.Horizons(t.now, t.evictable+t.protected)
	}
	h := &t.heaps[order]
	removed := make([]uint64, blocks)
	for i := range removed {
		var n *node
		apart, r := (*rank.Entry)(nil), int64(0)
		if t.apart.Len() > 0 {
			apart, r = t.apart.Min()
		}
		switch {
		case apart != nil && (r < rank.PlainRank || h.Len() == 0):
			n = t.bySlot[apart.Slot]
		case h.Len() > 0:
			n = t.bySlot[h.Min().Slot]
		default:
			panic("prefix: evictable blocks but no evictable leaf")
		}
		removed[i] = n.hash
		if t.meas != nil {
			t.ghosts.Put(n.hash, ghost.Count{Requests: n.requests})
		}
		p := n.parent
		delete(t.children, edge{p.id, n.hash})
		p.children--
		switch leaf := p != &t.root && p.children == 0 && p.ref == 0; {
		case leaf && t.heaps[0].Contains(n.slot) && t.plain(p):
			// p takes n's place in every heap.
			for j, k := range t.keys(p) {
				t.heaps[j].Replace(n.slot, entry(p, k))
			}
		case leaf:
			t.unheap(n)
			t.push(p)
		default:
			t.unheap(n)
		}
		t.apart.SetEnd(n.slot, 0, 0)
		t.unplace(n)
	}
	t.evictable -= blocks
	if t.meas != nil {
		t.meas.Evicted(t.now, blocks)
	}
	if t.onEvent != nil {
		t.pending = append(t.pending, Event{Kind: Removed, Hashes: append([]uint64(nil), removed...)})
	}
	return removed, nil
}

// checkAccess refuses an access whose hints no class can hold.
func checkAccess(a *Access) error {
	if err := rank.CheckHint((*rank.Hint)(&a.Hints)); err != nil {
		return fmt.Errorf("%w: Access.Hints: %v", kvevict.ErrInvalidArgument, err)
	}
	return nil
}

// walk follows hashes from the root and returns the deepest node reached
// and how many hashes matched.
func (t *Tree) walk(hashes []uint64) (*node, int) {
	n := &t.root
	for i, h := range hashes {
		c, ok := t.children[edge{n.id, h}]
		if !ok {
			return n, i
		}
		n = c
	}
	return n, len(hashes)
}

// observe advances the tree's clock, and files again the leaves whose
// class changed by then and releases the hard leases that ended: O(log n)
// each, once per end.
func (t *Tree) observe(tick int64) {
	if tick <= t.now {
		return
	}
	t.now = tick
	for {
		slot, ok := t.apart.Ended(tick)
		if !ok {
			return
		}
		n := t.bySlot[slot]
		t.apart.SetEnd(slot, 0, 0)
		if nh := t.hints[n]; nh.hardUntil != 0 && nh.hardUntil <= tick {
			nh.hardUntil = 0
			t.hints[n] = nh
			t.setHint(n, &nh.hint) // forgets n if it has no hint left
			t.unprotect(n)         // files n again if it is a leaf
			continue
		}
		t.rekey(n)
	}
}

// plain reports whether leaf n ranks in the heaps at the tree's clock:
// no hint sets it apart.
func (t *Tree) plain(n *node) bool {
	nh, ok := t.hints[n]
	if !ok {
		return true
	}
	_, class := rank.HintRank(&nh.hint, t.now)
	return class == rank.ClassPlain
}

// rekey recomputes n's keys after its fields changed, if n is in the heaps.
// Only the end of a path can be a leaf, so one call per operation keeps
// every key current.
func (t *Tree) rekey(n *node) {
	inHeaps := t.heaps[0].Contains(n.slot)
	switch {
	case inHeaps && t.hints[n] == (nodeHints{}):
		for i, k := range t.keys(n) {
			t.heaps[i].Fix(n.slot, k, 1)
		}
	case inHeaps || t.apart.Contains(n.slot):
		t.unheap(n)
		t.push(n)
	}
}

// unheap takes n out of the heaps, or out of those set apart, if it is
// in them.
func (t *Tree) unheap(n *node) {
	if t.apart.Contains(n.slot) {
		t.apart.Remove(n.slot)
		return
	}
	if !t.heaps[0].Contains(n.slot) {
		return
	}
	for i := range t.heaps {
		t.heaps[i].Remove(n.slot)
	}
}

// keys returns n's key in each heap: Auto's score under each horizon its
// measurements simulate, at this moment, or the key strategy's key of n's
// fields, a candidate of one block. The slice is t.keyBuf, valid until the next call.
func (t *Tree) keys(n *node) []rank.Key {
	if t.meas != nil {
		horizons, _ := t.meas.Horizons(t.now, t.evictable+t.protected)
		for i, w := range horizons {
			t.keyBuf[i] = t.meas.Key(n.lastAccess, n.requests, w)
		}
		return t.keyBuf
	}
	f := rank.Fields{
		LastAccess:  n.lastAccess,
		CreatedAt:   n.createdAt,
		AccessCount: n.accessCount,
		Priority:    int8(n.priority),
		Blocks:      1,
	}
	t.keyBuf[0] = t.params.Key(&f, t.keyedAt)
	return t.keyBuf
}

// place gives new node n a slot. O(1) amortized.
func (t *Tree) place(n *node) {
	slot, grown := t.slots.Alloc()
	if grown {
		t.bySlot = append(t.bySlot, nil)
	}
	n.slot, t.bySlot[slot] = slot, n
}

// unplace frees the slot of evicted node n, which is out of the heap, and
// forgets its hints.
func (t *Tree) unplace(n *node) {
	delete(t.hints, n)
	t.bySlot[n.slot] = nil
	t.slots.Free(n.slot)
}

// entry is leaf n's heap entry under key k.
func entry(n *node, k rank.Key) rank.Entry {
	return rank.Entry{Key: k, ID: n.id, Slot: n.slot, Blocks: 1}
}

// push adds leaf n to the heaps, or to those set apart when its hints
// say so (a live hard lease on an unprotected leaf counts as soft: it
// cannot happen, since holdHard protects the path), and files it under
// the tick its class changes. O(log n) for each.
func (t *Tree) push(n *node) {
	if nh, ok := t.hints[n]; ok {
		r, class := rank.HintRank(&nh.hint, t.now)
		if class == rank.ClassHeld {
			r, class = rank.LeasedRank, rank.ClassApart
		}
		if nh.hardUntil == 0 {
			t.apart.SetEnd(n.slot, n.id, rank.HintEnd(&nh.hint, t.now))
		}
		if class == rank.ClassApart {
			t.apart.Push(r, entry(n, rank.ApartKey(&nh.hint, r, n.lastAccess, t.ownKey(n))))
			return
		}
	}
	for i, k := range t.keys(n) {
		t.heaps[i].Push(entry(n, k))
	}
}

// ownKey is n's key in the strategy's own order within a class of hints:
// a key strategy's key, or recency for Auto and for a key that reads the
// current tick, as kvevict's Policy orders them.
func (t *Tree) ownKey(n *node) rank.Key {
	if t.meas != nil || t.usesNow {
		return rank.LRUKey(n.lastAccess)
	}
	return t.keys(n)[0]
}

// unlockAndDeliver releases the tree's lock and delivers the pending events
// outside it, in its ticket's turn, so that deliveries keep the order of
// the changes. Every method that may queue events defers it right after
// taking the lock, so the lock is released on every path.
func (t *Tree) unlockAndDeliver() {
	if len(t.pending) == 0 {
		t.mu.Unlock()
		return
	}
	events := t.pending
	t.pending = nil
	ticket := t.issued
	t.issued++
	t.mu.Unlock()
	t.turnMu.Lock()
	for t.served != ticket {
		t.turn.Wait()
	}
	t.turnMu.Unlock()
	defer func() {
		t.turnMu.Lock()
		t.served++
		t.turn.Broadcast()
		t.turnMu.Unlock()
	}()
	for _, e := range events {
		t.onEvent(e)
	}
}
