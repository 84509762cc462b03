package kvevict

import (
	"log/slog"
	"sync"

	"github.com/sagellm/kvevict/internal/lists"
	"github.com/sagellm/kvevict/internal/options"
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
	// requiredBlocks == 0 returns an empty Result. Of the blocks it checks
	// only those it frees: a selection whose victims would free a block
	// twice is refused with an error matching [ErrInvalidCandidate], but a
	// block two candidates list while at most one of them is a victim is
	// not seen, since checking every candidate's blocks would cost
	// O(blocks held) on every call; the caller lists each block once
	// (an [Index], which holds its candidates, refuses a duplicate where
	// it enters). The cost is
	// O(n + k log k) for n candidates and k victims, in any candidate
	// order; candidates listed in increasing ID order also spare the
	// duplicate-ID check its hash table. The adaptive strategies ([ARC],
	// [S3FIFO], [SIEVE]) take victims in their algorithm's order instead of
	// by key, in O(n + c) for a cache of c sequences; [Auto] scores the
	// candidates from its history and selects as the key strategies do.
	SelectVictims(candidates []Candidate, requiredBlocks int) (Result, error)

	// UpdateAccess records a request for sequence id, resident or not. Call
	// it for every request of a sequence, before the SelectVictims that
	// makes room for it. It feeds the eviction history, by which the
	// metrics detect re-prefills, and an adaptive strategy's history; key
	// strategies rank by the candidates' own fields. O(1).
	UpdateAccess(id uint64)

	// UpdateAccessHashes records a request for the blocks of hashes: the
	// hashes of its prompt's blocks, head first, as the pool's prefix cache
	// keys them. Call it for every request, beside UpdateAccess, before
	// the SelectVictims that makes room for it, when candidates set
	// [Candidate.HeadHash]: [Auto] counts a request for each block, and
	// ranks such a candidate by its head block's count. The other
	// strategies ignore it. O(len(hashes)).
	UpdateAccessHashes(hashes []uint64)

	// Metrics returns a snapshot of the policy's counters.
	Metrics() Metrics
}

// New returns a Policy for strategy s, whose name matches ignoring case
// and surrounding spaces, as [ParseStrategy] reads it. It returns an error
// matching [ErrUnknownStrategy] for an unregistered strategy and one matching
// [ErrInvalidArgument] for an invalid option or one that does not tune s
// (see [Option]).
func New(s Strategy, opts ...Option) (Policy, error) {
	info, cfg, err := options.Resolve(string(s), opts, options.ForPolicy)
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
		p.params.auto = newAuto(&cfg)
	case info.Kind.Adaptive():
		p.lists = lists.New(info.Kind, &cfg.Config)
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
	// An adaptive strategy's history is lists (ARC's, S3-FIFO's or
	// SIEVE's) or params.auto (Auto's), the other nil; both are nil for a
	// key strategy.
	lists lists.ListHistory
	sel   selector
	txn   transaction
	// The sources of the transaction, kept here so that a selection
	// allocates only its result.
	ranked  ranked
	listSrc listSource
	classes classes // the selection by the classes of Hints
	stats   stats

	sampler *sampler // nil: exact selection
}

func (p *policy) SelectVictims(candidates []Candidate, requiredBlocks int) (Result, error) {
	if err := checkArgs(len(candidates), requiredBlocks); err != nil {
		return Result{}, err
	}
	p.mu.Lock()
	start := p.watch.start()
	var res Result
	var err error
	if requiredBlocks == 0 {
		// Nothing to take: every path validates the whole call alike.
		err = p.sel.validate(candidates, 0)
		p.txn.partial = 0
	} else {
		res, err = p.selectVictims(candidates, requiredBlocks)
	}
	res.Elapsed = p.watch.elapsed(start)
	res.Strategy = p.strategy
	if err == nil && len(res.Victims) > 0 {
		p.stats.record(&res, p.txn.partial)
	}
	if a := p.params.auto; a != nil {
		a.forgetSeen()
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

// selectVictims is SelectVictims for required > 0, under the lock: the
// strategy's source of victims, and the one transaction over it, or the
// selection by class when a candidate carries hints.
func (p *policy) selectVictims(cands []Candidate, required int) (Result, error) {
	res, err := p.selectRanked(cands, required)
	if err == errHinted {
		return p.selectClasses(cands, required)
	}
	return res, err
}

// selectRanked is selectVictims when no evictable candidate carries hints;
// it returns errHinted, having changed nothing, when one does.
func (p *policy) selectRanked(cands []Candidate, required int) (Result, error) {
	switch {
	case p.lists != nil:
		return p.sel.selectAdaptive(cands, required, p.lists, &p.txn, &p.listSrc)
	case p.sampler != nil && len(cands) > p.sampler.k:
		p.sampler.begin(cands, &p.params, &p.sel.ids)
		victims, freed, err := p.txn.cover(make([]Victim, 0, 8), required, p.sampler)
		p.sampler.end()
		if err != errGaveUp {
			return Result{Victims: victims, FreedBlocks: freed}, err
		}
	}
	victims, err := p.sel.greedy(cands, required, &p.params)
	if err != nil {
		return Result{}, err
	}
	// The source lives in the policy, so that passing it as an interface
	// allocates nothing.
	p.ranked = ranked{cands: cands, victims: victims, auto: p.params.auto}
	res := Result{Victims: make([]Victim, 0, len(victims))}
	res.Victims, res.FreedBlocks, err = p.txn.cover(res.Victims, required, &p.ranked)
	p.ranked = ranked{} // drop the view of the caller's slice
	return res, err
}

func (p *policy) UpdateAccess(id uint64) {
	p.mu.Lock()
	p.stats.evictions.Access(id)
	if h := p.history(); h != nil {
		h.Access(id)
	}
	p.mu.Unlock()
}

// history returns the adaptive strategy's history, lists or Auto's, or
// nil for a key strategy.
func (p *policy) history() lists.History {
	switch {
	case p.lists != nil:
		return p.lists
	case p.params.auto != nil:
		return p.params.auto
	}
	return nil
}

func (p *policy) UpdateAccessHashes(hashes []uint64) {
	if p.params.auto == nil {
		return
	}
	p.mu.Lock()
	p.params.auto.accessHashes(hashes)
	p.mu.Unlock()
}

func (p *policy) Metrics() Metrics {
	p.mu.Lock()
	m, window := p.stats.snapshot()
	p.mu.Unlock()
	m.P99EvictionTime = p99(window)
	return m
}
