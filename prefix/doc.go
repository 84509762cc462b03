// Package prefix keeps a KV cache's blocks in a prefix tree and evicts them
// block by block, deepest first, as prefix caches (SGLang's radix cache,
// vLLM's prefix caching) do.
//
// # Model
//
// A request's prompt is a path of block hashes, head first. The [Tree] has
// one node per block: a node's children are the blocks that followed it in
// some request, keyed by their hash. Two requests that share a leading run of
// hashes share those nodes, and a block can only be reused when every block
// before it is resident, so a node never outlives its parent.
//
// A pool allocator (or a simulator of one) drives a tree like this:
//
//   - [Tree.Match] a new request's hashes: the matched prefix is a cache hit
//     and each of its blocks records the access.
//   - [Tree.Lock] the matched path while the request runs: every block from
//     the root to the path's end gains a reference and cannot be evicted.
//   - [Tree.Evict] as many blocks as the request's new blocks need, then
//     [Tree.Insert] its hashes.
//   - [Tree.Unlock] the path when the request finishes (and lock the longer
//     path if its new blocks must stay resident while it runs).
//
// [Tree.MatchLocked] and [Tree.InsertLocked] match or insert and lock in one
// step, so that with several goroutines no Evict frees the blocks in between.
// [Tree.Admit] serves a whole request this way on a pool of the capacity
// given to [New], the one size of a tree.
//
// Evict frees only unreferenced leaves, smallest key first; a parent that
// becomes an unreferenced leaf joins the candidates at once. So an idle
// conversation loses its deepest blocks first and keeps the recent prefix the
// next turn will match, and a block shared by a running request is never
// freed. Evictable and protected counts ([Tree.EvictableBlocks], [Tree.Protected])
// change only when a block's reference count crosses zero, so they are O(1).
//
// A request may carry hints ([Access].Hints, [kvevict.Hints]): a block's
// hints are the latest request's through it. Evict takes the leaves in the
// order of the hints' classes, the same as kvevict's Policy and Index:
// released leaves first, then by retention priority (the key's order for
// the default priority), then soft-leased leaves, the lease ending first
// first. A live hard lease protects the request's path as a lock does, and
// lets go of it when the tree's clock (the latest Access.Tick) passes its
// end, in O(log n) once.
//
// # Keys
//
// Keys come from the core strategies (see [New]), so LRU,
// MRU, FIFO, FILO, LFU, SLRU, QoSAware, Predictive and FrequencyCost mean here
// what they mean for [kvevict.Policy]. A node is ranked as a
// [kvevict.Candidate] of one block with
//
//   - ID: the node's creation order (ties break by it: older first);
//   - LastAccess: the Tick of the latest Insert or Match through it;
//   - CreatedAt: the Tick of the Insert that created it;
//   - AccessCount: the Matches through it;
//   - Priority: the highest Priority of the Inserts through it.
//
// Predictive sees no lifetimes or lengths and so orders as LRU; FrequencyCost
// sees one block per node and so orders by AccessCount, then LastAccess.
//
// [kvevict.Auto] ranks by history rather than by a key, and the tree keeps
// that history per block: a block's requests are the Matches through it
// plus the Insert that created it, and the requests of an evicted block
// are remembered by hash (at most [kvevict.WithGhostCap] hashes, the
// least recently evicted forgotten first) and restored when the hash is
// inserted again. The tree measures what Auto's Policy measures, over
// blocks instead of sequences, by the same code: blocks evicted as its
// clock, and every request for a block (Match, Insert)
// fed by the block's hash and count to Auto's miniature caches, which
// choose the weight by simulating a pool of the tree's capacity (given to
// [New], in blocks).
// It ranks a leaf by Auto's score, LastAccess + W x log2(requests),
// computed by the same function. The caches' choice of weight may change
// from one eviction to the next, and a leaf keyed under an earlier choice
// would keep that choice's key, so the tree keeps its leaves in one heap
// per weight the caches simulate, each keyed by that weight's W when the
// leaf is touched (Insert, Match, Unlock, or when it becomes a leaf), and
// evicts from the heap of the weight chosen at that moment: no key is ever
// left from another choice, and nothing is re-keyed. W's length in ticks,
// the pool's turnover, is measured over the whole run and moves slowly.
// Auto's partial-block rule does not
// apply: an [Access] does not say which blocks are partial. The other
// adaptive strategies (ARC, S3-FIFO, SIEVE) keep lists of sequences, which
// a tree of blocks does not, and [New] refuses them: [Ranks] says which
// strategies a tree ranks by.
//
// The unreferenced leaves sit in an indexed heap that every operation updates
// in O(log n): Evict of k blocks costs O(k log n), and keys that decrease
// (MRU, FILO) are as correct as keys that grow. Auto keeps a heap per
// simulated weight (five), so each heap operation counts five times; it
// adds O(1) per block of a Match, an Insert and an eviction, and O(log s)
// per block in the sample of its miniature caches of s hashes. Only keys that depend on the
// current tick (FrequencyCost with decay) force a re-key, once per Evict after
// the clock moved.
//
// # Events
//
// [WithEvents] reports every stored and removed block, after the tree's lock
// is released and in the order of the changes, so an external index such as a
// KV-aware router's can mirror the tree.
package prefix
