package kvevict

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"
)

// Policy chooses which sequences to evict when a KV pool runs out of blocks.
//
// A KV pool allocator calls SelectVictims with the sequences that hold blocks
// and the number of blocks it needs, frees the victims' blocks, and calls
// UpdateAccess each time a sequence is used again. Every Policy returned by
// [New] is safe for concurrent use by multiple goroutines.
type Policy interface {
	// SelectVictims picks victims greedily, smallest key first, until their
	// blocks cover requiredBlocks, skipping pinned and referenced candidates.
	// It neither reorders nor modifies candidates. If the evictable blocks
	// cannot cover requiredBlocks it returns an error matching
	// [ErrInsufficientBlocks] and counts nothing; invalid input returns an
	// error matching [ErrInvalidCandidate] or [ErrInvalidArgument].
	// requiredBlocks == 0 returns an empty Result. The cost is
	// O(n + k log n) for n candidates and k victims; candidates listed in
	// increasing ID order also spare the duplicate-ID check its hash
	// table. The adaptive strategies ([ARC], [S3FIFO], [SIEVE]) take
	// victims in their algorithm's order instead of by key, in O(n + c) for
	// a cache of c sequences.
	SelectVictims(candidates []Candidate, requiredBlocks int) (Result, error)

	// UpdateAccess records that sequence id was used again. It feeds the
	// history that re-prefill detection and adaptive strategies need; key
	// strategies rank by the candidates' own fields. O(1).
	UpdateAccess(id uint64)

	// Metrics returns a snapshot of the policy's counters.
	Metrics() Metrics
}

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

// strategyInfo is one registered strategy: a key kind, or for an adaptive
// strategy a constructor of the history that ranks instead of a key.
type strategyInfo struct {
	name    Strategy
	kind    keyKind
	history func(*config) history // nil for key strategies
}

// registry lists every strategy in the order [Strategies] reports them.
var registry = []strategyInfo{
	{name: LRU, kind: kindLRU},
	{name: MRU, kind: kindMRU},
	{name: FIFO, kind: kindFIFO},
	{name: FILO, kind: kindFILO},
	{name: LFU, kind: kindLFU},
	{name: SLRU, kind: kindSLRU},
	{name: QoSAware, kind: kindQoS},
	{name: Predictive, kind: kindPredictive},
	{name: FrequencyCost, kind: kindCost},
	{name: ARC, kind: kindHistory, history: newARC},
	{name: S3FIFO, kind: kindHistory, history: newS3FIFO},
	{name: SIEVE, kind: kindHistory, history: newSIEVE},
	{name: Auto, kind: kindHistory, history: newAuto},
}

func lookup(s Strategy) (strategyInfo, bool) {
	for _, info := range registry {
		if info.name == s {
			return info, true
		}
	}
	return strategyInfo{}, false
}

// Strategies returns every registered strategy, in a fixed order.
func Strategies() []Strategy {
	out := make([]Strategy, len(registry))
	for i, info := range registry {
		out[i] = info.name
	}
	return out
}

// ParseStrategy returns the strategy with the given name, ignoring case and
// surrounding space, for configuration flags. An unknown name returns an
// error matching [ErrUnknownStrategy] that lists the known ones.
func ParseStrategy(name string) (Strategy, error) {
	s := Strategy(strings.ToLower(strings.TrimSpace(name)))
	if _, ok := lookup(s); !ok {
		return "", unknownStrategy(name)
	}
	return s, nil
}

func unknownStrategy(name string) error {
	names := make([]string, len(registry))
	for i, info := range registry {
		names[i] = string(info.name)
	}
	return fmt.Errorf("%w %q (known: %s)", ErrUnknownStrategy, name, strings.Join(names, ", "))
}

// Errors returned by the package. Match them with [errors.Is].
var (
	// ErrInsufficientBlocks: the evictable candidates hold fewer blocks than
	// required. The error is an [*InsufficientBlocksError] with the numbers.
	ErrInsufficientBlocks = errors.New("kvevict: insufficient evictable blocks")
	// ErrInvalidCandidate: a candidate has a negative RefCount, AccessCount,
	// EstimatedLifetime, SeqLen or MaxLen, or repeats another's ID.
	ErrInvalidCandidate = errors.New("kvevict: invalid candidate")
	// ErrInvalidArgument: a negative requiredBlocks, or an invalid option.
	ErrInvalidArgument = errors.New("kvevict: invalid argument")
	// ErrUnknownStrategy: a strategy name that is not registered.
	ErrUnknownStrategy = errors.New("kvevict: unknown strategy")
)

// InsufficientBlocksError reports a selection that could not be satisfied.
// Nothing was evicted. It matches [ErrInsufficientBlocks].
type InsufficientBlocksError struct {
	Required  int // blocks asked for
	Available int // blocks held by evictable (unpinned, unreferenced) candidates
}

func (e *InsufficientBlocksError) Error() string {
	return fmt.Sprintf("kvevict: insufficient evictable blocks: need %d, %d available", e.Required, e.Available)
}

// Is reports whether target is [ErrInsufficientBlocks].
func (e *InsufficientBlocksError) Is(target error) bool { return target == ErrInsufficientBlocks }

// Default tuning values.
const (
	defaultTickDuration    = time.Nanosecond
	defaultSLRUThreshold   = 2
	defaultCostAlpha       = 2.0
	defaultLifetimeHorizon = 30 * time.Second
	// DefaultHistoryCap is how many recent evictions a policy remembers for
	// re-prefill detection and fairness, unless [WithHistoryCap] says
	// otherwise. About 40 bytes each.
	DefaultHistoryCap = 1 << 16
)

// config is what the options set.
type config struct {
	tickDuration    time.Duration
	lfuHalfLife     time.Duration
	slruThreshold   int
	costAlpha       float64
	costDecay       float64 // per second
	lifetimeHorizon time.Duration
	historyCap      int
	noHistory       bool // WithEvictionHistory(false)
	noTiming        bool // WithTiming(false)
	sampleK         int  // 0: exact selection
	capacity        int  // adaptive strategies' cache size, in sequences
	logger          *slog.Logger
	errs            []error
}

func defaultConfig() config {
	return config{
		tickDuration:    defaultTickDuration,
		slruThreshold:   defaultSLRUThreshold,
		costAlpha:       defaultCostAlpha,
		lifetimeHorizon: defaultLifetimeHorizon,
		historyCap:      DefaultHistoryCap,
		capacity:        DefaultCapacity,
	}
}

// Option configures a policy made by [New]. An option that does not apply to
// the chosen strategy is accepted and has no effect; an invalid value makes
// New return an error matching [ErrInvalidArgument].
type Option func(*config)

func (c *config) reject(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...))
}

// WithTickDuration says how long one tick of Candidate.LastAccess and
// CreatedAt is, so that durations (EstimatedLifetime, half-lives, horizons,
// per-second decay) convert to ticks. Default: one nanosecond. Must be > 0.
func WithTickDuration(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.reject("tick duration must be positive, got %v", d)
			return
		}
		c.tickDuration = d
	}
}

// WithLFUHalfLife makes LFU age access counts: a count loses half its weight
// for every half-life that passed since LastAccess. Default 0: no decay, pure
// (AccessCount, LastAccess) order. Must be >= 0.
func WithLFUHalfLife(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.reject("LFU half-life must not be negative, got %v", d)
			return
		}
		c.lfuHalfLife = d
	}
}

// WithSLRUThreshold sets how many accesses move a sequence from SLRU's
// probationary segment to its protected one. Default 2. Must be >= 1.
func WithSLRUThreshold(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.reject("SLRU threshold must be at least 1, got %d", n)
			return
		}
		c.slruThreshold = n
	}
}

// WithCostAlpha sets FrequencyCost's exponent on the block count: larger
// alpha protects long sequences (expensive to re-prefill) more. Default 2.
// Must be finite and >= 0.
func WithCostAlpha(alpha float64) Option {
	return func(c *config) {
		if !(alpha >= 0) || math.IsInf(alpha, 0) {
			c.reject("cost alpha must be finite and >= 0, got %v", alpha)
			return
		}
		c.costAlpha = alpha
	}
}

// WithCostDecay sets FrequencyCost's decay per second of idle time: retention
// is divided by 1 + decay x age_seconds. Default 0. Must be finite and >= 0.
func WithCostDecay(perSecond float64) Option {
	return func(c *config) {
		if !(perSecond >= 0) || math.IsInf(perSecond, 0) {
			c.reject("cost decay must be finite and >= 0, got %v", perSecond)
			return
		}
		c.costDecay = perSecond
	}
}

// WithLifetimeHorizon sets how long Predictive expects a sequence to stay
// useful after its last access when nothing better is known; a sequence
// that is a fraction f of the way to MaxLen gets (1-f) of it. Default 30s.
// Must be > 0.
func WithLifetimeHorizon(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.reject("lifetime horizon must be positive, got %v", d)
			return
		}
		c.lifetimeHorizon = d
	}
}

// WithHistoryCap bounds how many recent evictions the policy remembers for
// re-prefill detection and fairness. Default [DefaultHistoryCap]. Must be >= 1.
func WithHistoryCap(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.reject("history cap must be at least 1, got %d", n)
			return
		}
		c.historyCap = n
	}
}

// WithEvictionHistory(false) stops the policy remembering which sequences
// it evicted, for callers that do not read Metrics.RePrefills,
// RePrefillRate or FairnessScore: those stay 0, 0 and 1, and the rest of
// [Metrics] is counted as before. It saves a few hash-table operations per
// victim (a quarter to a third of an [Index] eviction of 10 victims in
// BenchmarkIndex) and the history's memory. It does not change the
// adaptive strategies' own history ([WithHistoryCap]). Default: on.
func WithEvictionHistory(on bool) Option {
	return func(c *config) { c.noHistory = !on }
}

// WithTiming(false) stops the policy reading the clock around each
// selection, for callers that measure latency themselves: Result.Elapsed,
// Metrics.AvgEvictionTime and P99EvictionTime stay 0. The two clock reads
// cost tens of nanoseconds, more than the rest of a one-victim [Index]
// eviction on some virtual machines. Default: on.
func WithTiming(on bool) Option {
	return func(c *config) { c.noTiming = !on }
}

// WithSampling makes SelectVictims approximate, as Redis's eviction does:
// each victim is the best of an eviction pool of up to 16 candidates fed by
// k candidates drawn at random (with replacement) per round, from a
// generator seeded in the policy (deterministic: the same calls give the
// same victims), so a selection costs O(k) per victim however many
// candidates there are. Redis uses k = 5; larger k is closer to exact.
// Must be >= 1. [NewIndex], [NewRanker] and the adaptive strategies (ARC,
// S3-FIFO, SIEVE) ignore it.
//
// Sampling reads only the candidates it draws, so it validates only those:
// a drawn candidate with a negative field returns an error matching
// [ErrInvalidCandidate], and two victims sharing an ID return one, but
// invalid or duplicate candidates that are never drawn go unnoticed. The
// victims come in the order chosen, not sorted by key. Selections stay
// atomic: a call with at most k candidates, or whose sampling finds no new
// evictable candidate for 16 rounds in a row (the candidates are mostly
// pinned or referenced, or the need is close to every evictable block),
// falls back to the exact O(n) selection with its full validation and
// [ErrInsufficientBlocks]. FrequencyCost with decay still makes one O(n)
// pass to find the current tick.
func WithSampling(k int) Option {
	return func(c *config) {
		if k < 1 {
			c.reject("sample size must be at least 1, got %d", k)
			return
		}
		c.sampleK = k
	}
}

// WithLogger logs every eviction at debug level: strategy, victims, freed
// blocks and elapsed time. The policy logs after releasing its lock.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// New returns a Policy for strategy s. It returns an error matching
// [ErrUnknownStrategy] for an unregistered strategy and one matching
// [ErrInvalidArgument] for an invalid option.
func New(s Strategy, opts ...Option) (Policy, error) {
	info, cfg, err := resolve(s, opts)
	if err != nil {
		return nil, err
	}
	p := &policy{
		strategy: s,
		params:   newKeyParams(info.kind, &cfg),
		stats:    newStats(s, &cfg),
		logger:   cfg.logger,
		timed:    !cfg.noTiming,
	}
	if info.history != nil {
		p.hist = info.history(&cfg)
	} else if cfg.sampleK > 0 {
		p.sampler = newSampler(cfg.sampleK)
	}
	return p, nil
}

// resolve looks up s and applies opts to the default configuration.
func resolve(s Strategy, opts []Option) (strategyInfo, config, error) {
	info, ok := lookup(s)
	if !ok {
		return strategyInfo{}, config{}, unknownStrategy(string(s))
	}
	cfg := defaultConfig()
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	if err := errors.Join(cfg.errs...); err != nil {
		return strategyInfo{}, config{}, err
	}
	return info, cfg, nil
}

// policy is the Policy of every strategy: the selection engine over the
// strategy's key, or over its history for an adaptive strategy, plus metrics.
type policy struct {
	strategy Strategy
	logger   *slog.Logger
	timed    bool // read the clock for Result.Elapsed

	mu     sync.Mutex // guards everything below
	params keyParams
	hist   history // nil for key strategies
	sel    selector
	stats  stats

	sampler *sampler // nil: exact selection
}

func (p *policy) SelectVictims(candidates []Candidate, requiredBlocks int) (Result, error) {
	if requiredBlocks < 0 {
		return Result{}, fmt.Errorf("%w: requiredBlocks must not be negative, got %d", ErrInvalidArgument, requiredBlocks)
	}
	p.mu.Lock()
	var start time.Time
	if p.timed {
		start = time.Now()
	}
	var res Result
	var err error
	switch {
	case p.hist != nil:
		res, err = p.sel.selectAdaptive(candidates, requiredBlocks, p.hist)
	case p.sampler != nil:
		res, err = p.sampler.selectVictims(&p.sel, candidates, requiredBlocks, &p.params)
	default:
		res, err = p.sel.selectVictims(candidates, requiredBlocks, &p.params)
	}
	if p.timed {
		res.Elapsed = time.Since(start)
	}
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
	p.stats.access(id)
	if p.hist != nil {
		p.hist.access(id)
	}
	p.mu.Unlock()
}

func (p *policy) Metrics() Metrics {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats.snapshot()
}
