package sim

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/internal/idmap"
	"github.com/sagellm/kvevict/prefix"
	"github.com/sagellm/kvevict/tier"
)

// blockState is where a physical block is.
type blockState uint8

const (
	blockFree   blockState = iota // on the free list
	blockUsed                     // referenced by running sequences
	blockCached                   // a prompt block nobody references: evictable
)

type poolBlock struct {
	state  blockState
	hashed bool // a prompt block, findable by hash
	hash   uint64
	refs   int
	owner  uint64 // cached: the sequence that released it
	at     int    // cached: its index in the owner's blocks
}

// sequence is an admitted request.
type sequence struct {
	id       uint64
	req      int
	blocks   []int // head first: prompt blocks, then generated ones
	admitted int64
	last     int64 // tick of its latest token
	tokens   int   // current length
	maxLen   int
	outLeft  int // tokens still to generate
	alive    bool
	// In time (engine.go): the engine's progress when its tokens were last
	// set, whether it decodes, and its prompt tokens left to prefill and
	// the chunk of them in flight.
	vAt         int64
	decoding    bool
	loading     bool // its loads from the tiers below are under way
	ready       bool // loaded, it waits in the pool's ready for room in the batch
	prefillLeft int
	chunk       int
	chunkFLOPs  float64
}

// owner is what the pool remembers of a sequence while it owns cached blocks.
type owner struct {
	admitted, released int64
	// accessCount is its hits, Candidate.AccessCount: the requests that
	// found blocks it holds cached since it released them. The hits of
	// its own request were hits on the owners before it, not on it.
	accessCount    int
	priority       kvevict.Priority
	seqLen, maxLen int
	hints          kvevict.Hints // its request's, renewed by later requests
	// leaseSettled says its lease was counted (tally.leaseHonoured):
	// read by a request, ended unread, or broken.
	leaseSettled bool
	// blocks are the cached blocks it owns, head first, with -1 where a
	// block left: a request reuses blocks from the middle, and removing
	// them in place would cost the owner's length each. live counts the
	// others.
	blocks []int
	live   int
}

// held appends the cached blocks of o, head first, to dst.
func (o *owner) held(dst []int) []int {
	for _, b := range o.blocks {
		if b >= 0 {
			dst = append(dst, b)
		}
	}
	return dst
}

// pool is the paged KV pool of Serve.
type pool struct {
	w         *Workload
	capacity  int
	ev        Evictor
	afterStep func(*pool)

	// blocks grows on demand up to capacity, so that memory follows the
	// workload rather than the capacity; free holds released blocks, and
	// the capacity - len(blocks) never used are free too.
	blocks []poolBlock
	free   []int
	used   int
	cached int
	byHash map[uint64]int // hash -> block (used or cached)
	owners map[uint64]*owner

	running []*sequence // admission order
	waiting []int       // request indices, first come first served
	// events are the running sequences' milestones, at the engine's
	// progress (engineClock.v).
	events eventQueue
	clock  *engineClock
	now    int64
	// f is the fleet the pool runs in, eng its index there.
	f   *fleet
	eng int
	// tiers are below the pool, which is their GPU (ServeConfig.Tiers),
	// nil without; levels are theirs, the GPU first, and links when each
	// one's link is free of the loads queued on it, in ticks.
	// onTierEvent, if set, takes their events; gpuStored counts the
	// blocks the pool stored for prompts, loaded or computed.
	tiers       *tier.Hierarchy
	levels      []tier.Level
	links       []int64
	onTierEvent func(tier.Event)
	gpuStored   int64
	// aside counts the running sequences out of the batch: loading, or
	// loaded and waiting in ready, first come first served, for room under
	// the batch cap. vLLM's scheduler keeps such a request waiting
	// (WAITING_FOR_REMOTE_KVS), out of max_num_seqs, and schedules it
	// first once its load is done.
	aside   int
	ready   []*sequence
	victims []uint64 // scratch: an eviction's, for the tiers below
	// queue, in a cluster's pool, estimates the wait the ttft router reads
	// (Engine.Wait); onEvent takes the KV events the pool emits, nil
	// without a cluster.
	queue    *prefillQueue
	onEvent  func(prefix.Event)
	nextID   uint64
	admitted []bool // first admission done
	// lastOfGroup is each session's latest request admitted, when groups
	// are sessions.
	lastOfGroup map[uint64]int
	// paused stops admissions from a preemption until a sequence finishes,
	// so that a preempted request is not readmitted into the same shortage
	// and the oldest running sequence always makes progress.
	paused bool
	// arrived is each request's arrival tick, the clock of its hints; nil
	// when no request carries hints.
	arrived []int64
	// admitting is the request of the admission under way.
	admitting int
	// hardOwners are the owners whose request gave a hard lease, which
	// holds their cached blocks until it ends (hardHeld prunes them).
	hardOwners map[uint64]bool
	renewing   map[uint64]bool // scratch: the owners fits counts renewed
	woken      bool            // a wake event is queued
	// reusedID is the owner reuse is taking a block from, for renew.
	reusedID uint64

	tally                            *tally
	preemptions, rejected, truncated int

	// Scratch space, reused from call to call.
	prompt    []uint64            // the distinct hashes of the prompt admitted
	seen      idmap.Map[struct{}] // prompt's
	admission Admission           // what the evictor is told of an admission
	accessed  map[uint64]bool     // admission.Accessed, as a set
	reused    []reusedOwner       // the owners an admission took blocks from
	found     map[uint64]bool     // reused, as a set
	told      []int               // the blocks of the CachedSequences the evictor is told
	state     EvictionState       // the evictor's view at an eviction
}

// reusedOwner is a sequence whose cached blocks an admission took: its
// owner, kept after the pool forgets an owner with no block left.
type reusedOwner struct {
	id uint64
	o  *owner
}

// newPool returns a pool of cfg.Capacity blocks evicting with ev, which
// joins fleet f; ceil is w's ceiling, shared by the pools of a run.
func newPool(f *fleet, cfg ServeConfig, ev Evictor, ceil *ceiling) *pool {
	w := f.w
	p := &pool{
		w:           w,
		capacity:    cfg.Capacity,
		ev:          ev,
		afterStep:   cfg.afterStep,
		byHash:      make(map[uint64]int),
		owners:      make(map[uint64]*owner),
		admitted:    make([]bool, len(w.Requests)),
		lastOfGroup: make(map[uint64]int),
		tally:       newTally(w, ceil),
		accessed:    make(map[uint64]bool),
		found:       make(map[uint64]bool),
	}
	p.clock = newEngineClock(&cfg.EngineConfig, f.tokenTime, f.rec)
	p.state.lookup = p.lookupCached
	if w.hinted() {
		p.arrived, p.hardOwners, p.renewing = make([]int64, len(w.Requests)), make(map[uint64]bool), make(map[uint64]bool)
	}
	f.join(p)
	return p
}

// tokenTicks is cfg's step time without a clock, in ticks: the rate the
// closed loop reads the timestamps at.
func tokenTicks(cfg *ServeConfig) int64 {
	return max(int64(cmp.Or(cfg.TokenTime, DefaultTokenTime)/time.Microsecond), 1)
}

// lookupCached returns the cached block holding hash, if any.
func (p *pool) lookupCached(hash uint64) (int, bool) {
	b, ok := p.byHash[hash]
	if !ok || p.blocks[b].state != blockCached {
		return -1, false
	}
	return b, true
}

// allocate makes n blocks free, evicting cached ones if needed, and reports
// whether it could. It evicts nothing when it cannot.
func (p *pool) allocate(n int) (bool, error) {
	need := n - p.freeBlocks()
	if need <= 0 {
		return true, nil
	}
	if need > p.cached {
		return false, nil
	}
	res, err := p.ev.Evict(p.evictionState(), need)
	if errors.Is(err, kvevict.ErrInsufficientBlocks) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if len(res.Blocks) < need {
		return false, fmt.Errorf("evictor freed %d blocks, %d needed", len(res.Blocks), need)
	}
	for _, b := range res.Blocks {
		if b < 0 || b >= len(p.blocks) || p.blocks[b].state != blockCached {
			return false, fmt.Errorf("evictor chose block %d, which is not cached", b)
		}
	}
	if err := p.demote(res.Blocks); err != nil {
		return false, err
	}
	for _, b := range res.Blocks {
		p.tally.evictions.Evict(p.blocks[b].hash, p.blocks[b].owner)
		if p.arrived != nil {
			o := p.owners[p.blocks[b].owner]
			p.tally.hinted(&o.hints, p.now)
			p.settleLease(o, leaseBroken)
		}
		p.uncache(b) // the evictor took them from its own view already
		p.release(b)
	}
	p.tally.latencies = append(p.tally.latencies, res.Elapsed)
	return true, nil
}

// evictionState is the pool as the evictor reads it at an eviction, valid
// until the next call. O(R) for R running sequences.
func (p *pool) evictionState() *EvictionState {
	st := &p.state
	st.Now, st.cachedLen, st.Running = p.now, p.cached, st.Running[:0]
	for _, s := range p.running {
		st.Running = append(st.Running, RunningSequence{
			ID: s.id, Blocks: s.blocks, Admitted: s.admitted, LastAccess: s.last,
			Priority: kvevict.Priority(p.w.Requests[s.req].Priority), SeqLen: s.tokens, MaxLen: s.maxLen,
		})
	}
	if p.arrived != nil {
		st.Running = append(st.Running, RunningSequence{ID: ClockID, Admitted: p.now, LastAccess: p.now})
	}
	return st
}

// ClockID is the ID of the running sequence by which [Serve] tells an
// evictor the time when the workload carries hints (see
// EvictionState.Running): no sequence of the pool takes it.
const ClockID = math.MaxUint64

// cachedSequence is sequence id, owner o of blocks (o's, head first), as
// an evictor sees it.
func (p *pool) cachedSequence(id uint64, o *owner, blocks []int) CachedSequence {
	cs := CachedSequence{
		ID: id, Blocks: blocks, Admitted: o.admitted, Released: o.released,
		AccessCount: o.accessCount, Priority: o.priority, SeqLen: o.seqLen, MaxLen: o.maxLen,
		Hints: o.hints,
	}
	if len(blocks) > 0 {
		cs.HeadHash = p.blocks[blocks[0]].hash
	}
	return cs
}

// freeBlocks is how many blocks are free: released or never used.
func (p *pool) freeBlocks() int {
	return len(p.free) + p.capacity - len(p.blocks)
}

// take pops a free block, the latest released or else the lowest never
// used, and marks it used by one reference.
func (p *pool) take() int {
	var b int
	if n := len(p.free); n > 0 {
		b = p.free[n-1]
		p.free = p.free[:n-1]
	} else {
		b = len(p.blocks)
		p.blocks = append(p.blocks, poolBlock{})
	}
	p.blocks[b] = poolBlock{state: blockUsed, refs: 1}
	p.used++
	return b
}

// settleLease counts owner o's lease once: honoured when a request reuses
// its blocks under it (read) or when it ends unread (wasted too); not when
// an eviction breaks it (counted in the blocks evicted under a lease,
// LeasedEvicted).
func (p *pool) settleLease(o *owner, how leaseEnd) {
	until := o.hints.LeaseUntil
	if until == 0 || o.leaseSettled {
		return
	}
	switch live := p.now < until; {
	case !live:
		p.tally.leaseHonoured(false)
	case how == leaseRead:
		p.tally.leaseHonoured(true)
	case how != leaseBroken:
		return
	}
	o.leaseSettled = true
}

// leaseEnd is what settleLease is told happened to a lease's owner: a
// request reused its blocks, an eviction took one, or nothing but the
// clock.
type leaseEnd uint8

const (
	leaseClock leaseEnd = iota
	leaseRead
	leaseBroken
)

// settleLeases counts, at the end of a run, the leases that ended unread
// or read but not counted yet; those still live count in neither.
func (p *pool) settleLeases() {
	for _, o := range p.owners {
		p.settleLease(o, leaseClock)
	}
}

// uncache takes cached block b out of its owner's count.
func (p *pool) uncache(b int) {
	blk := &p.blocks[b]
	o := p.owners[blk.owner]
	o.blocks[blk.at] = -1
	o.live--
	switch {
	case o.live == 0:
		delete(p.owners, blk.owner)
	case o.live < len(o.blocks)/2: // compact, amortized O(1) per block
		o.blocks = o.held(o.blocks[:0])
		for i, x := range o.blocks {
			p.blocks[x].at = i
		}
	}
	p.cached--
}

// release frees block b (used with no references, or just uncached).
func (p *pool) release(b int) {
	blk := &p.blocks[b]
	if blk.state == blockUsed {
		p.used--
	}
	if blk.hashed && p.byHash[blk.hash] == b {
		delete(p.byHash, blk.hash)
		if p.onEvent != nil {
			p.onEvent(prefix.Event{Kind: prefix.Removed, Hashes: []uint64{blk.hash}})
		}
	}
	p.blocks[b] = poolBlock{}
	p.free = append(p.free, b)
}

// drop releases s's references: prompt blocks nobody else references become
// cached, owned by s; generated blocks are freed. The evictor is told.
func (p *pool) drop(s *sequence) {
	s.alive = false
	switch {
	case s.decoding:
		p.clock.dropDecoder(s)
	case s.loading || s.ready: // not in the batch yet
		s.loading, s.ready = false, false
		p.aside--
	case p.clock.cost != nil:
		p.clock.endChunk(s)
		p.clock.prefDone -= int64(p.w.Requests[s.req].InputTokens - s.prefillLeft)
	}
	p.running = slices.DeleteFunc(p.running, func(x *sequence) bool { return x == s })
	req := &p.w.Requests[s.req]
	o := &owner{admitted: s.admitted, released: p.now,
		priority: kvevict.Priority(req.Priority), seqLen: s.tokens, maxLen: s.maxLen}
	if p.arrived != nil {
		o.hints = req.Hints.candidateHints(p.arrived[s.req])
		if o.hints.HardLease {
			p.hardOwners[s.id] = true
		}
	}
	for _, b := range s.blocks {
		blk := &p.blocks[b]
		blk.refs--
		if blk.refs > 0 {
			continue
		}
		if !blk.hashed {
			p.release(b)
			continue
		}
		blk.state, blk.owner, blk.at = blockCached, s.id, len(o.blocks)
		o.blocks = append(o.blocks, b) // in s.blocks order: head first
		o.live++
		p.used--
		p.cached++
	}
	if o.live > 0 {
		p.owners[s.id] = o
	}
	p.told = o.held(p.told[:0])
	cs := p.cachedSequence(s.id, o, p.told)
	p.ev.Release(&cs)
}
