// Package kvevict chooses which sequences an LLM inference server evicts from
// its KV cache when the cache runs out of blocks, and measures how good the
// choices were.
//
// A KV pool allocator that needs blocks builds a [Candidate] for every
// sequence that holds blocks and calls [Policy.SelectVictims] with how many it
// needs. The policy skips pinned and referenced candidates, ranks the rest by
// its strategy's priority key, takes the smallest keys greedily until their
// blocks cover the need, and returns them as [Victim]s; the allocator frees
// their blocks. [Policy.Metrics] reports evictions, latency, re-prefill rate
// and Jain fairness.
//
// # The access protocol
//
// Call [Policy.UpdateAccess](id) for every request of a sequence, resident
// or not, before the SelectVictims that makes room for it. The adaptive
// strategies learn from these calls (the paper's access), and the metrics
// count a re-prefill when a sequence the policy evicted is requested again.
// Calling it only on reuse of a resident sequence hides every re-prefill and
// starves the adaptive strategies of the misses they adapt to.
//
// A server's sequences are new at every turn while their content recurs: a
// conversation's next turn is a new sequence that reuses the last one's
// blocks. For [Auto] to learn from what recurs, set each candidate's
// [Candidate.HeadHash] (the hash of its first block, as the prefix cache
// keys it) and call [Policy.UpdateAccessHashes] (or
// [Index.UpdateAccessHashes]) with every hash of a request's prompt,
// beside UpdateAccess: Auto then counts requests per
// block, as a prefix cache sees them, and ranks a candidate by its head
// block's count. Give it [WithCapacity] in blocks then, the pool's size,
// since the ids it counts are blocks. The other strategies ignore both.
//
// The [Index] follows the same protocol under its own verbs, because it
// holds the candidates itself: [Index.Touch] is UpdateAccess for a resident
// sequence (it also sets LastAccess), and [Index.Add] is the request of a
// sequence that is not resident (adding an ID the index evicted counts the
// re-prefill). Package prefix's tree does the same per block: Match records
// the request's hits and Insert its misses.
//
// # Words
//
// Each word below means one thing across the packages, the command's flags
// and columns, and the JSON it writes.
//
//   - tick: the unit of the caller's clock, in which [Candidate.LastAccess]
//     and CreatedAt (and a prefix tree's Access.Tick) are given: any
//     increasing int64. [WithTickDuration] says how long one is, a
//     nanosecond by default, so that durations convert. Each simulator says
//     which clock its ticks count (package sim's documentation).
//   - capacity: how many candidates a structure holds when full, given to
//     it once, in the unit of its candidates: sequences for [WithCapacity],
//     the cache size c of an adaptive strategy's paper (blocks for Auto
//     counting by [Candidate.HeadHash], whose ids are blocks); blocks for a prefix
//     tree (prefix.New's capacity) and for the simulator's and the
//     command's pools (-capacity).
//   - history: what an adaptive strategy remembers of the ids it has seen,
//     resident or ghost, bounded by [WithCapacity] and [WithGhostCap]:
//     ARC's, S3-FIFO's and SIEVE's lists, and Auto's request counts.
//   - eviction history: what the metrics remember of the last evictions, by
//     which they count re-prefills ([WithEvictionHistory]); it changes no
//     choice, and is never called history alone.
//   - measurements: what [Auto] measures to set its horizon: the rate at
//     which the pool evicts blocks, the miniature caches that choose its
//     weight (by the pool's hits, and those of the exclusive tier below it
//     given [WithTierBelow]), and how often victims whose block was
//     partial return.
//   - order: how an [Index] keeps its evictable candidates between
//     evictions: by key (a run and a heap), by an adaptive strategy's
//     lists, or by Auto's groups. Every order picks the victims a [Policy]
//     of the same strategy picks.
//   - access: a request for a sequence, resident or not ([Policy.UpdateAccess],
//     [Index.Touch] and [Index.Add]), or for a block by its hash
//     ([Policy.UpdateAccessHashes], a prefix tree's Match and Insert).
//   - hit: an access that finds what it asks for resident.
//     [Candidate.AccessCount] counts a sequence's hits.
//   - evictable: held, with blocks, neither pinned nor referenced: what a
//     selection may take. [Index.EvictableBlocks] and a tree's EvictableBlocks
//     count those blocks.
//   - lock: a running request's reference to a sequence's blocks, which
//     makes it not evictable until unlocked. [Candidate.RefCount] counts a
//     sequence's locks in a slice; [Index.Lock] and [Index.Unlock] take and
//     drop one in an Index, a prefix tree's Lock and Unlock on a path.
//   - re-prefill: an eviction followed by an access to the same sequence
//     while the eviction is remembered ([WithEvictionHistory]): prefill work
//     the server does again. [Metrics.RePrefills] counts them.
//   - ghost: an evicted candidate an adaptive strategy remembers, to know it
//     when it comes back ([WithGhostCap]).
//   - granularity: what one candidate is in the simulator: a cached
//     sequence, the tail of one, or a single block. A replay's candidates
//     are single blocks by construction; a serving pool at block
//     granularity keeps its blocks in a prefix tree, which frees leaves
//     only: the same unit, under one more constraint.
//
// # Choosing a strategy
//
//   - [LRU]: least recently used first. The default for chat, where a
//     returning conversation reuses its recent prefix.
//   - [MRU]: most recently used first, for cyclic scans larger than the cache.
//   - [FIFO], [FILO]: by the time a sequence entered the cache, oldest or
//     newest first, ignoring reuse.
//   - [LFU]: fewest accesses first, optionally with a decay half-life
//     ([WithLFUHalfLife]) so that once-hot sequences age out.
//   - [SLRU]: sequences seen fewer than two times go first, as in SGLang; a
//     scan of one-shot requests cannot push out reused prefixes.
//   - [QoSAware]: lowest [Priority] first, LRU within a priority.
//   - [Predictive]: the sequence whose KV will be useless soonest, from
//     EstimatedLifetime or how close it is to MaxLen.
//   - [FrequencyCost]: lowest AccessCount x len(Blocks)^alpha first, keeping
//     long, hot prefixes that are most expensive to re-prefill.
//   - [ARC], [S3FIFO], [SIEVE]: adaptive strategies that rank by history
//     (UpdateAccess) over a cache of [WithCapacity] sequences, as their
//     papers define them. ARC balances recency and frequency with ghost
//     lists; S3-FIFO filters one-hit sequences through a small FIFO; SIEVE
//     is one FIFO with a visited bit, cheapest of the three.
//   - [Auto]: recency plus a reuse horizon per doubling of an id's
//     requests, remembered across evictions, the horizon's weight chosen
//     online by miniature caches that simulate the access stream; the
//     strategy to try first when the traffic is unknown (docs/auto.md has
//     where it loses).
//
// # Guarantees
//
// Selections are deterministic (equal keys break by ID ascending), atomic (a
// selection that cannot be satisfied returns [ErrInsufficientBlocks] and
// evicts and counts nothing) and never modify the caller's candidates.
// Policies are safe for concurrent use, start no goroutines, read no clock
// to decide (time comes in on the candidates; the clock only times the
// selection for metrics, and [WithTiming](false) turns that off) and keep
// bounded memories: an eviction history of [WithEvictionHistory]
// evictions for the metrics, and an adaptive strategy's history of
// [WithCapacity] resident and [WithGhostCap] evicted sequences.
//
// # Scale
//
// SelectVictims makes one pass over its candidates, O(n + k log k) for k
// victims in any order: fine for thousands of sequences, milliseconds for
// millions. [Index] keeps the candidates ordered between calls, so an
// eviction costs O(k log n) and a request O(log n) (O(k) and O(1) under
// LRU), with the same victims; [WithSampling] makes the slice API
// approximate, drawing a fixed number of candidates per victim, as Redis
// evicts.
package kvevict
