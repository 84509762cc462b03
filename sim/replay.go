package sim

import (
	"errors"
	"fmt"

	"github.com/sagellm/kvevict"
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
		if r := &w.Requests[i]; r.InputTokens < 0 || r.OutputTokens < 0 {
			return fmt.Errorf("sim: workload %q, request %d: negative token count (input %d, output %d)",
				w.Name, i, r.InputTokens, r.OutputTokens)
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
// caching papers report hit ratios. Each block is one candidate. For each
// request in order:
//
//   - its hits are the longest prefix of its HashIDs that is resident;
//   - Policy.UpdateAccess is called for each of its blocks, so that the
//     policy counts re-prefills of blocks it evicted;
//   - if its missing blocks do not fit the free ones, one SelectVictims
//     call over every resident block (the request's own referenced, so
//     never evicted) frees the rest;
//   - all its blocks become resident and are touched tail first, so the
//     head is the most recent; the last is marked
//     Candidate.LastBlockPartial when the prompt ends inside it.
//
// A request with more distinct blocks than the capacity keeps only the
// first Capacity. The cost is dominated by SelectVictims: O(Capacity) per
// request that evicts.
func Replay(w *Workload, s kvevict.Strategy, cfg Config) (Report, error) {
	if err := cfg.validate(w); err != nil {
		return Report{}, err
	}
	// One block per candidate, so the adaptive strategies' capacity, counted
	// in sequences, is in blocks: the cache's size, plus room for the
	// request whose accesses precede the one selection that makes room for
	// them, so that the history never evicts on its own a block the cache
	// still holds. cfg.Options may override it.
	opts := append([]kvevict.Option{kvevict.WithCapacity(cfg.Capacity + longestRequest(w, cfg.Capacity))}, cfg.Options...)
	p, err := kvevict.New(s, opts...)
	if err != nil {
		return Report{}, err
	}
	r := newReplayer(w, cfg.Capacity)
	t := newTally(w, computeCeiling(w))
	for i := range w.Requests {
		if err := r.request(i, p, t); err != nil {
			return Report{}, fmt.Errorf("sim: %s, request %d: %w", s, i, err)
		}
		t.utilization(len(r.cands), cfg.Capacity)
		cfg.progress(i+1, len(w.Requests))
	}
	return t.report(string(s), "replay", cfg.Capacity), nil
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

// oneBlock is every replay candidate's Blocks: a replay names blocks by
// hash (Candidate.ID), so only the count matters. Policies never modify it.
var oneBlock = []int{0}

// replayer is the resident set of a plain replay: one candidate per block,
// dense, with each block's index in it.
type replayer struct {
	w        *Workload
	capacity int
	cands    []kvevict.Candidate // resident blocks; Candidate.ID is the hash
	slot     map[uint64]int      // hash -> index in cands
	evicted  map[uint64]bool     // evicted and not referenced since
	tick     int64
	uniq     []uint64 // scratch: the request's distinct blocks
	seen     map[uint64]struct{}
}

func newReplayer(w *Workload, capacity int) *replayer {
	return &replayer{
		w:        w,
		capacity: capacity,
		cands:    make([]kvevict.Candidate, 0, capacity),
		slot:     make(map[uint64]int, capacity),
		evicted:  make(map[uint64]bool),
		seen:     make(map[uint64]struct{}),
	}
}

// distinct returns hashes without repeats, in order, at most capacity of them.
func distinct(hashes []uint64, capacity int, buf []uint64, seen map[uint64]struct{}) []uint64 {
	clear(seen)
	buf = buf[:0]
	for _, h := range hashes {
		if len(buf) == capacity {
			break
		}
		if _, ok := seen[h]; !ok {
			seen[h] = struct{}{}
			buf = append(buf, h)
		}
	}
	return buf
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

func (r *replayer) resident(h uint64) bool {
	_, ok := r.slot[h]
	return ok
}

func (r *replayer) request(i int, p kvevict.Policy, t *tally) error {
	req := &r.w.Requests[i]
	t.request(i, prefixHits(req.HashIDs, r.resident))
	for j, h := range req.HashIDs {
		p.UpdateAccess(h)
		if r.evicted[h] {
			// Referenced again after an eviction: computed twice.
			delete(r.evicted, h)
			t.reprefills++
			t.reprefillTokens += int64(blockTokens(req, j, r.w.BlockTokens))
		}
	}
	r.uniq = distinct(req.HashIDs, r.capacity, r.uniq, r.seen)
	missing := 0
	for _, h := range r.uniq {
		if k, ok := r.slot[h]; ok {
			r.cands[k].RefCount = 1 // in use by this request
		} else {
			missing++
		}
	}
	if need := missing - (r.capacity - len(r.cands)); need > 0 {
		res, err := p.SelectVictims(r.cands, need)
		if err != nil {
			return err
		}
		t.latencies = append(t.latencies, res.Elapsed)
		for _, v := range res.Victims {
			r.remove(v.ID)
			r.evicted[v.ID] = true
			t.evicted++
		}
	}
	t.loads += int64(missing)
	for _, h := range r.uniq {
		if _, ok := r.slot[h]; !ok {
			r.slot[h] = len(r.cands)
			r.cands = append(r.cands, kvevict.Candidate{ID: h, Blocks: oneBlock, CreatedAt: r.tick + 1})
		} else {
			r.cands[r.slot[h]].AccessCount++
		}
	}
	for j := len(r.uniq) - 1; j >= 0; j-- { // tail first: the head ends most recent
		r.tick++
		c := &r.cands[r.slot[r.uniq[j]]]
		c.LastAccess = r.tick
		c.RefCount = 0
		c.Priority = kvevict.Priority(req.Priority) // of the latest request to use it
		c.LastBlockPartial = false
	}
	if last := len(req.HashIDs) - 1; last >= 0 {
		// The prompt's last block is partial when its length is not a
		// multiple of the block size, as a pool would know.
		if k, ok := r.slot[req.HashIDs[last]]; ok {
			r.cands[k].LastBlockPartial = blockTokens(req, last, r.w.BlockTokens) < r.w.BlockTokens
		}
	}
	return nil
}

// remove drops block h from the resident set by moving the last candidate
// into its place. O(1).
func (r *replayer) remove(h uint64) {
	k := r.slot[h]
	last := len(r.cands) - 1
	if k != last {
		r.cands[k] = r.cands[last]
		r.slot[r.cands[k].ID] = k
	}
	r.cands[last] = kvevict.Candidate{}
	r.cands = r.cands[:last]
	delete(r.slot, h)
}
