package sim

import (
	"errors"
	"fmt"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/internal/sizing"
	"github.com/sagellm/kvevict/tier"
)

// Config is what a run needs besides the workload and the strategy.
type Config struct {
	// Capacity is the pool's size in blocks. Must be >= 1.
	Capacity int
	// Options configure the policy under test (kvevict.New).
	Options []kvevict.Option
	// Progress, if set, is called every so often with the requests done and
	// the total, for a progress bar. It must be cheap.
	Progress func(done, total int)

	// contract makes a replay hand every resident to Policy.SelectVictims
	// even where an Index would pick the same victims faster: the path the
	// tests compare the fast one with.
	contract bool
}

// progressEvery is how many requests pass between Progress calls.
const progressEvery = 256

// ErrEmptyWorkload is returned for a workload without requests.
var ErrEmptyWorkload = errors.New("sim: workload has no requests")

func (c *Config) validate(w *Workload) error {
	if c.Capacity < 1 {
		return fmt.Errorf("sim: capacity must be at least 1 block, got %d", c.Capacity)
	}
	if w == nil || len(w.Requests) == 0 {
		return ErrEmptyWorkload
	}
	if w.BlockTokens < 1 {
		return fmt.Errorf("sim: workload %q: block size must be at least 1 token, got %d", w.Name, w.BlockTokens)
	}
	for i := range w.Requests {
		err := checkRequest(&w.Requests[i])
		if wait := w.Requests[i].Wait; err == nil && wait != nil {
			err = wait.check(i)
		}
		if err != nil {
			return fmt.Errorf("sim: workload %q, request %d: %w", w.Name, i, err)
		}
	}
	return nil
}

func (c *Config) progress(done, total int) {
	if c.Progress != nil && (done%progressEvery == 0 || done == total) {
		c.Progress(done, total)
	}
}

// Replay is the plain prefix-cache replay of w under strategy s, the way
// caching papers report hit ratios. Each block is one candidate, in the
// tier.Cache every policy test uses. For each request in order:
//
//   - its hits are the longest prefix of its HashIDs that is resident;
//   - Policy.UpdateAccess is called for each of its blocks, resident or
//     not, so that the policy counts re-prefills of blocks it evicted;
//   - if its missing blocks do not fit the free ones, one SelectVictims
//     call over every resident block (the request's own referenced, so
//     never evicted) frees the rest;
//   - all its blocks become resident and are touched tail first, so the
//     head is the most recent; the last is marked
//     Candidate.LastBlockPartial when the prompt ends inside it.
//
// A request with more distinct blocks than the capacity keeps only the
// first Capacity. A workload whose requests carry hints has each block
// take the hints of the latest request through it, a lease from the
// request's Timestamp ([tier.Cache.RequestHints], its ticks 4,096 a
// microsecond); a replay counts no leases honoured or wasted, and no
// blocks released or leased when evicted.
//
// The victims are those a Policy's SelectVictims picks over every resident
// block, but a replay asks a [kvevict.Index] of the same strategy and
// options where one exists, which picks the same victims in O(log n) per
// block reference instead of O(Capacity) per eviction: every strategy but
// Auto, FrequencyCost with cost decay and sampled selection
// ([kvevict.WithSampling]), which take the Policy's path.
func Replay(w *Workload, s kvevict.Strategy, cfg Config) (Report, error) {
	return replay(w, s, cfg, nil)
}

// replay is Replay, also storing the blocks it loaded in loads if not nil:
// the quantity Belady's MIN bounds from below.
func replay(w *Workload, s kvevict.Strategy, cfg Config, loads *int64) (Report, error) {
	if err := cfg.validate(w); err != nil {
		return Report{}, err
	}
	// The report counts re-prefills itself: the policy's own count is
	// memory and time spent for nothing. cfg.Options may override the
	// history's size.
	opts := []kvevict.Option{kvevict.WithEvictionHistory(0)}
	opts = append(opts, replayPool(w, cfg.Capacity).Options(s)...)
	opts = append(opts, cfg.Options...)
	ceil := computeCeiling(w)
	cache, err := cacheFor(s, opts, cfg.Capacity, min(cfg.Capacity, ceil.distinct), cfg.contract)
	if err != nil {
		return Report{}, err
	}
	r := &replayer{w: w, cache: cache, hinted: w.hinted()}
	t := newTally(w, ceil)
	for i := range w.Requests {
		if _, err := r.request(i, t); err != nil {
			return Report{}, fmt.Errorf("sim: %s, request %d: %w", s, i, err)
		}
		t.utilization(r.cache.Len(), cfg.Capacity)
		cfg.progress(i+1, len(w.Requests))
	}
	if loads != nil {
		*loads = t.loads
	}
	return t.report(string(s), "replay", cfg.Capacity), nil
}

// replayPool is a replay's cache of capacity blocks, one block per
// candidate, for sizing an adaptive strategy's history: the cache's size,
// plus room for the request whose accesses precede the one selection that
// makes room for them.
func replayPool(w *Workload, capacity int) sizing.Pool {
	return sizing.Pool{Blocks: capacity, Room: longestRequest(w, capacity)}
}

// longestRequest is the most blocks one request of w references, at most
// limit.
func longestRequest(w *Workload, limit int) int {
	n := 0
	for _, r := range w.Requests {
		n = max(n, len(r.HashIDs))
	}
	return min(n, limit)
}

// replayer is a plain replay's resident set: a tier.Cache of one block per
// candidate, named by hash, that the policy drives.
type replayer struct {
	w      *Workload
	cache  *tier.Cache
	hinted bool // w's requests carry hints
}

// cacheFor returns the resident set of a replay under strategy s: kept in
// an Index when s and opts allow one and contract is false, sized for peak
// blocks, else handed to a Policy at each eviction.
func cacheFor(s kvevict.Strategy, opts []kvevict.Option, capacity, peak int, contract bool) (*tier.Cache, error) {
	if !contract {
		c, err := tier.NewCache(s, capacity, opts...)
		if err != nil {
			return nil, err
		}
		c.Grow(peak)
		return c, nil
	}
	p, err := kvevict.New(s, opts...)
	if err != nil {
		return nil, err
	}
	return tier.NewPolicyCache(p, capacity)
}

// prefixHits is the length of the longest prefix of hashes for which
// resident is true.
func prefixHits(hashes []uint64, resident func(uint64) bool) int {
	n := 0
	for n < len(hashes) && resident(hashes[n]) {
		n++
	}
	return n
}

// request replays request i: its prefix hits, the re-prefills of blocks
// evicted earlier, then the cache request that makes all its blocks
// resident, whose outcome it returns.
func (r *replayer) request(i int, t *tally) (tier.Outcome, error) {
	req := &r.w.Requests[i]
	t.request(i, prefixHits(req.HashIDs, r.cache.Contains))
	for j, h := range req.HashIDs {
		if _, again := t.evictions.Access(h); again {
			t.rePrefillTokens += int64(blockTokens(req, j, r.w.BlockTokens))
		}
	}
	var out tier.Outcome
	var err error
	if r.hinted {
		tick, hints := req.tickAt()
		out, err = r.cache.RequestHints(req.HashIDs, kvevict.Priority(req.Priority), hints, tick)
		for j := range out.VictimHints {
			t.hinted(&out.VictimHints[j], tick)
		}
	} else {
		out, err = r.cache.Request(req.HashIDs, kvevict.Priority(req.Priority))
	}
	if err != nil {
		return out, err
	}
	if out.Selected {
		t.latencies = append(t.latencies, out.Elapsed)
	}
	for _, v := range out.Victims {
		t.evictions.Evict(v.ID, 0) // a replay's blocks have no owner
	}
	if last := len(req.HashIDs) - 1; last >= 0 && blockTokens(req, last, r.w.BlockTokens) < r.w.BlockTokens {
		// The prompt ends inside its last block, as a pool would know.
		r.cache.MarkPartial(req.HashIDs[last])
	}
	t.loads += int64(out.Loaded)
	return out, nil
}
