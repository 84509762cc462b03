package sim

import (
	"time"

	"github.com/sagellm/kvevict"
)

// An Evictor frees cached blocks when the pool of [Serve] needs them. It is
// the eviction granularity: it decides what one candidate is (a sequence's
// cached blocks, a prefix tree's leaf) and asks a kvevict.Policy to choose
// among them. The pool calls Evict when an allocation does not fit the free
// blocks, and Access when a request reuses, or has to recompute, blocks
// that a sequence released; it never calls them concurrently.
type Evictor interface {
	// Evict returns at least need distinct blocks among s.Cached to free,
	// or an error matching kvevict.ErrInsufficientBlocks (and nothing) if
	// the cached blocks cannot cover need. The pool rejects any other
	// block, so a referenced block can never be freed.
	Evict(s *EvictionState, need int) (Eviction, error)
	// Access records that a request reused or recomputed blocks last
	// released by sequence owner.
	Access(owner uint64)
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
}

// CachedBlock is an evictable block: a prompt block with a content hash that
// no running sequence references. Its owner is the sequence that released
// it last; the owner's fields are repeated on each of its blocks.
type CachedBlock struct {
	Block int    // physical block id, in [0, Capacity)
	Hash  uint64 // content hash
	Owner uint64 // sequence that released it last
	Pos   int    // index in the owner's prompt

	OwnerAdmitted  int64            // tick the owner was admitted
	OwnerReleased  int64            // tick the owner finished or was preempted
	OwnerHits      int              // prompt blocks the owner found cached
	Priority       kvevict.Priority // the owner's request priority
	SeqLen, MaxLen int              // the owner's tokens at release, and its maximum
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

// SequenceEvictor is the sequence granularity: one candidate per sequence
// that released cached blocks, holding those blocks head first and allowing
// partial eviction, so the policy trims a sequence's tail before its head
// (a tail without its head is useless to prefix matching). Running
// sequences are passed as referenced candidates, which the policy skips, as
// a server's allocator would.
type SequenceEvictor struct {
	policy kvevict.Policy
	cands  []kvevict.Candidate
	blocks []int // backing store of the cached candidates' Blocks
}

// NewSequenceEvictor returns the sequence-granularity [Evictor] over p.
func NewSequenceEvictor(p kvevict.Policy) *SequenceEvictor {
	return &SequenceEvictor{policy: p}
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
			AccessCount:  b.OwnerHits,
			Priority:     b.Priority,
			SeqLen:       b.SeqLen,
			MaxLen:       b.MaxLen,
			AllowPartial: true,
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
