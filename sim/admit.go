package sim

import (
	"errors"
	"math"
	"slices"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/internal/idmap"
	"github.com/sagellm/kvevict/prefix"
)

// admitWaiting starts the loaded sequences that wait for room in the
// batch, then admits waiting requests in order while they fit.
func (p *pool) admitWaiting() error {
	for len(p.ready) > 0 && p.room() {
		s := p.ready[0]
		p.ready[0] = nil
		p.ready = p.ready[1:]
		if s.ready { // not preempted since
			s.ready = false
			p.aside--
			p.beginPrefill(s)
			p.schedule(s)
		}
	}
	for len(p.waiting) > 0 && !p.paused && p.room() {
		ok, err := p.admit(p.waiting[0])
		if err != nil {
			return err
		}
		if !ok {
			p.wakeAtLeaseEnd()
			return nil
		}
		p.waiting = p.waiting[1:]
	}
	return nil
}

// room reports whether the batch has room for one more sequence under
// its cap: the running sequences less those set aside for their loads.
func (p *pool) room() bool {
	return p.clock.maxBatch == 0 || len(p.running)-p.aside < p.clock.maxBatch
}

// wakeAtLeaseEnd schedules a try of the waiting requests when the first
// hard lease ends, if nothing running will free blocks before: a pool
// that hard leases fill waits for them, as their promise says, rather
// than stop. Once per wait.
func (p *pool) wakeAtLeaseEnd() {
	if len(p.running) > 0 || p.woken || len(p.hardOwners) == 0 {
		return
	}
	end := int64(math.MaxInt64)
	for id := range p.hardOwners {
		if o, ok := p.owners[id]; ok && o.hints.HardLease && o.hints.LeaseUntil > p.now {
			end = min(end, o.hints.LeaseUntil)
		}
	}
	if end != math.MaxInt64 {
		p.woken = true
		p.f.timed.push(event{at: end, req: wake, eng: p.eng})
	}
}

// admit admits request r if its prompt fits, and reports whether it did
// (a prompt of Capacity blocks or more is rejected, and counts as done).
// The prompt's present blocks are referenced first, so that the eviction
// that makes room for the missing ones cannot take them.
func (p *pool) admit(r int) (bool, error) {
	req := &p.w.Requests[r]
	p.prompt = idmap.Distinct(req.HashIDs, len(req.HashIDs), p.prompt, &p.seen)
	prompt := p.prompt
	if len(prompt) >= p.capacity {
		p.reject(r)
		return true, nil
	}
	missing, fits := p.fits(prompt, r)
	if !fits {
		return false, nil // wait for running sequences to finish
	}
	first := !p.admitted[r]
	hit, m := p.lookup(req)
	p.countAdmission(r, first, hit)
	s := p.newSequence(r)
	p.beginAdmission(s, prompt)
	blocks := p.reference(prompt, first)
	p.tellReused()
	p.ev.Admit(&p.admission)
	loaded, err := p.load(r, m)
	if err != nil {
		return false, err
	}
	if err := p.allocatePrompt(prompt, blocks, missing); err != nil {
		return false, err
	}
	p.start(s, blocks, len(prompt), hit, loaded)
	return true, p.offer(req)
}

// reject refuses request r, whose prompt the pool cannot hold, and counts
// it done: at its first admission all its blocks are misses.
func (p *pool) reject(r int) {
	if !p.admitted[r] {
		p.admitted[r] = true
		p.tally.request(r, 0) // counted as all misses: served elsewhere
	}
	p.rejected++
	p.finishRequest(r)
}

// fits reports whether prompt fits the pool now, and how many of its
// blocks the pool lacks: those must fit the free blocks and the cached
// ones the prompt does not reuse.
func (p *pool) fits(prompt []uint64, r int) (missing int, ok bool) {
	held := p.hardHeld()
	// A request with a hard lease of its own renews the lease of every
	// owner whose blocks it reuses (renew), which then holds the rest of
	// them too.
	hard := p.arrived != nil && p.w.Requests[r].Hints.Hard
	clear(p.renewing)
	present, reusable := 0, 0
	for _, h := range prompt {
		if b, ok := p.byHash[h]; ok {
			present++
			blk := &p.blocks[b]
			if blk.state != blockCached {
				continue
			}
			reusable++
			switch id := blk.owner; {
			case p.hardOwners[id] || p.renewing[id]:
				held-- // reused, so not to be evicted
			case hard:
				p.renewing[id] = true
				held += p.owners[id].live - 1
			}
		}
	}
	missing = len(prompt) - present
	return missing, missing <= p.freeBlocks()+p.cached-reusable-held
}

// hardHeld returns how many cached blocks live hard leases hold, which no
// eviction may take, forgetting the owners whose lease ended or who hold
// nothing. O(owners under a hard lease).
func (p *pool) hardHeld() int {
	held := 0
	for id := range p.hardOwners {
		o, ok := p.owners[id]
		if !ok || !o.hints.HardLease || p.now >= o.hints.LeaseUntil {
			delete(p.hardOwners, id)
			continue
		}
		held += o.live
	}
	return held
}

// countAdmission counts the admission of request r, whose first hit
// blocks the pool or the tiers below it serve, in the tally, before
// anything of the pool changes: at the first, its hits and the tokens
// evictions made it compute again; at a recomputation, after a
// preemption, what it prefills again.
func (p *pool) countAdmission(r int, first bool, hit int) {
	req := &p.w.Requests[r]
	if !first {
		// What a preempted request prefills again is re-prefill, on top
		// of what its first admission computed.
		for i := hit; i < len(req.HashIDs); i++ {
			n := int64(blockTokens(req, i, p.w.BlockTokens))
			p.tally.prefill += n
			p.tally.rePrefillTokens += n
		}
		return
	}
	p.admitted[r] = true
	p.tally.request(r, hit)
	again := p.computedAgain(req, hit)
	p.tally.rePrefillTokens += again
	if p.returning(r) {
		p.tally.returning = append(p.tally.returning, again)
	}
	if p.w.GroupKind == "session" {
		p.lastOfGroup[req.Group] = r
	}
}

// computedAgain returns the tokens of req past its resident prefix of hit
// blocks that the pool had computed before, up to the first block it
// never had: computed again only because something was evicted. The pool
// had computed a block if it holds it or the ledger has its eviction
// pending: a block leaves the pool only by an eviction, and returns by a
// reference that ends it.
func (p *pool) computedAgain(req *Request, hit int) int64 {
	var again int64
	for i := hit; i < len(req.HashIDs); i++ {
		h := req.HashIDs[i]
		if _, resident := p.byHash[h]; !resident && !p.tally.evictions.Pending(h) {
			break
		}
		again += int64(blockTokens(req, i, p.w.BlockTokens))
	}
	return again
}

// newSequence returns the sequence that request r runs as, admitted now.
func (p *pool) newSequence(r int) *sequence {
	req := &p.w.Requests[r]
	s := &sequence{
		id: p.nextID, req: r, admitted: p.now, last: p.now, alive: true,
		maxLen: req.InputTokens + req.OutputTokens, outLeft: req.OutputTokens,
	}
	p.nextID++
	return s
}

// beginAdmission starts what the evictor is told of the admission of s
// with prompt: no sequence accessed or reused yet.
func (p *pool) beginAdmission(s *sequence, prompt []uint64) {
	p.admitting = s.req
	a := &p.admission
	*a = Admission{Seq: s.id, Now: p.now, Priority: kvevict.Priority(p.w.Requests[s.req].Priority),
		Hashes: prompt, Accessed: a.Accessed[:0], Reused: a.Reused[:0]}
	if p.arrived != nil {
		a.Hints = p.w.Requests[s.req].Hints.candidateHints(p.arrived[s.req])
	}
	clear(p.accessed)
	clear(p.found)
	p.reused = p.reused[:0]
}

// reference references the blocks of prompt that the pool holds, for the
// sequence admitted, taking the cached ones from their owners, and
// returns the prompt's blocks, -1 where the pool lacks one. The admission
// accesses the owners of the blocks it reuses, and those of the blocks it
// computes again, by the ledger (which a recomputation clears without
// counting).
func (p *pool) reference(prompt []uint64, first bool) []int {
	ledger := p.tally.evictions.Clear // a preempted request's recomputation is not counted again
	if first {
		ledger = p.tally.evictions.Access
	}
	blocks := make([]int, len(prompt))
	for i, h := range prompt {
		b, ok := p.byHash[h]
		if !ok {
			blocks[i] = -1
			if o, again := ledger(h); again {
				p.access(o)
			}
			continue
		}
		if p.blocks[b].state == blockCached {
			p.reuse(b)
		}
		p.blocks[b].refs++
		blocks[i] = b
	}
	p.tellReused()
	return blocks
}

// access adds sequence id to the admission's accessed sequences, once.
func (p *pool) access(id uint64) {
	if !p.accessed[id] {
		p.accessed[id] = true
		p.admission.Accessed = append(p.admission.Accessed, id)
	}
}

// reuse takes cached block b from its owner for the sequence admitted.
// The owner counts one hit per request, however many of its blocks the
// request reuses, as a sequence's candidate counts requests.
func (p *pool) reuse(b int) {
	blk := &p.blocks[b]
	id := blk.owner
	if !p.found[id] {
		p.found[id] = true
		o := p.owners[id] // before uncache, which forgets an owner with nothing left
		o.accessCount++
		if p.arrived != nil {
			p.settleLease(o, leaseRead)
			p.reusedID = id
			p.renew(o)
		}
		p.reused = append(p.reused, reusedOwner{id, o})
	}
	p.access(id)
	p.uncache(b)
	blk.state = blockUsed
	p.used++
}

// tellReused writes the owners the admission took blocks from into it, as
// they are now, in the order they were found.
func (p *pool) tellReused() {
	n := 0
	for _, r := range p.reused {
		n += r.o.live
	}
	p.told = slices.Grow(p.told[:0], n) // so that each owner's blocks stay in place
	for _, r := range p.reused {
		start := len(p.told)
		p.told = r.o.held(p.told)
		blocks := p.told[start:len(p.told):len(p.told)]
		p.admission.Reused = append(p.admission.Reused, p.cachedSequence(r.id, r.o, blocks))
	}
}

// allocatePrompt allocates the blocks of prompt that blocks lacks (-1),
// missing of them, which admit checked fit, and indexes them by hash.
func (p *pool) allocatePrompt(prompt []uint64, blocks []int, missing int) error {
	ok, err := p.allocate(missing)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("internal: admission checked the space but allocation failed")
	}
	p.gpuStored += int64(missing)
	run := -1 // the first block of the run of new blocks under way
	for i, h := range prompt {
		if blocks[i] >= 0 {
			p.stored(prompt, run, i)
			run = -1
			continue
		}
		b := p.take()
		p.blocks[b].hashed, p.blocks[b].hash = true, h
		p.byHash[h] = b
		blocks[i] = b
		if run < 0 {
			run = i
		}
	}
	p.stored(prompt, run, len(prompt))
	return nil
}

// stored emits the KV event of prompt's new blocks from to to, a chain
// under the block before them; none if from is negative or nothing takes
// the pool's events.
func (p *pool) stored(prompt []uint64, from, to int) {
	if p.onEvent == nil || from < 0 {
		return
	}
	e := prefix.Event{Kind: prefix.Stored, Hashes: slices.Clone(prompt[from:to]), PrefixLen: from}
	if from > 0 {
		e.Parent, e.HasParent = prompt[from-1], true
	}
	p.onEvent(e)
}

// start runs s on blocks, the first n of them its prompt's, the first hit
// of those found computed or loaded: with a clock it prefills the rest,
// in chunks of steps, once its loads end at tick loaded; without one the
// prefill takes none, and s decodes at once.
func (p *pool) start(s *sequence, blocks []int, n, hit int, loaded int64) {
	req := &p.w.Requests[s.req]
	s.blocks = blocks
	for i := range n {
		s.tokens += blockTokens(req, i, p.w.BlockTokens)
	}
	p.running = append(p.running, s)
	c := p.clock
	if c.cost == nil {
		s.decoding, s.vAt = true, c.v
		c.addDecoder(s)
	} else {
		// A prompt found whole still computes its last token, as vLLM does,
		// for the logits of the first output token.
		s.prefillLeft = max(req.InputTokens-tokensBefore(req, hit, p.w.BlockTokens), min(req.InputTokens, 1))
		if loaded > p.now {
			// Its blocks are held, and its prefill waits for them, out
			// of the batch.
			s.loading = true
			p.aside++
			p.f.timed.push(event{at: loaded, seq: s, eng: p.eng})
			return
		}
		p.beginPrefill(s)
	}
	p.schedule(s)
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

// renew renews the lease of owner o, whose blocks the request admitted
// reuses, when that request carries a ttl of its own: to its ttl from its
// arrival, as a front end's TTL refreshed on use.
func (p *pool) renew(o *owner) {
	r := p.admitting
	h := &p.w.Requests[r].Hints
	if h.TTLMs == 0 {
		return
	}
	o.hints.LeaseUntil, o.hints.HardLease = p.arrived[r]+h.TTLMs*1000, h.Hard
	o.leaseSettled = false
	if h.Hard {
		p.hardOwners[p.reusedID] = true
	}
}
