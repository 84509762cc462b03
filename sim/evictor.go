package sim

import (
	"time"

	"github.com/sagellm/kvevict"
)

// An Evictor frees cached blocks when the pool of [Serve] needs them. It is
// the eviction granularity: it decides what one candidate is (a sequence's
// cached blocks, a prefix tree's leaf), keeps its own view of the
// candidates, and asks a strategy to choose among them.
//
// The pool tells it every change of what is cached, in the order the
// changes happen, and never calls it concurrently:
//
//   - Admit when it admits a request as a new sequence: the request has
//     taken the cached blocks its prompt reuses from the sequences that
//     held them, and the pool allocates the blocks it lacks next, so an
//     Evict may follow that must not choose the prompt's blocks (the pool
//     would refuse them anyway);
//   - Release when a sequence finishes or is preempted: the prompt blocks
//     no other running sequence references become cached, held by it;
//   - Evict when an allocation does not fit the free blocks. The blocks it
//     returns leave the pool, and the pool does not report them back: the
//     evictor chose them and takes them from its view itself.
//
// Nothing else changes what is cached. A running sequence changes at every
// block it fills, but holds references, so it is never a victim: an evictor
// whose strategy ranks running sequences too reads them from
// [EvictionState.Running] at each eviction.
type Evictor interface {
	// Admit records the admission a. Its slices are the pool's, valid
	// only during the call.
	Admit(a *Admission)
	// Release records that sequence s.ID, admitted earlier, finished or
	// was preempted at tick s.Released, leaving s.Blocks cached. Its
	// slices are the pool's, valid only during the call.
	Release(s *CachedSequence)
	// Evict returns at least need distinct cached blocks to free, or an
	// error matching kvevict.ErrInsufficientBlocks (and nothing) if the
	// cached blocks cannot cover need. The pool rejects any other block,
	// so a referenced block can never be freed.
	Evict(s *EvictionState, need int) (Eviction, error)
}

// Admission is a request that the pool of [Serve] admits as a sequence, as
// [Evictor.Admit] sees it. Times are pool ticks (microseconds of simulated
// time).
type Admission struct {
	Seq      uint64           // the new sequence; a Release with this ID ends it
	Now      int64            // the tick of the admission
	Priority kvevict.Priority // the request's priority
	// Hints are the request's hints (RequestHints) on the pool's clock.
	Hints kvevict.Hints
	// Hashes is the prompt: its distinct block hashes, head first. The
	// sequence references the blocks present from now until its release,
	// and the pool allocates the others after the call.
	Hashes []uint64
	// Accessed are the sequences the request accesses, each once, in the
	// order of the prompt: those whose cached blocks it reuses, and those
	// whose evicted blocks it computes again (a re-prefill). At sequence
	// granularity they are the ids kvevict's protocol reports by
	// UpdateAccess, before the eviction that makes room for the request.
	Accessed []uint64
	// Reused are the sequences whose cached blocks the request took, each
	// once, as they are after it: the blocks they still hold, and their
	// hits counting this request. One left with no block has only its ID:
	// the pool forgets it.
	Reused []CachedSequence
}

// CachedSequence is a sequence that finished or was preempted, with the
// prompt blocks it released that no running sequence references: the
// fields of its candidate at sequence granularity. Times are pool ticks.
type CachedSequence struct {
	ID uint64
	// Blocks are its cached blocks, head first; none when every block it
	// released is referenced again, or was evicted.
	Blocks   []int
	Admitted int64 // tick it was admitted
	Released int64 // tick it finished or was preempted
	// HeadHash is the hash of Blocks[0], when it holds blocks: what a
	// request that reuses its head reads, whichever sequence holds it.
	HeadHash uint64
	// AccessCount is its hits, its candidate's AccessCount: how many
	// requests found blocks it holds cached since it released them, one
	// per request however many blocks each reused.
	AccessCount    int
	Priority       kvevict.Priority // its request's priority
	SeqLen, MaxLen int              // its tokens at release, and its maximum
	// Hints are its request's hints as of now (RequestHints), on the
	// pool's clock: a lease renewed by a later request that reused its
	// blocks runs from that request's arrival.
	Hints kvevict.Hints
}

// RunningSequence is a sequence that holds references to Blocks.
type RunningSequence struct {
	ID             uint64
	Blocks         []int // head first; shared with the pool, read only
	Admitted       int64
	LastAccess     int64 // tick of its latest token
	Priority       kvevict.Priority
	SeqLen, MaxLen int
}

// Eviction is what an [Evictor] chose.
type Eviction struct {
	Blocks  []int         // cached blocks to free
	Elapsed time.Duration // time the choice took
}

// EvictionState is the pool as an [Evictor] reads it at an eviction, made
// by [Serve] and valid during the call. Times are pool ticks (microseconds
// of simulated time).
type EvictionState struct {
	Now int64
	// Running are the sequences that hold references, in admission order:
	// never evictable. When the workload carries hints the last is the
	// pool's clock: the sequence [ClockID], holding no block, last
	// accessed Now, which tells a Policy or an Index the time its leases
	// run on (their now is the latest LastAccess they are told).
	Running []RunningSequence

	// lookup is the pool's index of cached blocks by hash, and cachedLen
	// its count of cached blocks.
	lookup    func(hash uint64) (block int, ok bool)
	cachedLen int
}

// CachedLen returns how many blocks are cached. O(1).
func (s *EvictionState) CachedLen() int { return s.cachedLen }

// Lookup returns the cached block that holds hash, if there is one. O(1).
func (s *EvictionState) Lookup(hash uint64) (block int, ok bool) {
	if s.lookup == nil {
		return -1, false
	}
	return s.lookup(hash)
}
