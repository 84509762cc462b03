package kvevict

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"
)

// Default tuning values.
const (
	defaultTickDuration    = time.Nanosecond
	defaultSLRUThreshold   = 2
	defaultCostAlpha       = 2.0
	defaultLifetimeHorizon = 30 * time.Second
	// defaultEvictionHistory is how many recent evictions a policy
	// remembers for re-prefill detection and fairness, unless
	// WithEvictionHistory says otherwise.
	defaultEvictionHistory = 1 << 16
	// defaultGhostCap is how many evicted sequences an adaptive strategy
	// remembers, unless WithGhostCap says otherwise.
	defaultGhostCap = 1 << 16
)

// config is what the options set.
type config struct {
	tickDuration    time.Duration
	lfuHalfLife     time.Duration
	slruThreshold   int
	costAlpha       float64
	costDecay       float64 // per second
	lifetimeHorizon time.Duration
	evictionHistory int // 0: no eviction is remembered
	ghostCap        int
	noTiming        bool // WithTiming(false)
	sampleK         int  // 0: exact selection
	capacity        int  // adaptive strategies' cache size, in sequences
	logger          *slog.Logger
	tuned           tunable // the strategy-specific options given
	errs            []error
}

func defaultConfig() config {
	return config{
		tickDuration:    defaultTickDuration,
		slruThreshold:   defaultSLRUThreshold,
		costAlpha:       defaultCostAlpha,
		lifetimeHorizon: defaultLifetimeHorizon,
		evictionHistory: defaultEvictionHistory,
		ghostCap:        defaultGhostCap,
		capacity:        defaultCapacity,
	}
}

// Option configures a policy made by [New] or an index made by [NewIndex].
// Options that tune one kind of strategy (WithCapacity for the adaptive
// strategies, WithSampling for the key strategies' Policy, WithLFUHalfLife
// for LFU, WithSLRUThreshold for SLRU, WithCostAlpha and WithCostDecay for
// FrequencyCost, WithLifetimeHorizon for Predictive) are refused for any
// other; the rest apply everywhere. A refused option or an invalid value
// makes the constructor return an error matching [ErrInvalidArgument] that
// names it.
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
		c.tuned |= tuneLFUHalfLife
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
		c.tuned |= tuneSLRUThreshold
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
		c.tuned |= tuneCostAlpha
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
		c.tuned |= tuneCostDecay
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
		c.tuned |= tuneLifetimeHorizon
		if d <= 0 {
			c.reject("lifetime horizon must be positive, got %v", d)
			return
		}
		c.lifetimeHorizon = d
	}
}

// WithEvictionHistory sets how many recent evictions the policy remembers
// for Metrics.RePrefills, RePrefillRate and FairnessScore: an eviction of a
// sequence is a re-prefill when a later UpdateAccess names it while it is
// among the last n evicted. n = 0 remembers none, for callers that do not
// read those three: they stay 0, 0 and 1, the rest of [Metrics] is counted
// as before, and each victim costs a few hash-table operations less, a
// large share of a small [Index] eviction (docs/benchmarks.md). It bounds
// the metrics' memory only; an adaptive strategy's own memory of evicted
// sequences is [WithGhostCap]. Default 65,536. Must be >= 0.
func WithEvictionHistory(n int) Option {
	return func(c *config) {
		if n < 0 {
			c.reject("eviction history must not be negative, got %d", n)
			return
		}
		c.evictionHistory = n
	}
}

// WithGhostCap bounds how many evicted sequences an adaptive strategy
// remembers as ghosts, by which it recognises a sequence that comes back:
// ARC's lists B1 and B2 together, S3-FIFO's ghost queue (which also holds
// at most its main queue's size) and [Auto]'s ghosts, with the requests
// counted for each. SIEVE keeps no ghosts, and the key strategies no
// history: they refuse it. Default 65,536. Must be >= 1.
func WithGhostCap(n int) Option {
	return func(c *config) {
		c.tuned |= tuneGhostCap
		if n < 1 {
			c.reject("ghost cap must be at least 1, got %d", n)
			return
		}
		c.ghostCap = n
	}
}

// WithTiming(false) stops the policy reading the clock around each
// selection, for callers that measure latency themselves: Result.Elapsed,
// Metrics.AvgEvictionTime and P99EvictionTime stay 0. The two clock reads
// can cost more than the rest of a one-victim [Index] eviction, on virtual
// machines whose clock is slow to read. Default: on.
func WithTiming(on bool) Option {
	return func(c *config) { c.noTiming = !on }
}

// WithSampling makes SelectVictims approximate, as Redis's eviction does:
// each victim is the best of an eviction pool of up to 16 candidates fed by
// k candidates drawn at random (with replacement) per round, from a
// generator seeded in the policy (deterministic: the same calls give the
// same victims), so a selection costs O(k) per victim however many
// candidates there are. Redis uses k = 5; larger k is closer to exact.
// Must be >= 1. It tunes the key strategies' Policy only: [NewIndex] and
// the adaptive strategies (ARC, S3-FIFO, SIEVE, Auto) refuse it.
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
		c.tuned |= tuneSampling
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

// constructor names what a configuration is for: strategy-specific
// options must tune the strategy, and WithSampling only a Policy's
// selection.
type constructor string

const (
	forPolicy constructor = "New"
	forIndex  constructor = "NewIndex"
	forRanker constructor = "prefix.New" // the rankers serve package prefix's tree
)

// resolve looks up s and applies opts to the default configuration for
// constructor ctor. It refuses, with an error matching
// [ErrInvalidArgument], an invalid value and an option that tunes neither s
// nor what ctor builds, so that no option is ignored silently.
func resolve(s Strategy, opts []Option, ctor constructor) (strategyInfo, config, error) {
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
	allowed := info.tunes
	if ctor != forPolicy {
		allowed &^= tuneSampling
	}
	if ctor == forRanker && cfg.tuned&tuneCapacity != 0 && info.tunes&tuneCapacity != 0 {
		// The tree's capacity is in blocks, its own option's.
		cfg.errs = append(cfg.errs, fmt.Errorf("%w: WithCapacity counts sequences, and a tree's candidates are blocks: use prefix.WithCapacity", ErrInvalidArgument))
		cfg.tuned &^= tuneCapacity
	}
	for t := tunable(1); t != 0 && t <= cfg.tuned; t <<= 1 {
		if cfg.tuned&t == 0 || allowed&t != 0 {
			continue
		}
		if info.tunes&t != 0 { // WithSampling outside New
			cfg.errs = append(cfg.errs, fmt.Errorf("%w: %s does not apply to %s, only to New", ErrInvalidArgument, t, ctor))
			continue
		}
		cfg.errs = append(cfg.errs, fmt.Errorf("%w: %s does not tune strategy %q (it tunes %s)", ErrInvalidArgument, t, s, tunedBy(t)))
	}
	if err := errors.Join(cfg.errs...); err != nil {
		return strategyInfo{}, config{}, err
	}
	return info, cfg, nil
}

// tunable is one strategy-specific option, a bit of config.tuned and of
// strategyInfo.tunes. The other options apply to every strategy.
type tunable uint16

const (
	tuneCapacity tunable = 1 << iota
	tuneSampling
	tuneLFUHalfLife
	tuneSLRUThreshold
	tuneCostAlpha
	tuneCostDecay
	tuneLifetimeHorizon
	tuneGhostCap
)

// String returns the option's name.
func (t tunable) String() string {
	switch t {
	case tuneCapacity:
		return "WithCapacity"
	case tuneSampling:
		return "WithSampling"
	case tuneLFUHalfLife:
		return "WithLFUHalfLife"
	case tuneSLRUThreshold:
		return "WithSLRUThreshold"
	case tuneCostAlpha:
		return "WithCostAlpha"
	case tuneCostDecay:
		return "WithCostDecay"
	case tuneGhostCap:
		return "WithGhostCap"
	default:
		return "WithLifetimeHorizon"
	}
}

// tunedBy lists the strategies that option t tunes, for error messages.
func tunedBy(t tunable) string {
	var names []string
	for _, info := range registry {
		if info.tunes&t != 0 {
			names = append(names, string(info.name))
		}
	}
	return strings.Join(names, ", ")
}

// defaultCapacity is how many sequences an adaptive strategy's cache holds
// unless WithCapacity says otherwise.
const defaultCapacity = 4096

// maxCapacity bounds [WithCapacity] so node indices fit an int32.
const maxCapacity = 1 << 28

// WithCapacity sets the cache size c of the adaptive strategies ([ARC],
// [S3FIFO], [SIEVE], [Auto]) in sequences, not blocks: set it to about how many
// sequences the KV pool holds when it is full. The history remembers at
// most c resident sequences and, for ARC and S3-FIFO, at most c evicted ones
// (fewer if [WithGhostCap] is smaller), so its memory is O(c) however many
// sequences pass through: about 80 bytes per remembered sequence. When the
// pool holds more sequences than c, the history forgets the least valuable
// ones early and they enter again as new when they next appear as
// candidates: every selection then re-admits the n-c overflow, in
// O(n log n), and the algorithm degrades toward LRU over LastAccess.
//
// A prefix tree, whose candidates are blocks, refuses it: its capacity is
// prefix.WithCapacity, in blocks. The key strategies refuse it everywhere.
// Default 4096. Must be in [1, 2^28].
func WithCapacity(n int) Option {
	return func(c *config) {
		c.tuned |= tuneCapacity
		if n < 1 || n > maxCapacity {
			c.reject("capacity must be in [1, %d], got %d", maxCapacity, n)
			return
		}
		c.capacity = n
	}
}
