package kvevict

import (
	"strings"

	"github.com/sagellm/kvevict/internal/options"
)

// Strategy names an eviction strategy. Its string form is the name used in
// configuration files and command-line flags.
type Strategy string

// The strategies. Each is a priority key over a candidate; the candidate with
// the smallest key is evicted first and equal keys break by ID ascending.
const (
	LRU           Strategy = "lru"            // LastAccess: least recently used first
	MRU           Strategy = "mru"            // -LastAccess: most recently used first
	FIFO          Strategy = "fifo"           // CreatedAt: oldest first
	FILO          Strategy = "filo"           // -CreatedAt: newest first
	LFU           Strategy = "lfu"            // (AccessCount, LastAccess), optional decay
	SLRU          Strategy = "slru"           // (AccessCount >= threshold, LastAccess)
	QoSAware      Strategy = "qos_aware"      // (Priority, LastAccess)
	Predictive    Strategy = "predictive"     // predicted end of usefulness, soonest first
	FrequencyCost Strategy = "frequency_cost" // AccessCount x len(Blocks)^alpha / (1 + decay x age)
)

// The adaptive strategies. They rank by what the policy remembers between
// calls (which sequences were used once or again, which were evicted
// lately) rather than by a key over a candidate's fields, in a [Policy] and
// an [Index] alike. Each keeps the cache of
// [WithCapacity] sequences that its
// paper describes: UpdateAccess is the paper's access, and a selection is
// the paper's eviction, repeated until the victims' blocks cover the need,
// taking only this call's evictable candidates.
//
// They depend on the access protocol (see the package documentation): the
// eviction may depend on the request it makes room for (ARC adapts to a
// request for a sequence it evicted lately). A candidate the history does
// not hold, because the allocator never reported its first access, enters
// as new, oldest LastAccess first.
//
// A selection costs O(n + c) for n candidates and capacity c in the worst
// case, O(n + k) when the victims sit where the algorithm looks first, plus
// O(a log a) to admit a candidates the history does not hold; UpdateAccess
// is O(1) (amortized: the history's index grows while it fills).
const (
	ARC    Strategy = "arc"    // Adaptive Replacement Cache (Megiddo and Modha, FAST'03)
	S3FIFO Strategy = "s3fifo" // small, main and ghost FIFOs (Yang et al., SOSP'23)
	SIEVE  Strategy = "sieve"  // one FIFO with a visited bit and a hand (Zhang et al., NSDI'24)
)

// Auto is the strategy to pick when the traffic is unknown. It ranks a
// candidate by its recency plus a reuse horizon for every doubling of the
// requests that used it:
//
//	score = LastAccess + W x log2(requests)
//
// smallest first, ties by LastAccess then ID. requests counts the
// UpdateAccess calls for the candidate's id, remembered across its
// evictions in a bounded ghost table. W is the pool's turnover, the time
// in which the pool evicts as many blocks as its evictable candidates hold
// (how long a block used once stays, as in LRU), times a weight that Auto chooses by
// simulation: miniature caches, one per weight from 0 (LRU) to 16, rank a
// hash-sampled share of the requests by the same score, and the weight of
// the one with the most hits lately wins. Where frequency predicts reuse
// the requests an id had count against its age; where it does not, Auto
// ranks by recency alone, as LRU. An id requested once is ranked by
// recency alone.
//
// A one-block candidate whose block is partial
// ([Candidate.LastBlockPartial]) goes before every full one, LRU among
// them, since no longer prompt can reuse a block whose content ends early,
// unless the victims whose block was partial come back more often than
// the others: a pool that extends partial blocks in place reuses them.
//
// Auto keeps [WithCapacity] resident ids and [WithGhostCap] ghosts. A
// selection costs O(n + k log k) for n candidates and k victims, through
// the same engine as the key strategies; UpdateAccess O(log s) for
// miniature caches of s ids when the request is in their sample, else
// O(1). See docs/auto.md for the reasons and the measurements.
const Auto Strategy = "auto"

// Adaptive reports whether s learns from a history of accesses it keeps
// (ARC, S3-FIFO, SIEVE, Auto), sized by [WithCapacity] and [WithGhostCap],
// rather than ranking by each candidate's fields alone. ARC, S3-FIFO and
// SIEVE take victims in their lists' order; Auto ranks by a key that reads
// its history. An adaptive strategy works with [Policy] and [Index]
// (there, through [Index.UpdateAccess]); a prefix tree takes Auto only.
// False for an unknown strategy.
func (s Strategy) Adaptive() bool {
	info, ok := options.Lookup(string(s))
	return ok && info.Kind.Adaptive()
}

// Strategies returns every registered strategy, in a fixed order.
func Strategies() []Strategy {
	all := options.All()
	out := make([]Strategy, len(all))
	for i, info := range all {
		out[i] = Strategy(info.Name)
	}
	return out
}

// ParseStrategy returns the strategy with the given name, ignoring case and
// surrounding space, for configuration flags. An unknown name returns an
// error matching [ErrUnknownStrategy] that lists the known ones.
func ParseStrategy(name string) (Strategy, error) {
	s := Strategy(strings.ToLower(strings.TrimSpace(name)))
	if _, ok := options.Lookup(string(s)); !ok {
		return "", options.Unknown(name)
	}
	return s, nil
}
