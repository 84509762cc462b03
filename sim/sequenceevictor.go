package sim

import (
	"slices"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/internal/rank"
)

// SequenceEvictor evicts at sequence granularity: one candidate per
// sequence that released cached blocks, holding those blocks head first.
// Made by [NewSequenceEvictor], a victim loses all its cached blocks
// ([GranularitySequence]); made by [NewTailEvictor], the candidates allow
// partial eviction, so the last victim loses only the tail the need
// requires and keeps its head, which prefix matching can still use
// ([GranularityTail]). Running sequences are passed as referenced
// candidates, which the strategy skips, as a server's allocator would.
//
// It keeps the cached candidates from Admit and Release, and tells the
// strategy every sequence a request accesses and every block of its
// prompt, as kvevict's protocol asks: UpdateAccess for each sequence and
// UpdateAccessHashes for the prompt, before the selection that makes room
// for it. Each cached candidate carries the hash of its head block as its
// HeadHash, by which Auto counts its requests: the content a returning
// request reads, where the sequence is new at every turn.
type SequenceEvictor struct {
	partial bool // set AllowPartial on the cached candidates
	cands   candidates
	hashes  []uint64 // scratch: an admission's prompt, as contentHash
}

// candidates is where a [SequenceEvictor] keeps its candidates and the
// strategy that chooses among them: a Policy, handed every candidate at
// each eviction, or an Index, which keeps them ordered between evictions.
// Both pick the same victims from the same accesses and candidates.
type candidates interface {
	// access tells the strategy of a request for sequence id.
	access(id uint64)
	// accessHashes tells the strategy of a request for the blocks of
	// hashes.
	accessHashes(hashes []uint64)
	// put adds cached candidate c, or replaces the candidate of its ID.
	// c.Blocks is its own.
	put(c kvevict.Candidate)
	// remove forgets the candidate of id, if there is one.
	remove(id uint64)
	// evict takes need blocks from the cached candidates, the running
	// sequences passed as referenced candidates, and drops what it took.
	evict(running []RunningSequence, need int) (Eviction, error)
}

// NewSequenceEvictor returns the [Evictor] of [GranularitySequence] over p:
// every victim sequence loses all its cached blocks.
func NewSequenceEvictor(p kvevict.Policy) *SequenceEvictor {
	return &SequenceEvictor{cands: newPolicyCandidates(p)}
}

// NewTailEvictor returns the [Evictor] of [GranularityTail] over p: victim
// sequences in p's order, the last one trimmed to the need from its tail.
func NewTailEvictor(p kvevict.Policy) *SequenceEvictor {
	return &SequenceEvictor{cands: newPolicyCandidates(p), partial: true}
}

// newIndexEvictor returns the evictor of [GranularitySequence], or with
// partial of [GranularityTail], whose candidates x keeps, so that an
// eviction costs O(R + k log n) for R running sequences and k victims
// rather than a pass over the pool. It picks the victims of the evictor
// over a Policy of x's strategy and options.
func newIndexEvictor(x *kvevict.Index, partial bool) *SequenceEvictor {
	return &SequenceEvictor{cands: &indexCandidates{x: x}, partial: partial}
}

// Admit tells the strategy of the sequences a accesses, then updates the
// candidates of those it took blocks from. O(a + b) for a sequences and b
// blocks, plus the strategy's UpdateAccess, and O(log n) each on an Index.
func (e *SequenceEvictor) Admit(a *Admission) {
	for _, id := range a.Accessed {
		e.cands.access(id)
	}
	e.hashes = e.hashes[:0]
	for _, h := range a.Hashes {
		e.hashes = append(e.hashes, contentHash(h))
	}
	e.cands.accessHashes(e.hashes)
	for i := range a.Reused {
		e.cached(&a.Reused[i])
	}
}

// Release makes the candidate of s its cached blocks, or forgets it if it
// holds none. O(len(s.Blocks)), and O(log n) on an Index.
func (e *SequenceEvictor) Release(s *CachedSequence) { e.cached(s) }

// Evict asks the strategy for need blocks among the cached candidates, the
// running sequences of s passed as referenced candidates. O(C + R) for C
// cached and R running candidates on a Policy, plus the selection; O(R +
// k log n) for k victims on an Index.
func (e *SequenceEvictor) Evict(s *EvictionState, need int) (Eviction, error) {
	return e.cands.evict(s.Running, need)
}

// cached puts the candidate of cached sequence s, with its own copy of the
// blocks, or removes it if s holds none.
func (e *SequenceEvictor) cached(s *CachedSequence) {
	if len(s.Blocks) == 0 {
		e.cands.remove(s.ID)
		return
	}
	e.cands.put(kvevict.Candidate{
		ID: s.ID, Blocks: slices.Clone(s.Blocks), LastAccess: s.Released, CreatedAt: s.Admitted,
		AccessCount: s.AccessCount, Priority: s.Priority, SeqLen: s.SeqLen, MaxLen: s.MaxLen,
		AllowPartial: e.partial, HeadHash: contentHash(s.HeadHash), Hints: s.Hints,
	})
}

// contentHash is block hash h as the strategy counts it: mixed, so that
// the workload's small hashes do not meet the pool's sequence IDs, which
// Auto counts by the same table, and never 0, which a Candidate's HeadHash
// reads as unknown. The offset keeps hash 0 from mixing to 0.
func contentHash(h uint64) uint64 {
	return max(rank.Mix64(h+0x9e3779b97f4a7c15), 1)
}

// runningCandidate is running sequence r as a referenced candidate.
func runningCandidate(r *RunningSequence) kvevict.Candidate {
	return kvevict.Candidate{
		ID: r.ID, Blocks: r.Blocks, LastAccess: r.LastAccess, CreatedAt: r.Admitted,
		Priority: r.Priority, SeqLen: r.SeqLen, MaxLen: r.MaxLen, RefCount: 1,
	}
}

// eviction is res as an Eviction: its victims' blocks, in order, and its
// time.
func eviction(res kvevict.Result) Eviction {
	out := Eviction{Elapsed: res.Elapsed, Blocks: make([]int, 0, res.FreedBlocks)}
	for _, v := range res.Victims {
		out.Blocks = append(out.Blocks, v.Blocks...)
	}
	return out
}

// policyCandidates keeps the cached candidates by ID and hands them, in ID
// order, then the running ones in admission order, to a Policy at each
// eviction.
type policyCandidates struct {
	policy kvevict.Policy
	cached map[uint64]kvevict.Candidate
	ids    []uint64            // scratch: the cached IDs, sorted
	all    []kvevict.Candidate // scratch: the candidates of one eviction
	taken  map[int]bool        // scratch: a partial victim's blocks
}

func newPolicyCandidates(p kvevict.Policy) *policyCandidates {
	return &policyCandidates{policy: p, cached: make(map[uint64]kvevict.Candidate), taken: make(map[int]bool)}
}

func (c *policyCandidates) access(id uint64)           { c.policy.UpdateAccess(id) }
func (c *policyCandidates) accessHashes(h []uint64)    { c.policy.UpdateAccessHashes(h) }
func (c *policyCandidates) put(cand kvevict.Candidate) { c.cached[cand.ID] = cand }
func (c *policyCandidates) remove(id uint64)           { delete(c.cached, id) }

// evict builds the candidates and calls the policy once, then drops the
// victims' blocks from their candidates. O(C log C + R) to build, plus the
// selection.
func (c *policyCandidates) evict(running []RunningSequence, need int) (Eviction, error) {
	c.ids = c.ids[:0]
	for id := range c.cached {
		c.ids = append(c.ids, id)
	}
	slices.Sort(c.ids)
	c.all = c.all[:0]
	for _, id := range c.ids {
		c.all = append(c.all, c.cached[id])
	}
	for i := range running {
		c.all = append(c.all, runningCandidate(&running[i]))
	}
	res, err := c.policy.SelectVictims(c.all, need)
	clear(c.all) // drop the references to the blocks
	if err != nil {
		return Eviction{}, err
	}
	out := eviction(res) // before took, which edits the blocks the victims share
	for _, v := range res.Victims {
		c.took(v)
	}
	return out, nil
}

// took drops victim v's blocks from its cached candidate: the whole
// candidate, or the blocks a partial victim lost.
func (c *policyCandidates) took(v kvevict.Victim) {
	cand, ok := c.cached[v.ID]
	if !ok {
		return // not a cached candidate: the pool refuses its blocks
	}
	if len(v.Blocks) >= len(cand.Blocks) {
		delete(c.cached, v.ID)
		return
	}
	clear(c.taken)
	for _, b := range v.Blocks {
		c.taken[b] = true
	}
	cand.Blocks = slices.DeleteFunc(cand.Blocks, func(b int) bool { return c.taken[b] })
	c.cached[v.ID] = cand
}

// indexCandidates keeps every candidate in an Index: the cached ones as
// the pool reports them, the running ones brought up to date at each
// eviction.
type indexCandidates struct {
	x       *kvevict.Index
	victims []kvevict.Victim
}

func (c *indexCandidates) access(id uint64) { c.x.UpdateAccess(id) }

func (c *indexCandidates) accessHashes(h []uint64) { c.x.UpdateAccessHashes(h) }

func (c *indexCandidates) put(cand kvevict.Candidate) {
	if _, held := c.x.Get(cand.ID); held {
		must(c.x.Update(cand))
	} else {
		must(c.x.Add(cand))
	}
}

func (c *indexCandidates) remove(id uint64) { c.x.Remove(id) }

// evict brings the running candidates up to date, adding those admitted
// since the last eviction, and takes need blocks from the unreferenced
// ones. O(R + u log n + k log n) for R running sequences of which u
// changed, and k victims.
func (c *indexCandidates) evict(running []RunningSequence, need int) (Eviction, error) {
	for i := range running {
		r := &running[i]
		old, held := c.x.Get(r.ID)
		switch {
		case !held:
			must(c.x.Add(runningCandidate(r)))
		case old.LastAccess != r.LastAccess || old.SeqLen != r.SeqLen || len(old.Blocks) != len(r.Blocks):
			must(c.x.Update(runningCandidate(r)))
		}
	}
	res, err := c.x.EvictAppend(c.victims[:0], need)
	if err != nil {
		return Eviction{}, err
	}
	c.victims = res.Victims
	out := eviction(res)
	clear(c.victims) // drop the references to the blocks
	return out, nil
}

// must panics on an error the pool's own bookkeeping rules out.
func must(err error) {
	if err != nil {
		panic("sim: the index evictor lost the pool: " + err.Error())
	}
}
