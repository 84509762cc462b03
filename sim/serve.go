package sim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/internal/dlist"
	"github.com/sagellm/kvevict/internal/rank"
)

// DefaultTokenTime is how long a running sequence takes to decode one token
// in [Serve] unless ServeConfig.TokenTime says otherwise.
const DefaultTokenTime = 20 * time.Millisecond

// ServeConfig configures [Serve].
type ServeConfig struct {
	Config
	// TokenTime is the time to decode one token; 0 means DefaultTokenTime.
	// Prefill is instantaneous. Must not be negative.
	TokenTime time.Duration
	// Granularity is what one eviction candidate is; "" means
	// DefaultGranularity. Block granularity needs a key strategy or Auto.
	Granularity Granularity
	// Evictor, if set, replaces the evictor Granularity names: the seam
	// for other granularities. Report.Granularity is then Granularity as
	// given.
	Evictor Evictor

	// afterStep, if set, is called after every event: a test hook for the
	// pool's invariant checker.
	afterStep func(*pool)
}

// Serve runs w through a paged KV pool of cfg.Capacity blocks with prefix
// caching, evicting with strategy s at cfg.Granularity (or with
// cfg.Evictor), as an inference server would:
//
//   - a request arrives at its Timestamp, or later if it is a session's turn
//     and its previous turn finished late (below), and waits, first come
//     first served; it is admitted when its prompt fits: the longest prefix
//     of its blocks already in the pool hits, prompt blocks in the pool
//     beyond that prefix are reused but computed, the others are allocated
//     and prefilled;
//   - a running sequence holds a reference on each of its blocks and decodes
//     one token per TokenTime, allocating a new block whenever its last one
//     fills;
//   - a finished sequence releases its blocks: prompt blocks stay cached
//     (evictable) until evicted, generated ones are freed; each later
//     request that reuses any of them is one hit on that sequence, its
//     candidate's AccessCount at sequence and tail granularity;
//   - an allocation that does not fit the free blocks asks the evictor for
//     cached ones; if they cannot cover it, the latest admitted running
//     sequence (perhaps the growing one) is preempted: it releases
//     everything and waits, first in line, to be recomputed; admissions
//     pause until a sequence finishes. A sequence alone in a pool too small
//     for it is finished early (Report.Truncated). A prompt that cannot fit the pool
//     at all is rejected (Report.Rejected).
//
// When groups are sessions (w.GroupKind == "session"), arrivals are closed
// loop, as a user or an agent sends its next turn only after reading the
// previous answer: a request whose Timestamp is at least its session's
// previous request's Timestamp plus that request's decode time
// (OutputTokens x TokenTime) follows it, and arrives no earlier than its
// pause after that request finished, the pause being what the timestamps
// leave between the two once the decode is taken out:
//
//	pause   = Timestamp - prev.Timestamp - prev.OutputTokens x TokenTime
//	arrival = max(Timestamp, finish(prev) + pause)
//
// finish(prev) is when prev finished for good: after its last
// recomputation if it was preempted, when it was refused if rejected, when
// it was cut short if truncated. A pool that admits every request on
// arrival finishes each at its Timestamp plus its decode time, so arrivals
// are the timestamps exactly; a loaded pool delays a session's turns by the
// queueing of the turns before them. A request the timestamps send before
// its session's previous one could have finished (a batch's parallel
// questions, or a pause shorter than the decode at this TokenTime) did not
// wait for it and arrives at its Timestamp, as do requests of tenants and
// a session's first request.
//
// Hits, prefill and fairness count each request's first admission (a
// rejected request counts as all misses). Re-prefill tokens are the prompt
// tokens computed again because of evictions: at a first admission, those
// after the resident prefix and within the longest prefix the pool had
// computed before (an unbounded pool would have hit them), and all of a
// preempted request's recomputation. Report.RePrefillTokensP50 and P99
// are taken over the returning requests: first admissions of a session's
// later request when a block of the prompt prefix it shares with the
// session's previous admitted request is no longer in the pool.
func Serve(w *Workload, s kvevict.Strategy, cfg ServeConfig) (Report, error) {
	if err := cfg.validate(w); err != nil {
		return Report{}, err
	}
	if cfg.TokenTime < 0 {
		return Report{}, fmt.Errorf("sim: token time must not be negative, got %v", cfg.TokenTime)
	}
	g := cfg.Granularity
	ev := cfg.Evictor
	if ev == nil {
		if g == "" {
			g = DefaultGranularity
		}
		var err error
		if ev, err = newEvictor(g, s, cfg.Capacity, cfg.Options, cfg.contract); err != nil {
			return Report{}, fmt.Errorf("sim: serve %s: %w", s, err)
		}
	}
	p := newPool(w, cfg, ev)
	if err := p.run(); err != nil {
		return Report{}, fmt.Errorf("sim: serve %s: %w", s, err)
	}
	rep := p.tally.report(string(s), "serve", cfg.Capacity)
	rep.Granularity = string(g)
	rep.Preemptions, rep.Rejected, rep.Truncated = p.preemptions, p.rejected, p.truncated
	return rep, nil
}

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
	pos    int    // cached: its index in the owner's prompt
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
	tokenTime int64 // ticks per token
	ev        Evictor
	cfg       *ServeConfig
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
	events  eventQueue
	now     int64
	// next is the first request of the timestamp order not yet arrived;
	// requests that follow their session's previous one are skipped there
	// and arrive as events, once their predecessor finished.
	next int
	// follower[r] is the request of r's session that waits for r to
	// finish, or -1; follows[r] says r is such a request. Both are nil
	// unless groups are sessions.
	follower []int
	follows  []bool
	nextID   uint64
	admitted []bool // first admission done
	// lastOfGroup is each session's latest request admitted, when groups
	// are sessions.
	lastOfGroup map[uint64]int
	// paused stops admissions from a preemption until a sequence finishes,
	// so that a preempted request is not readmitted into the same shortage
	// and the oldest running sequence always makes progress.
	paused bool
	done   int // requests finished or rejected

	tally                            *tally
	preemptions, rejected, truncated int
	scratch                          []uint64
	state                            EvictionState // reused by evictionState
	watcher                          watcher       // p.ev, if it keeps its own view
	ownerIDs                         []uint64
	seen                             map[uint64]struct{}
}

func newPool(w *Workload, cfg ServeConfig, ev Evictor) *pool {
	tt := cfg.TokenTime
	if tt == 0 {
		tt = DefaultTokenTime
	}
	p := &pool{
		w:           w,
		capacity:    cfg.Capacity,
		tokenTime:   max(int64(tt/time.Microsecond), 1),
		ev:          ev,
		cfg:         &cfg,
		afterStep:   cfg.afterStep,
		byHash:      make(map[uint64]int),
		owners:      make(map[uint64]*owner),
		admitted:    make([]bool, len(w.Requests)),
		lastOfGroup: make(map[uint64]int),
		tally:       newTally(w, computeCeiling(w)),
		seen:        make(map[uint64]struct{}),
	}
	p.state.lookup = p.lookupCached
	p.watcher, _ = ev.(watcher)
	if w.GroupKind == "session" {
		p.linkSessions()
	}
	return p
}

// linkSessions finds, for every session request, whether it follows the
// session's previous request: whether its Timestamp leaves that request
// time to decode (see [Serve]). O(n) time and memory.
func (p *pool) linkSessions() {
	reqs := p.w.Requests
	p.follower = make([]int, len(reqs))
	p.follows = make([]bool, len(reqs))
	last := make(map[uint64]int)
	for i := range reqs {
		p.follower[i] = -1
		if prev, ok := last[reqs[i].Group]; ok && p.pause(prev, i) >= 0 {
			p.follower[prev] = i
			p.follows[i] = true
		}
		last[reqs[i].Group] = i
	}
}

// pause is how long after request prev finished request r of the same
// session comes: the gap between their timestamps less prev's decode time,
// in ticks; negative when r was sent before prev could have finished.
func (p *pool) pause(prev, r int) int64 {
	a, b := &p.w.Requests[prev], &p.w.Requests[r]
	return (b.Timestamp-a.Timestamp)*1000 - int64(a.OutputTokens)*p.tokenTime
}

// lookupCached returns the cached block holding hash, if any.
func (p *pool) lookupCached(hash uint64) (int, bool) {
	b, ok := p.byHash[hash]
	if !ok || p.blocks[b].state != blockCached {
		return -1, false
	}
	return b, true
}

// event is a running sequence's next milestone (its last block is full, so
// it needs another, or it is done) or, with no sequence, the arrival of
// request req, which follows its session's previous request and was
// released by its finish. At equal times milestones go first, so that
// finishing sequences free their blocks, then arrivals by request index.
type event struct {
	at  int64
	seq *sequence
	req int
}

// eventQueue holds the pending events in the order of before, on the
// indexed heap that ranks candidates: an event's key is its time, then 0
// for a milestone or 1 for an arrival, and its ID the sequence's or the
// request's.
type eventQueue struct {
	heap   rank.Heap
	slots  dlist.Slots
	events []event // by the slot of the heap entry
}

func (q *eventQueue) len() int { return q.heap.Len() }

// min returns the earliest event; the queue must not be empty. O(1).
func (q *eventQueue) min() event { return q.events[q.heap.Min().Slot] }

// push queues e. O(log n).
func (q *eventQueue) push(e event) {
	slot, grown := q.slots.Alloc()
	if grown {
		q.events = append(q.events, event{})
	}
	q.events[slot] = e
	k, id := rank.Key{Major: e.at, Minor: 1}, uint64(e.req)
	if e.seq != nil {
		k.Minor, id = 0, e.seq.id
	}
	q.heap.Push(rank.Entry{Key: k, ID: id, Slot: slot, Blocks: 1})
}

// pop removes and returns the earliest event. O(log n).
func (q *eventQueue) pop() event {
	slot := q.heap.Min().Slot
	e := q.events[slot]
	q.heap.Remove(slot)
	q.events[slot] = event{}
	q.slots.Free(slot)
	return e
}

// before orders events by time, then milestones before arrivals, then by
// sequence or request.
func (e event) before(o event) bool {
	switch {
	case e.at != o.at:
		return e.at < o.at
	case (e.seq == nil) != (o.seq == nil):
		return e.seq != nil
	case e.seq != nil:
		return e.seq.id < o.seq.id
	default:
		return e.req < o.req
	}
}

// nextArrival returns the next arrival of the timestamp order, as an
// event, and whether there is one. It skips followers: their
// predecessor's finish releases them as events.
func (p *pool) nextArrival() (event, bool) {
	for p.next < len(p.w.Requests) && p.follows != nil && p.follows[p.next] {
		p.next++
	}
	if p.next == len(p.w.Requests) {
		return event{}, false
	}
	return event{at: p.w.Requests[p.next].Timestamp * 1000, req: p.next}, true
}

// run processes arrivals and sequence events in time order; at equal times
// sequence events go first, so finishing sequences free their blocks.
func (p *pool) run() error {
	for {
		a, arriving := p.nextArrival()
		var e event
		switch {
		case p.events.len() > 0 && (!arriving || !a.before(p.events.min())):
			e = p.events.pop()
		case arriving:
			e = a
			p.next++
		default:
			return nil
		}
		if e.seq != nil && !e.seq.alive {
			continue // preempted since
		}
		p.now = max(p.now, e.at)
		if e.seq == nil {
			p.waiting = append(p.waiting, e.req)
		} else if err := p.step(e.seq); err != nil {
			return err
		}
		if err := p.admitWaiting(); err != nil {
			return err
		}
		p.tally.utilization(p.used+p.cached, p.capacity)
		if p.afterStep != nil {
			p.afterStep(p)
		}
	}
}

// schedule queues s's next event: when its last block fills, or when it is
// done if that comes first.
func (p *pool) schedule(s *sequence) {
	room := len(s.blocks)*p.w.BlockTokens - s.tokens
	k := min(s.outLeft, room)
	p.events.push(event{at: p.now + int64(k)*p.tokenTime, seq: s})
}

// step advances s to its event: it generated the tokens since, and either
// finishes or needs a block.
func (p *pool) step(s *sequence) error {
	room := len(s.blocks)*p.w.BlockTokens - s.tokens
	k := min(s.outLeft, room)
	s.tokens += k
	s.outLeft -= k
	s.last = p.now
	if s.outLeft == 0 {
		p.finish(s)
		return nil
	}
	p.runningChanged(s)
	for s.alive {
		ok, err := p.allocate(1)
		if err != nil {
			return err
		}
		if ok {
			b := p.take()
			s.blocks = append(s.blocks, b)
			p.runningChanged(s)
			p.schedule(s)
			return nil
		}
		if len(p.running) > 1 {
			// Recompute preemption of the latest admitted sequence, as
			// vLLM does: possibly s itself.
			p.preempt(p.running[len(p.running)-1])
			continue
		}
		p.truncated++ // alone, and the pool cannot hold it
		p.finish(s)
	}
	return nil
}

// admitWaiting admits waiting requests in order while they fit.
func (p *pool) admitWaiting() error {
	for len(p.waiting) > 0 && !p.paused {
		ok, err := p.admit(p.waiting[0])
		if err != nil || !ok {
			return err
		}
		p.waiting = p.waiting[1:]
	}
	return nil
}

// admit admits request r if its prompt fits, and reports whether it did
// (a prompt of Capacity blocks or more is rejected, and counts as done).
func (p *pool) admit(r int) (bool, error) {
	req := &p.w.Requests[r]
	p.scratch = distinct(req.HashIDs, len(req.HashIDs), p.scratch, p.seen)
	prompt := p.scratch
	if len(prompt) >= p.capacity {
		if !p.admitted[r] {
			p.admitted[r] = true
			p.tally.request(r, 0) // counted as all misses: served elsewhere
		}
		p.rejected++
		p.finishRequest(r)
		return true, nil
	}
	present, reusable := 0, 0
	for _, h := range prompt {
		if b, ok := p.byHash[h]; ok {
			present++
			if p.blocks[b].state == blockCached {
				reusable++
			}
		}
	}
	missing := len(prompt) - present
	if missing > p.freeBlocks()+p.cached-reusable {
		return false, nil // wait for running sequences to finish
	}
	hit := prefixHits(req.HashIDs, func(h uint64) bool { _, ok := p.byHash[h]; return ok })
	first := !p.admitted[r]
	if first {
		p.admitted[r] = true
		p.tally.request(r, hit)
		// Blocks past the resident prefix that the pool had computed
		// before, up to the first it never had, are computed again only
		// because something was evicted. The pool had computed a block
		// if it holds it or the ledger has its eviction pending: a block
		// leaves the pool only by an eviction, and returns by a reference
		// that ends it.
		var again int64
		for i := hit; i < len(req.HashIDs); i++ {
			h := req.HashIDs[i]
			if _, resident := p.byHash[h]; !resident && !p.tally.evictions.Pending(h) {
				break
			}
			again += int64(blockTokens(req, i, p.w.BlockTokens))
		}
		p.tally.rePrefillTokens += again
		if p.returning(r) {
			p.tally.returning = append(p.tally.returning, again)
		}
		if p.w.GroupKind == "session" {
			p.lastOfGroup[req.Group] = r
		}
	} else {
		// Recomputing a preempted request: what it prefills again is
		// re-prefill, on top of what its first admission computed.
		for i := range req.HashIDs {
			if i >= hit {
				n := int64(blockTokens(req, i, p.w.BlockTokens))
				p.tally.prefill += n
				p.tally.rePrefillTokens += n
			}
		}
	}
	s := &sequence{
		id: p.nextID, req: r, admitted: p.now, last: p.now, alive: true,
		maxLen: req.InputTokens + req.OutputTokens, outLeft: req.OutputTokens,
	}
	p.nextID++
	// Reference what is present first, so the eviction cannot take it.
	blocks := make([]int, len(prompt))
	accessed := map[uint64]bool{} // owners told to the evictor's Access
	found := map[uint64]bool{}    // owners this request found cached blocks of
	for i, h := range prompt {
		b, ok := p.byHash[h]
		if !ok {
			blocks[i] = -1
			reference := p.tally.evictions.Clear // a preempted request's recomputation is not counted again
			if first {
				reference = p.tally.evictions.Access
			}
			if o, again := reference(h); again && !accessed[o] {
				accessed[o] = true
				p.ev.Access(o)
			}
			continue
		}
		blk := &p.blocks[b]
		if blk.state == blockCached {
			if !found[blk.owner] {
				// One hit on the owner per request, however many of its
				// blocks the request reuses, as a sequence's candidate
				// counts requests; counted before uncache, which forgets
				// an owner that has nothing left.
				found[blk.owner] = true
				p.owners[blk.owner].accessCount++
			}
			if !accessed[blk.owner] {
				accessed[blk.owner] = true
				p.ev.Access(blk.owner)
			}
			p.uncache(b)
			p.ownerChanged(blk.owner)
			blk.state = blockUsed
			p.used++
		}
		blk.refs++
		blocks[i] = b
	}
	p.ev.Admit(s.id, prompt, p.now, kvevict.Priority(req.Priority))
	ok, err := p.allocate(missing)
	if err != nil {
		return false, err
	}
	if !ok {
		return false, errors.New("internal: admission checked the space but allocation failed")
	}
	for i, h := range prompt {
		if blocks[i] < 0 {
			b := p.take()
			p.blocks[b].hashed, p.blocks[b].hash = true, h
			p.byHash[h] = b
			blocks[i] = b
		}
	}
	s.blocks = blocks
	for i := range prompt {
		s.tokens += blockTokens(req, i, p.w.BlockTokens)
	}
	p.running = append(p.running, s)
	p.runningChanged(s)
	p.schedule(s)
	return true, nil
}

// returning reports whether request r, at its first admission, returns to
// a session that lost KV since its last turn: its group is a session with
// an earlier admitted request, and a block of the longest common prefix of
// the two prompts is no longer in the pool. O(prompt length).
func (p *pool) returning(r int) bool {
	req := &p.w.Requests[r]
	prev, ok := p.lastOfGroup[req.Group]
	if !ok || p.w.GroupKind != "session" {
		return false
	}
	before := p.w.Requests[prev].HashIDs
	for i := 0; i < len(before) && i < len(req.HashIDs) && before[i] == req.HashIDs[i]; i++ {
		if _, ok := p.byHash[before[i]]; !ok {
			return true
		}
	}
	return false
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
		p.tally.evictions.Evict(p.blocks[b].hash, p.blocks[b].owner)
		p.uncache(b) // a watcher took the blocks from its own view already
		p.release(b)
	}
	p.tally.latencies = append(p.tally.latencies, res.Elapsed)
	return true, nil
}

// evictionState is the pool as the evictor sees it, valid until the next
// call. O(C + R + O log O) for C cached blocks, R running sequences and O
// owners; O(1) for a watcher, which gets no lists.
func (p *pool) evictionState() *EvictionState {
	st := &p.state
	st.Now, st.Cached, st.Running, st.cachedLen = p.now, st.Cached[:0], st.Running[:0], p.cached
	if p.watcher != nil {
		return st
	}
	ids := p.ownerIDs[:0]
	for id := range p.owners {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	p.ownerIDs = ids
	for _, id := range ids {
		o := p.owners[id]
		for _, b := range o.blocks {
			if b < 0 {
				continue
			}
			blk := &p.blocks[b]
			st.Cached = append(st.Cached, CachedBlock{
				Block: b, Hash: blk.hash, Owner: id, Pos: blk.pos,
				OwnerAdmitted: o.admitted, OwnerReleased: o.released, OwnerAccessCount: o.accessCount,
				Priority: o.priority, SeqLen: o.seqLen, MaxLen: o.maxLen,
			})
		}
	}
	for _, s := range p.running {
		st.Running = append(st.Running, RunningSequence{
			ID: s.id, Blocks: s.blocks, Admitted: s.admitted, LastAccess: s.last,
			Priority: kvevict.Priority(p.w.Requests[s.req].Priority), SeqLen: s.tokens, MaxLen: s.maxLen,
		})
	}
	return st
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
	}
	p.blocks[b] = poolBlock{}
	p.free = append(p.free, b)
}

// drop releases s's references: prompt blocks nobody else references become
// cached, owned by s; generated blocks are freed.
func (p *pool) drop(s *sequence) {
	s.alive = false
	defer p.ownerChanged(s.id)
	p.ev.Release(s.id, p.now)
	p.running = slices.DeleteFunc(p.running, func(x *sequence) bool { return x == s })
	req := &p.w.Requests[s.req]
	var o *owner
	for i, b := range s.blocks {
		blk := &p.blocks[b]
		blk.refs--
		if blk.refs > 0 {
			continue
		}
		if !blk.hashed {
			p.release(b)
			continue
		}
		if o == nil {
			o = &owner{admitted: s.admitted, released: p.now,
				priority: kvevict.Priority(req.Priority), seqLen: s.tokens, maxLen: s.maxLen}
			p.owners[s.id] = o
		}
		blk.state, blk.owner, blk.pos, blk.at = blockCached, s.id, i, len(o.blocks)
		o.blocks = append(o.blocks, b) // in s.blocks order: head first
		o.live++
		p.used--
		p.cached++
	}
}

func (p *pool) finish(s *sequence) {
	p.drop(s)
	p.paused = false
	p.finishRequest(s.req)
}

// finishRequest counts request r finished (for good: a preempted request
// finishes after its recomputation) or rejected, and releases the request
// of its session that waits for it, to arrive its pause from now.
func (p *pool) finishRequest(r int) {
	p.done++
	p.cfg.progress(p.done, len(p.w.Requests))
	if p.follower == nil || p.follower[r] < 0 {
		return
	}
	f := p.follower[r]
	at := max(p.w.Requests[f].Timestamp*1000, p.now+p.pause(r, f))
	p.events.push(event{at: at, req: f})
}

// preempt stops s and queues its request first, to be recomputed.
func (p *pool) preempt(s *sequence) {
	p.drop(s)
	p.preemptions++
	p.paused = true
	p.waiting = slices.Insert(p.waiting, 0, s.req)
}

// runningChanged tells a watcher that running sequence s was admitted or
// advanced.
func (p *pool) runningChanged(s *sequence) {
	if p.watcher != nil {
		p.watcher.running(s, kvevict.Priority(p.w.Requests[s.req].Priority))
	}
}

// ownerChanged tells a watcher what sequence id holds cached now: it
// stopped running, or lost a cached block to a request that reuses it.
func (p *pool) ownerChanged(id uint64) {
	if p.watcher != nil {
		p.watcher.owner(id, p.owners[id])
	}
}
