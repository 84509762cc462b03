package kvevict

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/sagellm/kvevict/internal/bridge"
	"github.com/sagellm/kvevict/internal/rank"
)

// Option configures a policy made by [New] or an index made by [NewIndex].
// Options that tune one kind of strategy (WithCapacity for the adaptive
// strategies, WithSampling for the key strategies' Policy, WithLFUHalfLife
// for LFU, WithSLRUThreshold for SLRU, WithCostAlpha and WithCostDecay for
// FrequencyCost, WithLifetimeHorizon for Predictive) are refused for any
// other; the rest apply everywhere. A refused option or an invalid value
// makes the constructor return an error matching [ErrInvalidArgument] that
// names it.
type Option interface {
	apply(*config)
}

// optionFunc is every Option: it records its value in a config, or refuses
// it.
type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithTickDuration says how long one tick of Candidate.LastAccess and
// CreatedAt is, so that durations (EstimatedLifetime, half-lives, horizons,
// per-second decay) convert to ticks. Default: one nanosecond. Must be > 0.
func WithTickDuration(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d <= 0 {
			c.reject("tick duration must be positive, got %v", d)
			return
		}
		c.TickDuration = d
	})
}

// WithLFUHalfLife makes LFU age access counts: a count loses half its weight
// for every half-life that passed since LastAccess. Default 0: no decay, pure
// (AccessCount, LastAccess) order. Must be >= 0.
func WithLFUHalfLife(d time.Duration) Option {
	return optionFunc(func(c *config) {
		c.tuned |= tuneLFUHalfLife
		if d < 0 {
			c.reject("LFU half-life must not be negative, got %v", d)
			return
		}
		c.LFUHalfLife = d
	})
}

// WithSLRUThreshold sets how many accesses move a sequence from SLRU's
// probationary segment to its protected one. Default 2. Must be >= 1.
func WithSLRUThreshold(n int) Option {
	return optionFunc(func(c *config) {
		c.tuned |= tuneSLRUThreshold
		if n < 1 {
			c.reject("SLRU threshold must be at least 1, got %d", n)
			return
		}
		c.SLRUThreshold = n
	})
}

// WithCostAlpha sets FrequencyCost's exponent on the block count: larger
// alpha protects long sequences (expensive to re-prefill) more. Default 2.
// Must be finite and >= 0.
func WithCostAlpha(alpha float64) Option {
	return optionFunc(func(c *config) {
		c.tuned |= tuneCostAlpha
		if !(alpha >= 0) || math.IsInf(alpha, 0) {
			c.reject("cost alpha must be finite and >= 0, got %v", alpha)
			return
		}
		c.CostAlpha = alpha
	})
}

// WithCostDecay sets FrequencyCost's decay per second of idle time: retention
// is divided by 1 + decay x age_seconds. Default 0. Must be finite and >= 0.
func WithCostDecay(perSecond float64) Option {
	return optionFunc(func(c *config) {
		c.tuned |= tuneCostDecay
		if !(perSecond >= 0) || math.IsInf(perSecond, 0) {
			c.reject("cost decay must be finite and >= 0, got %v", perSecond)
			return
		}
		c.CostDecay = perSecond
	})
}

// WithLifetimeHorizon sets how long Predictive expects a sequence to stay
// useful after its last access when nothing better is known; a sequence
// that is a fraction f of the way to MaxLen gets (1-f) of it. Default 30s.
// Must be > 0.
func WithLifetimeHorizon(d time.Duration) Option {
	return optionFunc(func(c *config) {
		c.tuned |= tuneLifetimeHorizon
		if d <= 0 {
			c.reject("lifetime horizon must be positive, got %v", d)
			return
		}
		c.LifetimeHorizon = d
	})
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
	return optionFunc(func(c *config) {
		if n < 0 {
			c.reject("eviction history must not be negative, got %d", n)
			return
		}
		c.EvictionHistory = n
	})
}

// WithGhostCap bounds how many evicted sequences an adaptive strategy
// remembers as ghosts, by which it recognises a sequence that comes back:
// ARC's lists B1 and B2 together, S3-FIFO's ghost queue (which also holds
// at most its main queue's size) and [Auto]'s ghosts, with the requests
// counted for each. SIEVE keeps no ghosts, and the key strategies no
// history: they refuse it. Default 65,536. Must be >= 1.
func WithGhostCap(n int) Option {
	return optionFunc(func(c *config) {
		c.tuned |= tuneGhostCap
		if n < 1 {
			c.reject("ghost cap must be at least 1, got %d", n)
			return
		}
		c.GhostCap = n
	})
}

// WithTierBelow tells [Auto] that the pool's victims are demoted to an
// exclusive tier of n blocks below it, as a GPU's are to host memory in a
// tier.Hierarchy with Exclusive: the tier keeps the most recently demoted
// and gives a block back up when a request finds it there. Auto's
// miniature caches then simulate both tiers, so the weight it chooses is
// the one that serves the most requests from either, not from the pool
// alone: a pool that keeps the frequent blocks leaves the recent ones to
// the tier below, which a pool alone would not count. n counts what
// WithCapacity counts (blocks, for a pool whose candidates are blocks).
// For a [Policy] or an [Index], not a prefix tree. Default 0: no tier
// below. Must be at least 0.
func WithTierBelow(n int) Option {
	return optionFunc(func(c *config) {
		c.tuned |= tuneBelow
		if n < 0 {
			c.reject("tier below must be at least 0 blocks, got %d", n)
			return
		}
		c.Below = n
	})
}

// WithTiming(false) stops the policy reading the clock around each
// selection, for callers that measure latency themselves: Result.Elapsed,
// Metrics.AvgEvictionTime and P99EvictionTime stay 0. The two clock reads
// can cost more than the rest of a one-victim [Index] eviction, on virtual
// machines whose clock is slow to read. Default: on.
func WithTiming(on bool) Option {
	return optionFunc(func(c *config) { c.NoTiming = !on })
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
	return optionFunc(func(c *config) {
		c.tuned |= tuneSampling
		if k < 1 {
			c.reject("sample size must be at least 1, got %d", k)
			return
		}
		c.Sampling = k
	})
}

// WithLogger logs every eviction at debug level: strategy, victims, freed
// blocks and elapsed time. The policy logs after releasing its lock.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) { c.Logger = l })
}

// WithCapacity sets the cache size c of the adaptive strategies ([ARC],
// [S3FIFO], [SIEVE], [Auto]) in sequences, not blocks: set it to about how many
// sequences the KV pool holds when it is full. The history remembers at
// most c resident sequences and, for ARC and S3-FIFO, at most c evicted ones
// (fewer if [WithGhostCap] is smaller), so its memory is O(c) however many
// sequences pass through (docs/strategies.md gives the bytes). When the
// pool holds more sequences than c, the history forgets the least valuable
// ones early and they enter again as new when they next appear as
// candidates: every selection then re-admits the n-c overflow, in
// O(n log n), and the algorithm degrades toward LRU over LastAccess.
//
// Auto counting requests per block ([Candidate.HeadHash],
// [Policy.UpdateAccessHashes]) counts blocks, not sequences: give it the
// pool's size in blocks, the pool its miniature caches model.
//
// A prefix tree, whose candidates are blocks, refuses it: its capacity is
// prefix.New's capacity, in blocks. The key strategies refuse it everywhere.
// Default 4096. Must be in [1, 2^28].
func WithCapacity(n int) Option {
	return optionFunc(func(c *config) {
		c.tuned |= tuneCapacity
		if n < 1 || n > maxCapacity {
			c.reject("capacity must be in [1, %d], got %d", maxCapacity, n)
			return
		}
		c.Capacity = n
	})
}

// config is what the options set: the parameters of the mechanisms, which
// package prefix's tree shares, and those only a Policy or an Index reads;
// then which strategy-specific options were given and the invalid values,
// for resolve to check.
type config struct {
	rank.Config
	EvictionHistory int  // 0: no eviction is remembered
	NoTiming        bool // WithTiming(false)
	Sampling        int  // 0: exact selection
	Logger          *slog.Logger
	tuned           tunable // the strategy-specific options given
	errs            []error
}

// The defaults of the options.
const (
	defaultTickDuration    = time.Nanosecond
	defaultSLRUThreshold   = 2
	defaultCostAlpha       = 2.0
	defaultLifetimeHorizon = 30 * time.Second
	// defaultEvictionHistory is how many recent evictions a policy
	// remembers for re-prefill detection and fairness.
	defaultEvictionHistory = 1 << 16
	// defaultGhostCap is how many evicted candidates an adaptive strategy
	// remembers.
	defaultGhostCap = 1 << 16
	// defaultCapacity is how many candidates an adaptive strategy's cache
	// holds.
	defaultCapacity = 4096
	// maxCapacity bounds the capacity so that a history's node indices fit
	// an int32.
	maxCapacity = 1 << 28
)

// newConfig returns the default configuration with opts applied in order;
// nil options are skipped.
func newConfig(opts []Option) config {
	cfg := config{
		Config: rank.Config{
			TickDuration:    defaultTickDuration,
			SLRUThreshold:   defaultSLRUThreshold,
			CostAlpha:       defaultCostAlpha,
			LifetimeHorizon: defaultLifetimeHorizon,
			Capacity:        defaultCapacity,
			GhostCap:        defaultGhostCap,
		},
		EvictionHistory: defaultEvictionHistory,
	}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&cfg)
		}
	}
	return cfg
}

// reject records an invalid option value, as an error matching
// [ErrInvalidArgument] that resolve returns.
func (c *config) reject(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...))
}

// tunable is one strategy-specific option, a bit of config.tuned and of
// strategyInfo.Tunes. The other options apply to every strategy.
type tunable uint16

// The strategy-specific options.
const (
	tuneCapacity tunable = 1 << iota
	tuneSampling
	tuneLFUHalfLife
	tuneSLRUThreshold
	tuneCostAlpha
	tuneCostDecay
	tuneLifetimeHorizon
	tuneGhostCap
	tuneBelow
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
	case tuneBelow:
		return "WithTierBelow"
	default:
		return "WithLifetimeHorizon"
	}
}

// tunedBy lists the strategies that option t tunes, for error messages.
func tunedBy(t tunable) string {
	var names []string
	for _, info := range strategies {
		if info.Tunes&t != 0 {
			names = append(names, string(info.Name))
		}
	}
	return strings.Join(names, ", ")
}

// constructor names what a configuration is for, as a caller knows it:
// strategy-specific options must tune the strategy, WithSampling only a
// Policy's selection, and WithCapacity, in sequences, no tree.
type constructor string

// The constructors.
const (
	forPolicy constructor = "New"
	forIndex  constructor = "NewIndex"
	forTree   constructor = "prefix.New"
)

// resolve looks up strategy s and applies opts for constructor ctor. It
// refuses, with an error matching [ErrInvalidArgument], an invalid value
// and an option that tunes neither the strategy nor what ctor builds, so
// that no option is ignored silently, and an unknown name with
// unknownStrategy's error.
func resolve(s Strategy, opts []Option, ctor constructor) (strategyInfo, config, error) {
	cfg := newConfig(opts)
	info, ok := lookup(s)
	if !ok {
		return strategyInfo{}, cfg, unknownStrategy(string(s))
	}
	errs := cfg.errs
	allowed := info.Tunes
	if ctor != forPolicy {
		allowed &^= tuneSampling
	}
	tuned := cfg.tuned
	if ctor == forTree && tuned&tuneCapacity != 0 {
		// The tree's capacity is in blocks, an argument of its constructor.
		errs = append(errs, fmt.Errorf("%w: WithCapacity counts sequences, and a tree's candidates are blocks: give the pool's size in blocks as prefix.New's capacity", ErrInvalidArgument))
		tuned &^= tuneCapacity
	}
	if ctor == forTree && tuned&tuneBelow != 0 {
		errs = append(errs, fmt.Errorf("%w: WithTierBelow applies to New and NewIndex, not to a prefix tree", ErrInvalidArgument))
		tuned &^= tuneBelow
	}
	for t := tunable(1); t != 0 && t <= tuned; t <<= 1 {
		if tuned&t == 0 || allowed&t != 0 {
			continue
		}
		if info.Tunes&t != 0 { // WithSampling outside New
			// New serves it: a known thing this constructor cannot.
			errs = append(errs, fmt.Errorf("%w: %s does not apply to %s, only to New (%w)", ErrInvalidArgument, t, ctor, errors.ErrUnsupported))
			continue
		}
		errs = append(errs, fmt.Errorf("%w: %s does not tune strategy %q (it tunes %s)", ErrInvalidArgument, t, s, tunedBy(t)))
	}
	if err := errors.Join(errs...); err != nil {
		return strategyInfo{}, cfg, err
	}
	return info, cfg, nil
}

// Package prefix's tree takes these options too, by the rules above, but
// can call neither resolve nor an Option, which is opaque: it calls
// resolveTree through internal/bridge, whose documentation says why that
// is a variable set here rather than a method of the options.
func init() { bridge.ResolveTree = resolveTree }

// resolveTree is resolve for prefix.New, whose options are the tree's
// []Option.
func resolveTree(s string, opts any) (rank.Kind, rank.Config, error) {
	info, cfg, err := resolve(Strategy(s), opts.([]Option), forTree)
	return info.Kind, cfg.Config, err
}
