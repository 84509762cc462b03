package sim

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sagellm/kvevict"
)

// checkPool verifies the pool's accounting: every block is in exactly one
// state and in use + free + cached == capacity; every reference belongs to
// a running sequence, whose blocks are all in use; the hash index and the
// owners' counts agree with the blocks.
func checkPool(t *testing.T, p *pool) {
	t.Helper()
	var free, used, cached, refs int
	ownerCounts := map[uint64]int{}
	for b := range p.blocks {
		blk := &p.blocks[b]
		switch blk.state {
		case blockFree:
			free++
			if blk.refs != 0 || blk.hashed {
				t.Fatalf("free block %d: %+v", b, *blk)
			}
		case blockUsed:
			used++
			if blk.refs < 1 {
				t.Fatalf("used block %d has %d references", b, blk.refs)
			}
		case blockCached:
			cached++
			if o := p.owners[blk.owner]; o == nil || !slices.Contains(o.blocks, b) {
				t.Fatalf("cached block %d is missing from its owner %d", b, blk.owner)
			}
			if blk.refs != 0 || !blk.hashed {
				t.Fatalf("cached block %d: %+v", b, *blk)
			}
			ownerCounts[blk.owner]++
		}
		refs += blk.refs
		if blk.state != blockFree && blk.hashed && p.byHash[blk.hash] != b {
			t.Fatalf("block %d with hash %d is not indexed", b, blk.hash)
		}
	}
	if len(p.blocks) > p.capacity || free != len(p.free) || used != p.used || cached != p.cached ||
		used+free+cached+p.capacity-len(p.blocks) != p.capacity || p.freeBlocks() != p.capacity-used-cached {
		t.Fatalf("in use %d (counted %d) + free %d (list %d) + cached %d (counted %d) + never used %d != %d",
			used, p.used, free, len(p.free), cached, p.cached, p.capacity-len(p.blocks), p.capacity)
	}
	held := 0
	for _, s := range p.running {
		for _, b := range s.blocks {
			if p.blocks[b].state != blockUsed {
				t.Fatalf("running sequence %d holds block %d in state %d", s.id, b, p.blocks[b].state)
			}
		}
		held += len(s.blocks)
	}
	if refs != held {
		t.Fatalf("%d references, but running sequences hold %d blocks", refs, held)
	}
	aside := 0
	for _, s := range p.running {
		if s.loading || s.ready {
			aside++
		}
		if s.loading && s.ready || (s.loading || s.ready) && (s.decoding || s.chunk > 0) {
			t.Fatalf("sequence %d: loading %v, ready %v, decoding %v, chunk %d", s.id, s.loading, s.ready, s.decoding, s.chunk)
		}
	}
	for _, s := range p.ready {
		if s.alive != s.ready {
			t.Fatalf("sequence %d waits for room: alive %v, ready %v", s.id, s.alive, s.ready)
		}
	}
	if aside != p.aside || p.clock.maxBatch > 0 && len(p.running)-aside > p.clock.maxBatch {
		t.Fatalf("%d running sequences out of the batch, the pool counts %d; %d running, cap %d", aside, p.aside, len(p.running), p.clock.maxBatch)
	}
	for id, n := range ownerCounts {
		if o := p.owners[id]; o == nil || o.live != n || len(o.held(nil)) != n {
			t.Fatalf("owner %d owns %d cached blocks, pool says %v", id, n, o)
		}
	}
	if len(ownerCounts) != len(p.owners) {
		t.Fatalf("%d owners with cached blocks, pool remembers %d", len(ownerCounts), len(p.owners))
	}
	for h, b := range p.byHash {
		if p.blocks[b].hash != h || p.blocks[b].state == blockFree {
			t.Fatalf("hash %d indexes block %d: %+v", h, b, p.blocks[b])
		}
	}
	switch e := p.ev.(type) {
	case *BlockEvictor:
		checkBlockEvictor(t, p, e)
	case *SequenceEvictor:
		checkSequenceEvictor(t, p, e)
	}
	checkClosedLoop(t, p)
}

// checkSequenceEvictor verifies that a sequence evictor's candidates agree
// with the pool: one cached candidate per owner, with the owner's blocks,
// head first, and fields; in an Index, every other candidate is a running
// sequence's.
func checkSequenceEvictor(t *testing.T, p *pool, e *SequenceEvictor) {
	t.Helper()
	var get func(id uint64) (kvevict.Candidate, bool)
	held := 0
	switch c := e.cands.(type) {
	case *policyCandidates:
		get = func(id uint64) (kvevict.Candidate, bool) { c, ok := c.cached[id]; return c, ok }
		held = len(c.cached)
	case *indexCandidates:
		get = c.x.Get
		held = c.x.Len()
		for _, s := range p.running {
			if _, ok := c.x.Get(s.id); ok {
				held--
			}
		}
		if _, ok := c.x.Get(ClockID); ok {
			held-- // the pool's clock, when the workload carries hints
		}
	}
	if held != len(p.owners) {
		t.Fatalf("the evictor holds %d cached candidates, the pool %d owners", held, len(p.owners))
	}
	for id, o := range p.owners {
		want := kvevict.Candidate{
			ID: id, Blocks: o.held(nil), LastAccess: o.released, CreatedAt: o.admitted,
			AccessCount: o.accessCount, Priority: o.priority, SeqLen: o.seqLen, MaxLen: o.maxLen,
			AllowPartial: e.partial, Hints: o.hints,
		}
		// The head's hash, as the strategy counts it: whichever block
		// the owner has left at its head.
		want.HeadHash = contentHash(p.blocks[want.Blocks[0]].hash)
		if got, ok := get(id); !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("owner %d: the evictor holds %+v (%v), want %+v", id, got, ok, want)
		}
	}
}

// checkClosedLoop verifies that no request that waits for another (its
// session's previous one, or those its Wait names) is waiting or running
// before that one finished for good: first admitted (or rejected) and
// neither waiting nor running since.
func checkClosedLoop(t *testing.T, p *pool) {
	t.Helper()
	if p.f.links == nil {
		return
	}
	inFlight := map[int]bool{}
	for _, r := range p.waiting {
		inFlight[r] = true
	}
	for _, s := range p.running {
		inFlight[s.req] = true
	}
	for prev, e := range p.f.links.head {
		for ; e >= 0; e = p.f.links.next[e] {
			if f := p.f.links.to[e]; inFlight[f] && (!p.admitted[prev] || inFlight[prev]) {
				t.Fatalf("request %d arrived before request %d it waits for finished", f, prev)
			}
		}
	}
}

// checkBlockEvictor verifies that a block evictor's tree agrees with the
// pool: every running sequence's prompt is locked, and the tree can evict
// at least every cached block (exactly them when hashes determine their
// prefix, as in the synthetic workloads and real traces).
func checkBlockEvictor(t *testing.T, p *pool, e *BlockEvictor) {
	t.Helper()
	running := 0
	for _, s := range p.running {
		if _, ok := e.prompts[s.id]; ok {
			running++
		}
	}
	if running != len(e.prompts) {
		t.Fatalf("tree holds %d locked prompts, %d of the running sequences", len(e.prompts), running)
	}
	if ev := e.tree.EvictableBlocks(); ev < p.cached || (p.w.Name != "fuzz" && ev != p.cached) {
		t.Fatalf("tree can evict %d blocks, pool has %d cached", ev, p.cached)
	}
}

// shortStrategies are the strategies TestServeInvariants runs at the other
// granularities than the default, and the only ones
// TestServeNeverEvictsReferenced runs, in -short mode and under the race
// detector (see reduced): recency both ways, frequency and priority.
var shortStrategies = []kvevict.Strategy{kvevict.LRU, kvevict.MRU, kvevict.LFU, kvevict.QoSAware}

// TestServeInvariants runs every synthetic workload under every strategy
// and granularity (block: the key strategies; with -short or the race
// detector, four of them beyond the default granularity) through a pool
// small enough to evict and preempt, checking the pool after every step.
func TestServeInvariants(t *testing.T) {
	skipUnderRace(t)
	t.Parallel()
	preempted := 0
	for _, name := range WorkloadNames() {
		n, capacity := 150, 160
		switch name {
		case "multiturn":
			n, capacity = 16, 700 // prompts of hundreds of blocks
		case "agentic":
			n, capacity = 100, 400 // prompts of up to 180 blocks
		}
		w, err := Synthetic(name, 1, n)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range Granularities() {
			for _, s := range kvevict.Strategies() {
				if reduced() && g != DefaultGranularity && !slices.Contains(shortStrategies, s) {
					continue
				}
				cfg := ServeConfig{Config: Config{Capacity: capacity}, Granularity: g,
					afterStep: func(p *pool) { checkPool(t, p) }}
				rep, err := Serve(w, s, cfg)
				if g == GranularityBlock && errors.Is(err, errors.ErrUnsupported) {
					continue // ARC, S3-FIFO, SIEVE: lists of sequences, no tree
				}
				if err != nil {
					t.Fatalf("%s/%s/%s: %v", name, g, s, err)
				}
				checkReport(t, &rep)
				if rep.EvictedBlocks == 0 {
					t.Errorf("%s/%s/%s: nothing evicted at %d blocks", name, g, s, capacity)
				}
				if rep.Granularity != string(g) {
					t.Errorf("%s/%s/%s: report says granularity %q", name, g, s, rep.Granularity)
				}
				preempted += rep.Preemptions
			}
		}
	}
	if preempted == 0 {
		t.Error("no run preempted a sequence: the preemption path went untested")
	}
}

// TestServePreemption: two sequences that each need the whole pool (a
// 1-block prompt and 3 generated blocks) to decode. The later one is
// preempted, recomputed after the first finishes, and every block returns.
func TestServePreemption(t *testing.T) {
	w := &Workload{Name: "two", BlockTokens: 2, GroupKind: "session", Requests: []Request{
		{Timestamp: 0, InputTokens: 2, OutputTokens: 6, HashIDs: []uint64{1}},
		{Timestamp: 0, InputTokens: 2, OutputTokens: 6, HashIDs: []uint64{2}},
	}}
	var last *pool
	sawPreempted := false
	cfg := ServeConfig{Config: Config{Capacity: 4}, afterStep: func(p *pool) {
		checkPool(t, p)
		last = p
		if p.preemptions > 0 && !sawPreempted {
			sawPreempted = true
			// The preempted sequence gave back every block: the one left
			// running holds all it has, and nothing else is referenced.
			if len(p.running) != 1 || p.used != len(p.running[0].blocks) {
				t.Errorf("after preemption: %d running, %d blocks in use", len(p.running), p.used)
			}
		}
	}}
	rep, err := Serve(w, kvevict.LRU, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Preemptions != 1 || rep.Truncated != 0 || rep.Rejected != 0 {
		t.Errorf("preemptions/truncated/rejected = %d/%d/%d, want 1/0/0", rep.Preemptions, rep.Truncated, rep.Rejected)
	}
	if last.f.done != 2 || last.used != 0 || len(last.running) != 0 {
		t.Errorf("at the end: %d done, %d in use, %d running", last.f.done, last.used, len(last.running))
	}
	// The first sequence filled the pool, evicting the preempted one's
	// cached prompt, so that prompt (2 tokens) was computed twice; then the
	// second did the same to the first's.
	if rep.RePrefillTokens != 2 || rep.EvictedBlocks != 2 {
		t.Errorf("re-prefill tokens = %d, evicted blocks = %d, want 2 and 2", rep.RePrefillTokens, rep.EvictedBlocks)
	}
	if last.cached != 1 {
		t.Errorf("at the end: %d cached blocks, want the last prompt only", last.cached)
	}
}

// TestServeClosedLoop: two sessions of two turns in a pool of 5 blocks that
// runs one 3-block prompt at a time. Each answer is 5 tokens (100 ms at
// DefaultTokenTime) and fits its prompt's last block, so nothing is
// preempted. B's first turn (r0) runs from 0 to 100 ms, A's (r1) waits
// for it and runs from 100 to 200 ms. A's second turn (r2, at 150 ms)
// leaves a pause of 150 - 100 = 50 ms after its first: it arrives at
// 200 + 50 = 250 ms, not at 150 ms while r1 decodes. B's second (r3, at
// 300 ms, a pause of 200 ms after r0's finish at 100 ms) arrives on its
// timestamp and waits for r2 to finish at 350 ms. In a pool that holds
// them all, every request arrives and is admitted at its timestamp.
func TestServeClosedLoop(t *testing.T) {
	w := &Workload{Name: "closed", BlockTokens: 10, GroupKind: "session", Requests: []Request{
		{Timestamp: 0, InputTokens: 25, OutputTokens: 5, HashIDs: []uint64{11, 12, 13}, Group: 1},
		{Timestamp: 0, InputTokens: 25, OutputTokens: 5, HashIDs: []uint64{1, 2, 3}, Group: 0},
		{Timestamp: 150, InputTokens: 35, OutputTokens: 5, HashIDs: []uint64{1, 2, 6, 7}, Group: 0},
		{Timestamp: 300, InputTokens: 35, OutputTokens: 5, HashIDs: []uint64{11, 12, 16, 17}, Group: 1},
	}}
	const ms = 1000 // ticks
	for _, tc := range []struct {
		capacity        int
		arrived, admits []int64 // per request, ms
	}{
		{5, []int64{0, 0, 250, 300}, []int64{0, 100, 250, 350}},
		{100, []int64{0, 0, 150, 300}, []int64{0, 0, 150, 300}},
	} {
		arrived, admits := []int64{-1, -1, -1, -1}, []int64{-1, -1, -1, -1}
		cfg := ServeConfig{Config: Config{Capacity: tc.capacity}, afterStep: func(p *pool) {
			checkPool(t, p)
			// One arrival or event per step: a request first seen
			// waiting or running arrived at this step's time.
			for _, r := range p.waiting {
				if arrived[r] < 0 {
					arrived[r] = p.now / ms
				}
			}
			for _, s := range p.running {
				if arrived[s.req] < 0 {
					arrived[s.req] = p.now / ms
				}
				if admits[s.req] < 0 {
					admits[s.req] = s.admitted / ms
				}
			}
		}}
		rep, err := Serve(w, kvevict.LRU, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Preemptions+rep.Rejected+rep.Truncated != 0 {
			t.Errorf("capacity %d: preempted/rejected/truncated %d/%d/%d, want none",
				tc.capacity, rep.Preemptions, rep.Rejected, rep.Truncated)
		}
		if !slices.Equal(arrived, tc.arrived) || !slices.Equal(admits, tc.admits) {
			t.Errorf("capacity %d: arrived at %v ms, admitted at %v ms; want %v and %v",
				tc.capacity, arrived, admits, tc.arrived, tc.admits)
		}
	}
}

// TestServeClosedLoopFinish: a follower waits for its predecessor's final
// finish, after its recomputation when it was preempted, and follows a
// rejected predecessor from its rejection. r0 and r1 each need the whole
// pool of 4 blocks to decode 6 tokens (120 ms), as in TestServePreemption:
// r1 is preempted and recomputed from 120 to 240 ms. r2 follows r1 by a
// pause of 130 - 120 = 10 ms: it arrives at 250 ms, and its prompt of 4
// blocks is rejected then. r3 follows r2 (no answer) by 5 ms: it arrives
// and is admitted at 255 ms.
func TestServeClosedLoopFinish(t *testing.T) {
	w := &Workload{Name: "finish", BlockTokens: 2, GroupKind: "session", Requests: []Request{
		{Timestamp: 0, InputTokens: 2, OutputTokens: 6, HashIDs: []uint64{1}, Group: 0},
		{Timestamp: 0, InputTokens: 2, OutputTokens: 6, HashIDs: []uint64{2}, Group: 1},
		{Timestamp: 130, InputTokens: 8, OutputTokens: 0, HashIDs: []uint64{2, 3, 4, 5}, Group: 1},
		{Timestamp: 135, InputTokens: 2, OutputTokens: 1, HashIDs: []uint64{2}, Group: 1},
	}}
	const ms = 1000 // ticks
	var r1Admitted, rejectedAt, r3Admitted int64 = -1, -1, -1
	cfg := ServeConfig{Config: Config{Capacity: 4}, afterStep: func(p *pool) {
		checkPool(t, p)
		for _, s := range p.running {
			switch s.req {
			case 1:
				r1Admitted = s.admitted / ms // the last admission: the recomputation
			case 3:
				r3Admitted = s.admitted / ms
			}
		}
		if p.rejected > 0 && rejectedAt < 0 {
			rejectedAt = p.now / ms
		}
	}}
	rep, err := Serve(w, kvevict.LRU, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Preemptions != 1 || rep.Rejected != 1 || rep.Truncated != 0 {
		t.Errorf("preempted/rejected/truncated %d/%d/%d, want 1/1/0", rep.Preemptions, rep.Rejected, rep.Truncated)
	}
	if r1Admitted != 120 || rejectedAt != 250 || r3Admitted != 255 {
		t.Errorf("r1 recomputed at %d ms, r2 rejected at %d ms, r3 admitted at %d ms; want 120, 250, 255",
			r1Admitted, rejectedAt, r3Admitted)
	}
}

// evilEvictor offers a referenced block.
type evilEvictor struct{}

func (evilEvictor) Evict(s *EvictionState, need int) (Eviction, error) {
	if len(s.Running) > 0 && len(s.Running[0].Blocks) > 0 {
		return Eviction{Blocks: []int{s.Running[0].Blocks[0]}}, nil
	}
	return Eviction{}, kvevict.ErrInsufficientBlocks
}
func (evilEvictor) Admit(*Admission)        {}
func (evilEvictor) Release(*CachedSequence) {}

// TestServeRefusesReferencedVictims: the pool rejects an evictor that
// chooses a block a running sequence references.
func TestServeRefusesReferencedVictims(t *testing.T) {
	w, err := Synthetic("chat", 3, 100)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Serve(w, kvevict.LRU, ServeConfig{Config: Config{Capacity: 120}, Evictor: evilEvictor{}})
	if err == nil || !strings.Contains(err.Error(), "not cached") {
		t.Errorf("err = %v, want the pool to refuse the referenced block", err)
	}
}

// watchingEvictor checks each choice of the evictor it wraps against the
// state it was given.
type watchingEvictor struct {
	Evictor
	exact bool // the evictor frees exactly the need
	t     *testing.T
	calls int
}

func (e *watchingEvictor) Evict(s *EvictionState, need int) (Eviction, error) {
	res, err := e.Evictor.Evict(s, need)
	if err != nil {
		return res, err
	}
	e.calls++
	referenced := map[int]bool{}
	for _, r := range s.Running {
		for _, b := range r.Blocks {
			referenced[b] = true
		}
	}
	seen := map[int]bool{}
	for _, b := range res.Blocks {
		if referenced[b] {
			e.t.Fatalf("evictor chose block %d of a running sequence", b)
		}
		if seen[b] {
			e.t.Fatalf("evictor chose block %d twice", b)
		}
		seen[b] = true
	}
	if len(res.Blocks) < need || (e.exact && len(res.Blocks) != need) {
		e.t.Errorf("evictor freed %d blocks for a need of %d", len(res.Blocks), need)
	}
	return res, nil
}

// TestServeNeverEvictsReferenced: at every granularity the evictor frees
// only cached blocks, distinct, at least the need (tail and block: exactly
// the need); every strategy, or the short ones with -short or the race
// detector.
func TestServeNeverEvictsReferenced(t *testing.T) {
	skipUnderRace(t)
	w, err := Synthetic("tenants", 2, 300)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range Granularities() {
		for _, s := range kvevict.Strategies() {
			if reduced() && !slices.Contains(shortStrategies, s) {
				continue
			}
			var inner Evictor
			if g == GranularityBlock {
				if s.Adaptive() {
					continue // no key
				}
				var err error
				if inner, err = NewBlockEvictor(s, 200); err != nil {
					t.Fatal(err)
				}
			} else {
				p, err := kvevict.New(s)
				if err != nil {
					t.Fatal(err)
				}
				inner = NewSequenceEvictor(p)
				if g == GranularityTail {
					inner = NewTailEvictor(p)
				}
			}
			ev := &watchingEvictor{Evictor: inner, exact: g != GranularitySequence, t: t}
			cfg := ServeConfig{Config: Config{Capacity: 200}, Evictor: ev, afterStep: func(p *pool) { checkPool(t, p) }}
			if _, err := Serve(w, s, cfg); err != nil {
				t.Fatal(err)
			}
			if ev.calls == 0 {
				t.Errorf("%s/%s: never evicted", g, s)
			}
		}
	}
}

func TestServeErrors(t *testing.T) {
	w, _ := Synthetic("chat", 1, 10)
	if _, err := Serve(w, kvevict.LRU, ServeConfig{Config: Config{Capacity: 10}, TokenTime: -1}); err == nil {
		t.Error("negative token time: no error")
	}
	if _, err := Serve(w, "nope", ServeConfig{Config: Config{Capacity: 10}}); !errors.Is(err, kvevict.ErrUnknownStrategy) {
		t.Errorf("unknown strategy: err = %v", err)
	}
}

// TestServeRePrefillAfterAGap: a prompt whose first block was evicted
// re-prefills every block after it that the pool had computed, resident
// or not, up to the first it never had. Pool of 4 blocks of 10 tokens,
// sequence granularity, LRU. R0 caches block 1; R1 reuses block 2 alone
// and caches it; R2 (three new blocks) evicts the oldest owner, R0: block
// 1. R3 = [1 2 7] hits nothing, and computes 1 (evicted: 10 tokens) and 2
// (resident, but after the gap: 10) again, 7 for the first time; making
// room it evicts R2's three blocks. R3's reference to block 1 is the one
// re-prefilled block of the four evicted.
func TestServeRePrefillAfterAGap(t *testing.T) {
	w := &Workload{Name: "gap", BlockTokens: 10, GroupKind: "tenant", Requests: []Request{
		{Timestamp: 0, InputTokens: 20, HashIDs: []uint64{1, 2}},
		{Timestamp: 1, InputTokens: 10, HashIDs: []uint64{2}},
		{Timestamp: 2, InputTokens: 30, HashIDs: []uint64{5, 6, 8}},
		{Timestamp: 3, InputTokens: 30, HashIDs: []uint64{1, 2, 7}},
	}}
	rep, err := Serve(w, kvevict.LRU, ServeConfig{Config: Config{Capacity: 4}, Granularity: GranularitySequence,
		afterStep: func(p *pool) { checkPool(t, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if rep.RePrefillTokens != 20 || rep.EvictedBlocks != 4 || rep.RePrefilledBlocks != 1 || rep.BlockHits != 1 {
		t.Errorf("re-prefill tokens %d, evicted blocks %d, re-prefilled blocks %d, hits %d; want 20, 4, 1, 1",
			rep.RePrefillTokens, rep.EvictedBlocks, rep.RePrefilledBlocks, rep.BlockHits)
	}
}
