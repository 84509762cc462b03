// Package tier keeps a KV cache across a hierarchy of tiers, GPU memory
// first, then host memory and storage, keyed by block hash, and prices
// what moving blocks between them costs in time.
//
// Each tier holds up to its capacity in blocks and evicts by any strategy
// a [kvevict.Index] takes. A request's hit on a tier is the run of its
// blocks that continues the run found on the tiers above it (prefix
// semantics: a block is useful only when every block before it is at hand).
// Eviction from one tier is a demotion to the next, or a drop, as the
// write policy says. A [Hierarchy] keeps the GPU's blocks in a tier like
// the others; a [Tree] makes a prefix tree the GPU, as an engine's prefix
// cache is, over the tiers a Hierarchy keeps below it.
//
// The cost model ([Cost]) turns blocks into bytes from a model's shape,
// bytes into seconds over each link's bandwidth and latency, and tokens
// into prefill seconds from the model's FLOPs and the GPU's; every figure
// in time it gives is modelled, not measured.
package tier
