package sim

import (
	"time"

	"github.com/sagellm/kvevict"
)

// An Evictor frees cached blocks when the pool of [Serve] needs them. It is
// the eviction granularity: it decides what one candidate is (a sequence's
// cached blocks, a prefix tree's leaf) and asks a strategy to choose among
// them. The pool calls Admit when it admits a sequence (before allocating
// the sequence's missing blocks), Release when the sequence finishes or is
// preempted, Evict when an allocation does not fit the free blocks, and
// Access when a request reuses, or has to recompute, blocks that a sequence
// released. It never calls them concurrently.
type Evictor interface {
	// Evict returns at least need distinct blocks among s.Cached to free,
	// or an error matching kvevict.ErrInsufficientBlocks (and nothing) if
	// the cached blocks cannot cover need. The pool rejects any other
	// block, so a referenced block can never be freed.
	Evict(s *EvictionState, need int) (Eviction, error)
	// Access records that a request reused or recomputed blocks last
	// released by sequence owner.
	Access(owner uint64)
	// Admit records that sequence seq was admitted at tick now, with
	// priority prio and the prompt blocks of hashes (distinct, head first;
	// the slice is the pool's and is only valid during the call). The
	// pool references those blocks from this call until Release(seq),
	// and allocates the ones it lacks after it, so an Evict in between
	// must not choose them (the pool would refuse them anyway).
	Admit(seq uint64, hashes []uint64, now int64, prio kvevict.Priority)
	// Release records that sequence seq, admitted earlier, finished or was
	// preempted at tick now and no longer references its blocks.
	Release(seq uint64, now int64)
}

// Eviction is what an [Evictor] chose.
type Eviction struct {
	Blocks  []int         // physical blocks to free, each in EvictionState.Cached
	Elapsed time.Duration // time the choice took
}

// EvictionState is the pool as an [Evictor] sees it. Times are pool ticks
// (microseconds of simulated time).
type EvictionState struct {
	Now int64
	// Cached are the blocks no running sequence references, grouped by
	// Owner and, within an owner, head first (by Pos).
	Cached []CachedBlock
	// Running are the sequences that hold references: never evictable.
	Running []RunningSequence

	// lookup, if set, is the pool's index of cached blocks by hash, and
	// cachedLen its count of cached blocks.
	lookup    func(hash uint64) (block int, ok bool)
	cachedLen int
}

// CachedLen returns how many blocks are cached: len(Cached), which the
// pool leaves empty for an evictor that keeps its own view of the pool.
func (s *EvictionState) CachedLen() int {
	if s.lookup != nil {
		return s.cachedLen
	}
	return len(s.Cached)
}

// A watcher is an [Evictor] that keeps its own view of the pool's
// candidates from the calls below, so that [Serve] need not list them at
// every eviction, an O(cached blocks) pass: its Evict reads only Now,
// CachedLen and Lookup.
type watcher interface {
	// running says that sequence s was admitted, or advanced (its tokens,
	// blocks and latest tick); prio is its request's priority.
	running(s *sequence, prio kvevict.Priority)
	// owner says what sequence id holds cached now, o (nil: nothing): it
	// finished or was preempted, leaving o, or a request reused one of
	// its cached blocks. Blocks the evictor chose are not reported: it
	// took them from its view itself.
	owner(id uint64, o *owner)
}

// Lookup returns the cached block that holds hash, if there is one. O(1) on
// the state [Serve] passes; O(len(Cached)) on a state built by hand.
func (s *EvictionState) Lookup(hash uint64) (block int, ok bool) {
	if s.lookup != nil {
		return s.lookup(hash)
	}
	for i := range s.Cached {
		if s.Cached[i].Hash == hash {
			return s.Cached[i].Block, true
		}
	}
	return -1, false
}

// CachedBlock is an evictable block: a prompt block with a content hash that
// no running sequence references. Its owner is the sequence that released
// it last; the owner's fields are repeated on each of its blocks.
type CachedBlock struct {
	Block int    // physical block id, in [0, Capacity)
	Hash  uint64 // content hash
	Owner uint64 // sequence that released it last
	Pos   int    // index in the owner's prompt

	OwnerAdmitted int64 // tick the owner was admitted
	OwnerReleased int64 // tick the owner finished or was preempted
	// OwnerAccessCount is the owner's hits, its candidate's AccessCount:
	// how many requests found blocks it holds cached since it released
	// them, one per request however many blocks each reused.
	OwnerAccessCount int
	Priority         kvevict.Priority // the owner's request priority
	SeqLen, MaxLen   int              // the owner's tokens at release, and its maximum
}

// RunningSequence is a sequence that holds references to Blocks.
type RunningSequence struct {
	ID             uint64
	Blocks         []int // head first; shared with the pool, read only
	Admitted       int64
	LastAccess     int64
	Priority       kvevict.Priority
	SeqLen, MaxLen int
}

// SequenceEvictor evicts at sequence granularity: one candidate per
// sequence that released cached blocks, holding those blocks head first.
// Made by [NewSequenceEvictor], a victim loses all its cached blocks
// ([GranularitySequence]); made by [NewTailEvictor], the candidates allow
// partial eviction, so the last victim loses only the tail the need
// requires and keeps its head, which prefix matching can still use
// ([GranularityTail]). Running sequences are passed as referenced
// candidates, which the policy skips, as a server's allocator would.
type SequenceEvictor struct {
	policy  kvevict.Policy
	partial bool // set AllowPartial on the candidates
	cands   []kvevict.Candidate
	blocks  []int // backing store of the cached candidates' Blocks
}

// NewSequenceEvictor returns the [Evictor] of [GranularitySequence] over p:
// every victim sequence loses all its cached blocks.
func NewSequenceEvictor(p kvevict.Policy) *SequenceEvictor {
	return &SequenceEvictor{policy: p}
}

// NewTailEvictor returns the [Evictor] of [GranularityTail] over p: victim
// sequences in p's order, the last one trimmed to the need from its tail.
func NewTailEvictor(p kvevict.Policy) *SequenceEvictor {
	return &SequenceEvictor{policy: p, partial: true}
}

// Evict builds the candidates and calls the policy once. O(C + R) to build
// for C cached blocks and R running sequences, plus the selection.
func (e *SequenceEvictor) Evict(s *EvictionState, need int) (Eviction, error) {
	e.cands = e.cands[:0]
	if cap(e.blocks) < len(s.Cached) {
		e.blocks = make([]int, 0, len(s.Cached))
	}
	e.blocks = e.blocks[:0]
	for i := 0; i < len(s.Cached); {
		b := &s.Cached[i]
		j := i
		start := len(e.blocks)
		for ; j < len(s.Cached) && s.Cached[j].Owner == b.Owner; j++ {
			e.blocks = append(e.blocks, s.Cached[j].Block)
		}
		blocks := e.blocks[start:len(e.blocks):len(e.blocks)]
		e.cands = append(e.cands, kvevict.Candidate{
			ID:           b.Owner,
			Blocks:       blocks,
			LastAccess:   b.OwnerReleased,
			CreatedAt:    b.OwnerAdmitted,
			AccessCount:  b.OwnerAccessCount,
			Priority:     b.Priority,
			SeqLen:       b.SeqLen,
			MaxLen:       b.MaxLen,
			AllowPartial: e.partial,
		})
		i = j
	}
	for i := range s.Running {
		r := &s.Running[i]
		e.cands = append(e.cands, kvevict.Candidate{
			ID:         r.ID,
			Blocks:     r.Blocks,
			LastAccess: r.LastAccess,
			CreatedAt:  r.Admitted,
			Priority:   r.Priority,
			SeqLen:     r.SeqLen,
			MaxLen:     r.MaxLen,
			RefCount:   1,
		})
	}
	res, err := e.policy.SelectVictims(e.cands, need)
	if err != nil {
		return Eviction{}, err
	}
	out := Eviction{Elapsed: res.Elapsed, Blocks: make([]int, 0, res.FreedBlocks)}
	for _, v := range res.Victims {
		out.Blocks = append(out.Blocks, v.Blocks...)
	}
	return out, nil
}

// Access forwards to Policy.UpdateAccess.
func (e *SequenceEvictor) Access(owner uint64) { e.policy.UpdateAccess(owner) }

// Admit does nothing: the candidates are built from the state at each Evict.
func (e *SequenceEvictor) Admit(uint64, []uint64, int64, kvevict.Priority) {}

// Release does nothing, as Admit.
func (e *SequenceEvictor) Release(uint64, int64) {}
