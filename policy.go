package kvevict

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/sagellm/kvevict/internal/rank"
)

// Policy chooses which sequences to evict when a KV pool runs out of blocks.
//
// A KV pool allocator calls UpdateAccess for every request of a sequence and
// SelectVictims, with the sequences that hold blocks and the number of
// blocks it needs, when it must make room; it frees the victims' blocks. See
// "The access protocol" in the package documentation. Every Policy returned
// by [New] is safe for concurrent use by multiple goroutines.
type Policy interface {
	// SelectVictims picks victims greedily, smallest key first, until their
	// blocks cover requiredBlocks, skipping pinned and referenced candidates.
	// It neither reorders nor modifies candidates. If the evictable blocks
	// cannot cover requiredBlocks it returns an error matching
	// [ErrInsufficientBlocks] and counts nothing; invalid input returns an
	// error matching [ErrInvalidCandidate] or [ErrInvalidArgument].
	// requiredBlocks == 0 returns an empty Result. The cost is
	// O(n + k log k) for n candidates and k victims, in any candidate
	// order; candidates listed in increasing ID order also spare the
	// duplicate-ID check its hash table. The adaptive strategies ([ARC],
	// [S3FIFO], [SIEVE]) take victims in their algorithm's order instead of
	// by key, in O(n + c) for a cache of c sequences; [Auto] scores the
	// candidates from its history and selects as the key strategies do.
	SelectVictims(candidates []Candidate, requiredBlocks int) (Result, error)

	// UpdateAccess records a request for sequence id, resident or not. Call
	// it for every request of a sequence, before the SelectVictims that
	// makes room for it. It feeds the history that re-prefill detection
	// and the adaptive strategies need; key strategies rank by the
	// candidates' own fields. O(1).
	UpdateAccess(id uint64)

	// Metrics returns a snapshot of the policy's counters.
	Metrics() Metrics
}

// New returns a Policy for strategy s, whose name matches ignoring case
// and surrounding spaces, as [ParseStrategy] reads it. It returns an error
// matching [ErrUnknownStrategy] for an unregistered strategy and one matching
// [ErrInvalidArgument] for an invalid option or one that does not tune s
// (see [Option]).
func New(s Strategy, opts ...Option) (Policy, error) {
	info, cfg, err := resolve(s, opts, forPolicy)
	if err != nil {
		return nil, err
	}
	p := &policy{
		strategy: Strategy(info.Name),
		params:   newKeyParams(info.Kind, &cfg),
		stats:    newStats(Strategy(info.Name), &cfg),
		logger:   cfg.Logger,
		watch:    newStopwatch(&cfg),
	}
	switch {
	case info.Kind == rank.KindAuto:
		a := newAuto(&cfg)
		p.hist, p.params.auto = a, a
	case info.Kind.Adaptive():
		p.lists = newListHistory(info.Kind, &cfg)
		p.hist = p.lists
	case cfg.Sampling > 0:
		p.sampler = newSampler(cfg.Sampling)
	}
	return p, nil
}

// policy is the Policy of every strategy: the selection engine over the
// strategy's key (Auto's reading its history), or over the lists of ARC,
// S3-FIFO or SIEVE, plus metrics.
type policy struct {
	strategy Strategy
	logger   *slog.Logger
	watch    stopwatch // Result.Elapsed

	mu     sync.Mutex // guards everything below
	params keyParams
	hist   history     // an adaptive strategy's history: lists, or Auto's (params.auto); nil for the others
	lists  listHistory // ARC's, S3-FIFO's or SIEVE's; nil for the others
	sel    selector
	stats  stats

	sampler *sampler // nil: exact selection
}

func (p *policy) SelectVictims(candidates []Candidate, requiredBlocks int) (Result, error) {
	if requiredBlocks < 0 {
		return Result{}, fmt.Errorf("%w: requiredBlocks must not be negative, got %d", ErrInvalidArgument, requiredBlocks)
	}
	p.mu.Lock()
	start := p.watch.start()
	var res Result
	var err error
	switch {
	case p.lists != nil:
		res, err = p.sel.selectAdaptive(candidates, requiredBlocks, p.lists)
	case p.sampler != nil:
		res, err = p.sampler.selectVictims(&p.sel, candidates, requiredBlocks, &p.params)
	default:
		res, err = p.sel.selectVictims(candidates, requiredBlocks, &p.params)
		if a := p.params.auto; a != nil {
			if err == nil && len(res.Victims) > 0 {
				a.selected(candidates, p.sel.ranked, &res)
			}
			a.forgetSeen()
		}
	}
	res.Elapsed = p.watch.elapsed(start)
	res.Strategy = p.strategy
	if err == nil && len(res.Victims) > 0 {
		p.stats.record(&res, p.sel.partial)
	}
	p.mu.Unlock()
	if err != nil {
		return Result{}, err
	}
	if p.logger != nil && len(res.Victims) > 0 {
		logEviction(p.logger, &res)
	}
	return res, nil
}

func (p *policy) UpdateAccess(id uint64) {
	p.mu.Lock()
	p.stats.evictions.Access(id)
	if p.hist != nil {
		p.hist.access(id)
	}
	p.mu.Unlock()
}

func (p *policy) Metrics() Metrics {
	p.mu.Lock()
	m, window := p.stats.snapshot()
	p.mu.Unlock()
	m.P99EvictionTime = p99(window)
	return m
}
