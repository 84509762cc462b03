package rank

// History scores blocks for a strategy that ranks by a history of requests
// rather than by a key over a candidate's fields (kvevict's Auto), for a
// structure that keeps the per-block part of that history itself (package
// prefix's tree: each block's request count, and a bounded memory of the
// counts of evicted blocks). The structure reports every request and every
// eviction; the History measures from them what the strategy measures (how
// fast blocks enter, which weight of frequency would have hit most) and
// turns a block's recency and request count into a Key, by the same
// functions the strategy's Policy ranks with.
//
// A History is not safe for concurrent use: the structure's lock guards it.
type History interface {
	// Request records a request for one block: its hash, by which the
	// History samples the blocks it simulates, its requests counted with
	// this one (at least 1, including those remembered from before an
	// eviction), and whether the structure held it. O(log s) for a block
	// the History simulates, s being the simulated cache's size; O(1) for
	// the others.
	Request(hash uint64, requests uint32, resident bool)
	// Evicting records that an eviction starts at tick now: the rate at
	// which blocks enter is measured from the first. O(1).
	Evicting(now int64)
	// Horizons returns the horizon of each weight the History simulates,
	// in ticks at tick now for a structure of n blocks, and the index of
	// the weight it chooses. A structure keeps one order of its blocks per
	// weight, each keyed by that weight's horizon when a block is touched,
	// and evicts from the order of the weight chosen: the choice may change
	// from one eviction to the next, and a block keyed under an earlier
	// choice would otherwise keep that choice's key. The slice is the
	// History's own, of the same length at every call, valid until the
	// next. O(weights).
	Horizons(now int64, n int) (horizons []float64, chosen int)
	// Key returns the key of a block last accessed at lastAccess and
	// requested requests times (at least 1), under horizon w. O(1).
	Key(lastAccess int64, requests uint32, w float64) Key
	// MemoryCap is how many evicted blocks' counts the structure may
	// remember: kvevict's WithGhostCap. O(1).
	MemoryCap() int
}

// historyConstructor is kvevict's History constructor, a
// func(string, ...O) (History, error) for kvevict's Option O.
var historyConstructor any

// RegisterHistory installs kvevict's History constructor. Package kvevict
// calls it from init.
func RegisterHistory[O any](f func(strategy string, capacity int, opts ...O) (History, error)) {
	historyConstructor = f
}

// NewHistory returns the History of strategy s for a structure of at most
// capacity blocks (0: a default), configured by opts, as kvevict's
// constructor does: an error matching errors.ErrUnsupported for a strategy
// no History serves, kvevict's errors for the rest. O must be
// kvevict.Option.
func NewHistory[O any](s string, capacity int, opts ...O) (History, error) {
	f, ok := historyConstructor.(func(string, int, ...O) (History, error))
	if !ok {
		panic("rank: NewHistory called before package kvevict registered its histories, or with another option type")
	}
	return f(s, capacity, opts...)
}
