package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/prefix"
)

// BlockEvictor is the block granularity ([GranularityBlock]): it mirrors the
// pool's prompt blocks in a [prefix.Tree] keyed by block hash and evicts
// unreferenced leaves, smallest key of its strategy first, so an idle
// conversation loses its deepest blocks first and keeps the prefix its next
// turn will match.
//
// Admit matches the prompt (recording a hit on every block of its resident
// prefix) and inserts it locked; Release unlocks it. So the tree's locked
// blocks are exactly the prompt blocks running sequences reference, and
// Evict asks the tree for as many leaves as the pool needs and maps their
// hashes to the pool's blocks with [EvictionState.Lookup]. The tree ranks
// blocks by their own accesses, so it needs neither the sequences an
// admission accesses nor the running sequences.
//
// The pool holds one block per hash. When a workload's hashes do not
// determine their prefix (the same hash after different heads, as in no
// real trace), a hash has a node on each path it came after; evicting one
// frees its block only if the block is cached, and the tree's other nodes
// for it are dropped when their turn comes, freeing nothing. Evict keeps
// asking the tree until it has need blocks, so it frees exactly what is
// asked whenever the pool has that many cached blocks.
type BlockEvictor struct {
	tree    *prefix.Tree
	prompts map[uint64][]uint64 // running sequence -> the path it locked
	taken   map[int]struct{}    // scratch: the blocks one Evict chose
}

// NewBlockEvictor returns a block-granularity [Evictor] that ranks blocks
// by strategy s configured by opts: a key strategy (a node of the tree is
// ranked as a one-block candidate) or Auto (the tree keeps its history;
// see package prefix), for a pool of capacity blocks, the tree's capacity,
// which Auto's miniature caches simulate. It returns prefix.New's errors:
// one matching kvevict.ErrInvalidArgument for a capacity below 1, one
// matching errors.ErrUnsupported for ARC, S3-FIFO and SIEVE.
func NewBlockEvictor(s kvevict.Strategy, capacity int, opts ...kvevict.Option) (*BlockEvictor, error) {
	t, err := prefix.New(s, capacity, prefix.WithStrategyOptions(opts...))
	if err != nil {
		return nil, err
	}
	return &BlockEvictor{tree: t, prompts: make(map[uint64][]uint64), taken: make(map[int]struct{})}, nil
}

// Admit records a hit on the resident prefix of a.Hashes and inserts the
// rest, locking the whole path until the sequence's Release. O(len(a.Hashes)
// + log n) for n blocks in the tree.
func (e *BlockEvictor) Admit(a *Admission) {
	if len(a.Hashes) == 0 {
		return // nothing to mirror; errors below are only for empty paths
	}
	at := prefix.Access{Tick: a.Now, Priority: a.Priority, Hints: a.Hints}
	_, _ = e.tree.Match(a.Hashes, at)
	_, _ = e.tree.InsertLocked(a.Hashes, at)
	e.prompts[a.Seq] = slices.Clone(a.Hashes)
}

// Release unlocks the path Admit locked for s.ID: its cached blocks become
// the tree's unlocked nodes. A sequence admitted with an empty prompt
// locked nothing. O(len(path) + log n).
func (e *BlockEvictor) Release(s *CachedSequence) {
	path, ok := e.prompts[s.ID]
	if !ok {
		return
	}
	delete(e.prompts, s.ID)
	_ = e.tree.Unlock(path) // Admit locked exactly this path
}

// Evict frees exactly need cached blocks, leaves first, or returns an
// error matching kvevict.ErrInsufficientBlocks and frees nothing if the
// pool has fewer than need cached blocks. O(k log n) for the k leaves it
// takes from the tree (k == need unless hashes repeat across paths).
func (e *BlockEvictor) Evict(s *EvictionState, need int) (Eviction, error) {
	if need < 0 {
		return Eviction{}, fmt.Errorf("%w: evict %d blocks", kvevict.ErrInvalidArgument, need)
	}
	if need > s.CachedLen() || need > e.tree.EvictableBlocks() { // hard leases protect some
		return Eviction{}, &kvevict.InsufficientBlocksError{Required: need, Available: min(s.CachedLen(), e.tree.EvictableBlocks())}
	}
	start := time.Now()
	clear(e.taken)
	out := Eviction{Blocks: make([]int, 0, need)}
	for len(out.Blocks) < need {
		k := min(need-len(out.Blocks), e.tree.EvictableBlocks())
		if k == 0 {
			// Every cached block has an unlocked node, so this means the
			// pool and the tree disagree: a bug, reported rather than hidden.
			return Eviction{}, fmt.Errorf("block evictor: %d cached blocks but no evictable block in the tree", s.CachedLen())
		}
		hashes, err := e.tree.Evict(k)
		if err != nil {
			return Eviction{}, err
		}
		for _, h := range hashes {
			b, ok := s.Lookup(h)
			if _, dup := e.taken[b]; !ok || dup {
				continue // a node whose hash the pool holds elsewhere, or no longer
			}
			e.taken[b] = struct{}{}
			out.Blocks = append(out.Blocks, b)
		}
	}
	out.Elapsed = time.Since(start)
	return out, nil
}
