package sim

import (
	"slices"
	"time"

	"github.com/sagellm/kvevict/internal/dlist"
	"github.com/sagellm/kvevict/internal/rank"
)

// links is the closed loop's graph ([Serve]): the requests each request
// waits for, and when it is sent once they all finished.
type links struct {
	// Each request's followers, as a list of edges: head[r] is r's first
	// edge or -1, to[e] an edge's follower, next[e] r's next edge or -1.
	head, to, next []int
	follows        []bool  // the request waits for others; not sent on its timestamp
	left           []int   // how many of them have yet to finish
	ready          []int64 // the latest finish among them so far, in ticks
	// A follower is sent at max(floor, ready + pause): with a pause the
	// trace gives, that pause after the last finish (floor 0); else the
	// pause its timestamps leave, and never before its Timestamp.
	pause, floor []int64
}

// linkSessions builds the closed loop's graph. A request whose Wait names
// requests follows those; any other session request follows its
// session's previous request when its Wait gives a pause, or when its
// Timestamp leaves that request time to decode (see [Serve]). O(n +
// edges) time and memory.
func (f *fleet) linkSessions() {
	reqs := f.w.Requests
	n := len(reqs)
	l := &links{head: make([]int, n), follows: make([]bool, n), left: make([]int, n),
		ready: make([]int64, n), pause: make([]int64, n), floor: make([]int64, n)}
	link := func(prev, r int) {
		l.to = append(l.to, r)
		l.next = append(l.next, l.head[prev])
		l.head[prev] = len(l.to) - 1
		l.follows[r] = true
		l.left[r]++
	}
	last := make(map[uint64]int)
	for i := range reqs {
		l.head[i] = -1
		prev, ok := last[reqs[i].Group]
		last[reqs[i].Group] = i
		switch wait := reqs[i].Wait; {
		case wait != nil && len(wait.For) > 0:
			for _, f := range wait.For {
				link(f, i)
			}
			l.pause[i] = int64(wait.Pause / time.Microsecond)
		case !ok: // a session's first request: sent on its timestamp
		case wait != nil:
			link(prev, i)
			l.pause[i] = int64(wait.Pause / time.Microsecond)
		default:
			// The pause is what the timestamps leave once prev's decode is
			// taken out; negative, r was sent before prev could finish.
			pause := f.sent(i) - f.sent(prev) - int64(reqs[prev].OutputTokens)*f.tokenTime
			if pause >= 0 {
				link(prev, i)
				l.pause[i], l.floor[i] = pause, f.sent(i)
			}
		}
	}
	f.links = l
}

// releaseFollowers counts request r finished at now for each request that
// follows it, and sends those whose last wait it was. O(r's followers x
// log n).
func (f *fleet) releaseFollowers(r int, now int64) {
	l := f.links
	for e := l.head[r]; e >= 0; e = l.next[e] {
		to := l.to[e]
		l.ready[to] = max(l.ready[to], now)
		l.left[to]--
		if l.left[to] == 0 {
			f.timed.push(event{at: max(l.floor[to], l.ready[to]+l.pause[to]), req: to})
		}
	}
}

// wake is the req of the event that wakes an idle pool whose waiting
// request hard leases keep out, when the first of them ends; its eng is
// the pool's.
const wake = -1

// event is a running sequence's next milestone (its last block is full, so
// it needs another, or it is done) or, with no sequence, the arrival of
// request req, which follows its session's previous request and was
// released by its finish. At equal times milestones go first, so that
// finishing sequences free their blocks, then arrivals by request index.
type event struct {
	at  int64
	seq *sequence
	req int
	eng int // a wake's pool, in its fleet
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

// fleet is the engines of one run on one clock: [Serve]'s pool, or the
// pools of a [Cluster] run with ClusterConfig.Decode. Arrivals, in the
// timestamp order or released by a finish in a closed loop, go to the pool
// route names at their time; the pools' milestones interleave with them in
// time, each pool's at its own progress.
type fleet struct {
	w     *Workload
	pools []*pool
	// route names the pool request r goes to, arriving at now.
	route func(r int, now int64) (int, error)
	// speedup divides the timestamps (1 in Serve); tokenTime is the rate
	// the timestamps are read at, in ticks a token.
	speedup   float64
	tokenTime int64
	// next is the first request of the timestamp order not yet arrived;
	// requests that follow their session's previous one are skipped there
	// and arrive as events, once their predecessor finished.
	next int
	// links are the closed loop's: which requests wait for which to
	// finish. nil in an open loop.
	links *links
	// timed are the arrivals released by a finish and the pools' wakes,
	// at their time.
	timed    eventQueue
	rec      *record
	done     int // requests finished or rejected
	progress func(done, total int)
}

// newFleet returns the fleet of w's run over pools, as cfg configures
// them, reading the timestamps sped up by speedup at tokenTime ticks a
// token. The pools join it with join.
func newFleet(w *Workload, cfg *EngineConfig, tokenTime int64, speedup float64, progress func(done, total int)) *fleet {
	f := &fleet{w: w, speedup: speedup, tokenTime: tokenTime, rec: newRecord(w, cfg), progress: progress}
	if cfg.Loop == LoopClosed || cfg.Loop == "" && w.GroupKind == "session" {
		f.linkSessions()
	}
	return f
}

// join adds p to the fleet.
func (f *fleet) join(p *pool) {
	p.f, p.eng = f, len(f.pools)
	f.pools = append(f.pools, p)
}

// sent is when request r is sent by its timestamp, in ticks: its
// Timestamp in microseconds over the speedup.
func (f *fleet) sent(r int) int64 {
	ms := f.w.Requests[r].Timestamp
	if f.speedup == 1 {
		return ms * 1000
	}
	return int64(float64(ms) * 1000 / f.speedup)
}

// nextArrival returns the next arrival of the timestamp order, as an
// event, and whether there is one. It skips followers: their
// predecessor's finish releases them as events.
func (f *fleet) nextArrival() (event, bool) {
	for f.next < len(f.w.Requests) && f.links != nil && f.links.follows[f.next] {
		f.next++
	}
	if f.next == len(f.w.Requests) {
		return event{}, false
	}
	return event{at: f.sent(f.next), req: f.next}, true
}

// earliest returns the earliest milestone of the pools, in time, with its
// progress and its pool; -1 for none. A tie goes to the first pool.
// O(pools).
func (f *fleet) earliest() (e event, v int64, k int) {
	k = -1
	for i, p := range f.pools {
		if p.events.len() == 0 {
			continue
		}
		m := p.events.min()
		if at := p.clock.at(p.now, m.at); k < 0 || at < e.at {
			e, v, k = m, m.at, i
			e.at = at
		}
	}
	return e, v, k
}

// run processes arrivals and the pools' events in time order; at equal
// times sequence events go first, so finishing sequences free their
// blocks. A sequence's event is due when its pool's progress reaches it,
// at the step time of the batch as it is.
func (f *fleet) run() error {
	for {
		a, arriving := f.nextArrival()
		timed := f.timed.len() > 0 && (!arriving || !a.before(f.timed.min()))
		if timed {
			a, arriving = f.timed.min(), true
		}
		e, v, k := f.earliest()
		var p *pool
		switch {
		case k >= 0 && (!arriving || !a.before(e)):
			p = f.pools[k]
			p.events.pop()
			if !e.seq.alive {
				continue // preempted since
			}
			p.advance(e.at)
			p.reach(v)
			if err := p.step(e.seq); err != nil {
				return err
			}
		case timed && f.timed.min().seq != nil:
			e = f.timed.pop()
			p = f.pools[e.eng]
			p.advance(e.at)
			if e.seq.alive { // not preempted since
				p.loaded(e.seq)
			}
		case timed && f.timed.min().req == wake:
			e = f.timed.pop()
			p = f.pools[e.eng]
			p.advance(e.at)
			p.woken = false // a hard lease ended: the waiting try again
		case timed || arriving:
			if timed {
				f.timed.pop()
			} else {
				f.next++
			}
			var err error
			if p, err = f.deliver(a); err != nil {
				return err
			}
		default:
			return nil
		}
		if err := p.admitWaiting(); err != nil {
			return err
		}
		p.clock.retime()
		p.tally.utilization(p.used+p.cached, p.capacity)
		if p.afterStep != nil {
			p.afterStep(p)
		}
	}
}

// deliver hands arrival a to the pool its route names.
func (f *fleet) deliver(a event) (*pool, error) {
	k, err := f.route(a.req, a.at)
	if err != nil {
		return nil, err
	}
	p := f.pools[k]
	p.advance(a.at)
	p.arrive(a.req)
	return p, nil
}

// finished counts request r finished for good (or rejected) at now, and
// releases the requests that wait for it.
func (f *fleet) finished(r int, now int64) {
	f.done++
	if f.progress != nil {
		f.progress(f.done, len(f.w.Requests))
	}
	if f.links != nil {
		f.releaseFollowers(r, now)
	}
}

// advance moves p's clock to t.
func (p *pool) advance(t int64) {
	p.clock.advance(p.now, t, len(p.running))
	p.now = max(p.now, t)
}

// reach sets p's progress to v, a milestone's, when the clock's rounding
// to whole ticks left it short of v: the milestone comes at its progress.
func (p *pool) reach(v int64) {
	if c := p.clock; v > c.v {
		c.v, c.frac = v, 0
	}
}

// arrive takes request r into p's queue, now.
func (p *pool) arrive(r int) {
	if p.arrived != nil {
		p.arrived[r] = p.now
	}
	p.clock.arrive(r, p.now)
	p.waiting = append(p.waiting, r)
	if p.queue != nil {
		p.queue.arrive(p, r)
	}
}

// schedule queues s's next event: the end of its prefill chunk a step on;
// or, decoding, when its last block fills, or when it is done if that
// comes first.
func (p *pool) schedule(s *sequence) {
	s.vAt = p.clock.v
	if !s.decoding {
		p.events.push(event{at: s.vAt + p.clock.unit, seq: s})
		return
	}
	room := len(s.blocks)*p.w.BlockTokens - s.tokens
	k := min(s.outLeft, room)
	p.events.push(event{at: s.vAt + int64(k)*p.clock.unit, seq: s})
}

// step advances s to its event: the end of a prefill chunk, or the tokens
// generated since; it then finishes, needs a block, or goes on.
func (p *pool) step(s *sequence) error {
	if !s.decoding {
		return p.prefilled(s)
	}
	c := p.clock
	c.dropDecoder(s)
	room := len(s.blocks)*p.w.BlockTokens - s.tokens
	k := min(s.outLeft, room)
	s.tokens += k
	s.outLeft -= k
	s.last = p.now
	s.vAt = c.v
	c.addDecoder(s)
	if s.outLeft == 0 {
		p.finish(s)
		return nil
	}
	return p.grow(s)
}

// prefilled ends s's prefill chunk: the next one starts, or, the prompt
// computed, the step's last token is s's first, and s decodes.
func (p *pool) prefilled(s *sequence) error {
	c := p.clock
	req := &p.w.Requests[s.req]
	s.prefillLeft -= s.chunk
	c.prefDone += int64(s.chunk)
	c.endChunk(s)
	if s.prefillLeft > 0 {
		c.beginChunk(s, req.InputTokens)
		p.schedule(s)
		return nil
	}
	c.prefDone -= int64(req.InputTokens)
	c.firstToken(s.req, p.now)
	if p.queue != nil {
		p.queue.started(s.req)
	}
	s.decoding, s.vAt = true, c.v
	c.addDecoder(s)
	if s.outLeft == 0 {
		p.finish(s)
		return nil
	}
	if len(s.blocks)*p.w.BlockTokens == s.tokens { // the first token needs a block
		if err := p.addBlock(s); err != nil || !s.alive {
			return err
		}
	}
	c.dropDecoder(s)
	s.tokens++
	s.outLeft--
	s.last = p.now
	c.addDecoder(s)
	if s.outLeft == 0 {
		p.finish(s)
		return nil
	}
	if len(s.blocks)*p.w.BlockTokens == s.tokens {
		return p.grow(s)
	}
	p.schedule(s)
	return nil
}

// grow gives s, whose blocks are full, another and schedules it.
func (p *pool) grow(s *sequence) error {
	if err := p.addBlock(s); err != nil || !s.alive {
		return err
	}
	p.schedule(s)
	return nil
}

// addBlock gives s, whose blocks are full, another, evicting or preempting
// as it must: s may be preempted or finished short in its place.
func (p *pool) addBlock(s *sequence) error {
	for s.alive {
		ok, err := p.allocate(1)
		if err != nil {
			return err
		}
		if ok {
			s.blocks = append(s.blocks, p.take())
			return nil
		}
		if len(p.running) > 1 {
			// Recompute preemption of the latest admitted sequence, as
			// vLLM does: possibly s itself.
			p.preempt(p.running[len(p.running)-1])
			continue
		}
		p.truncated++ // alone, and the pool cannot hold it
		if rec := p.clock.rec; rec.cut != nil {
			rec.cut[s.req] = true
		}
		p.finish(s)
	}
	return nil
}

func (p *pool) finish(s *sequence) {
	if s.outLeft == 0 {
		p.clock.rec.outTokens += int64(p.w.Requests[s.req].OutputTokens)
	}
	p.drop(s)
	p.paused = false
	p.finishRequest(s.req)
}

// finishRequest counts request r finished (for good: a preempted request
// finishes after its recomputation) or rejected, and releases the
// requests that wait for it.
func (p *pool) finishRequest(r int) {
	p.clock.done(r, p.now)
	if p.queue != nil {
		p.queue.started(r) // a rejected request starts nothing
	}
	p.f.finished(r, p.now)
}

// preempt stops s and queues its request first, to be recomputed.
func (p *pool) preempt(s *sequence) {
	p.drop(s)
	p.preemptions++
	p.paused = true
	p.waiting = slices.Insert(p.waiting, 0, s.req)
}
