// Package lists holds the histories of the adaptive strategies whose lists
// order the victims, ARC, S3-FIFO and SIEVE, and the [Table] of nodes
// they keep their lists in, which Auto's history (in the root package)
// keeps too. A history knows ids and node numbers only: the root package
// ties its nodes to the candidates of a Policy's selection or an Index.
package lists

import "github.com/sagellm/kvevict/internal/rank"

// History is the state an adaptive strategy keeps of the ids it has seen,
// in a [Table]: ARC's, S3-FIFO's and SIEVE's lists ([ListHistory]), and
// Auto's request counts. The caller serialises the calls.
type History interface {
	// Nodes returns the table of ids the history tracks.
	Nodes() *Table
	// Access records a request for id: the paper's access. O(1).
	Access(id uint64)
	// Admit adds id, which the history does not hold as resident, as new.
	// The cache may exceed its capacity until Finish.
	Admit(id uint64)
	// Finish ends a selection, refused or not: it commits any pending
	// request and restores the capacity bounds.
	Finish()
	// Forget drops id, resident or a ghost, and keeps no ghost of it: the
	// caller released its sequence, which will not be requested again.
	// Called outside a selection. O(1).
	Forget(id uint64)
	// Check reports a broken invariant, for tests.
	Check() error
}

// ListHistory is the history of a strategy whose lists order the victims
// (ARC, S3-FIFO, SIEVE), rather than a key. A selection admits and marks
// its candidates in the table, then asks Victim for one victim at a time
// until they cover the need. Once their blocks are known to be distinct it
// evicts those taken wholly (Evict), in order; one that kept a head of its
// blocks stays resident.
type ListHistory interface {
	History
	// PendingID returns the id of a request not yet placed in the cache: a
	// miss waiting for the eviction that makes room for it.
	PendingID() (uint64, bool)
	// Commit places the pending request in the cache, evicting from the
	// history (not from the pool) if the cache is full.
	Commit()
	// Victim returns the node of the next victim among the marked nodes, by
	// the strategy's rule, or -1 if no node is marked. The victims chosen
	// before are unmarked but still in their lists: a rule that reads a
	// list's length reads the table's live.
	Victim() int32
	// Evict removes victim node n from the cache: to a ghost list or away.
	// A selection evicts its victims after choosing them all, in the order
	// chosen.
	Evict(n int32)
}

// New returns the history of strategy k, one whose lists order the
// victims: ARC, S3-FIFO or SIEVE, sized by cfg's Capacity and GhostCap.
func New(k rank.Kind, cfg *rank.Config) ListHistory {
	switch k {
	case rank.KindARC:
		return newARC(cfg)
	case rank.KindS3FIFO:
		return newS3FIFO(cfg)
	default:
		return newSIEVE(cfg)
	}
}
