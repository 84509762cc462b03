package kvevict

import (
	"fmt"
	"time"
)

// Priority is a sequence's quality-of-service class. The QoSAware strategy
// evicts lower priorities first; other strategies ignore it.
type Priority int8

// The priority classes, lowest first.
const (
	PriorityLow    Priority = 0
	PriorityNormal Priority = 1
	PriorityHigh   Priority = 2
)

// String returns "low", "normal", "high", or "priority(N)" for other values.
func (p Priority) String() string {
	switch p {
	case PriorityLow:
		return "low"
	case PriorityNormal:
		return "normal"
	case PriorityHigh:
		return "high"
	}
	return fmt.Sprintf("priority(%d)", int8(p))
}

// Candidate is a sequence that holds KV blocks and might be evicted. The
// allocator builds one per sequence for each call to [Policy.SelectVictims];
// the policy reads candidates and never modifies or keeps them.
//
// Times are ticks: any monotonically increasing int64 clock the caller keeps,
// nanoseconds by default (see [WithTickDuration]). The policy never reads a
// clock of its own to decide anything: time comes in on the candidates.
//
// AllowPartial enables tail trimming: the allocator can free the deepest
// blocks of the sequence and keep its head, the prefix a returning request
// will match. When the greedy selection reaches such a candidate and needs
// fewer blocks than it holds, it takes only the last blocks it still needs,
// so FreedBlocks == requiredBlocks; the [Victim] then carries just that tail.
type Candidate struct {
	ID           uint64   // sequence id, unique within one call
	Blocks       []int    // KV block ids it holds, head (prefix) first; distinct across candidates (see Policy.SelectVictims, Index.Add)
	LastAccess   int64    // tick of the latest access
	CreatedAt    int64    // tick at which it entered the cache (FIFO, FILO)
	AccessCount  int      // hits so far; must not be negative
	Priority     Priority // QoS class (QoSAware)
	Pinned       bool     // never evicted
	AllowPartial bool     // the tail of Blocks may be freed without the head
	// LastBlockPartial says the last of Blocks is not full: the tokens
	// ended inside it. Its KV can be reused only by a request that repeats
	// the same tokens and stops at the same place; a longer prompt (the
	// next turn of a conversation) fills the block differently. [Auto]
	// evicts a one-block candidate whose block is partial first. The zero
	// value means full or unknown.
	LastBlockPartial bool // beside the other small fields, in their padding
	// apart is set by an Index on a candidate its hints set apart from
	// the strategy's order (rank.ClassApart and rank.ClassHeld), which the
	// order then holds but does not rank; a caller's candidates never set
	// it. It sits beside the small fields, in their padding.
	apart bool
	// leaseHit is set by an Index when a request (Touch) comes under the
	// candidate's live lease, which counts the lease honoured, and cleared
	// when a new lease starts: a lease that ends without it was wasted
	// (Metrics.LeasesWasted).
	leaseHit          bool
	RefCount          int           // > 0: in use by a running request, never evicted; < 0 is invalid
	EstimatedLifetime time.Duration // predicted remaining lifetime as of LastAccess; 0 = unknown
	SeqLen, MaxLen    int           // current and maximum length in tokens (Predictive)
	// HeadHash is the hash by which the pool's prefix cache knows the
	// content of Blocks[0]; 0 means unknown. A server's sequences are new
	// at every turn while their content recurs, so [Auto] counts the
	// requests for a candidate that sets it by the hash, as a prefix cache
	// counts a block, rather than by its ID: the pool reports a request's
	// blocks by [Policy.UpdateAccessHashes], every hash of its prompt. The
	// other strategies ignore it.
	HeadHash uint64
	// Hints is what the caller knows of the sequence's future: a lease, a
	// retention priority, a release. The zero value means none; see
	// [Hints] for the order every structure takes them in.
	Hints Hints
}

// historyID is the id by which [Auto]'s history counts c's requests: its
// HeadHash if set, else its ID.
func historyID(c *Candidate) uint64 { return headOr(c.HeadHash, c.ID) }

// headOr is the history id of a candidate with head hash head and ID id.
func headOr(head, id uint64) uint64 {
	if head != 0 {
		return head
	}
	return id
}

// evictable reports whether the selection may take c: it holds blocks and
// is neither pinned nor referenced.
func (c *Candidate) evictable() bool {
	return !c.Pinned && c.RefCount == 0 && len(c.Blocks) > 0
}

// ranked reports whether an Index's order ranks c: it is evictable and
// its hints do not set it apart.
func (c *Candidate) ranked() bool { return c.evictable() && !c.apart }

// Victim is one sequence chosen for eviction and the blocks to free from it.
type Victim struct {
	ID uint64
	// Blocks are the blocks to free: all of the candidate's Blocks, or a tail
	// of them when the candidate allowed partial eviction. The slice shares
	// its backing array with Candidate.Blocks; it is not a copy.
	Blocks []int
}

// Result is the outcome of one successful selection.
type Result struct {
	Victims     []Victim      // in eviction order: smallest key first
	FreedBlocks int           // sum of len(Victims[i].Blocks)
	Elapsed     time.Duration // time the selection took, for latency metrics
	Strategy    Strategy      // the strategy that chose
}
