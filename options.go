package kvevict

import (
	"log/slog"
	"math"
	"time"

	"github.com/sagellm/kvevict/internal/options"
)

// Option configures a policy made by [New] or an index made by [NewIndex].
// Options that tune one kind of strategy (WithCapacity for the adaptive
// strategies, WithSampling for the key strategies' Policy, WithLFUHalfLife
// for LFU, WithSLRUThreshold for SLRU, WithCostAlpha and WithCostDecay for
// FrequencyCost, WithLifetimeHorizon for Predictive) are refused for any
// other; the rest apply everywhere. A refused option or an invalid value
// makes the constructor return an error matching [ErrInvalidArgument] that
// names it.
//
// Package prefix's tree takes them too, through its WithStrategyOptions,
// by the rules its New states.
type Option = options.Option

// WithTickDuration says how long one tick of Candidate.LastAccess and
// CreatedAt is, so that durations (EstimatedLifetime, half-lives, horizons,
// per-second decay) convert to ticks. Default: one nanosecond. Must be > 0.
func WithTickDuration(d time.Duration) Option {
	return func(c *options.Config) {
		if d <= 0 {
			c.Reject("tick duration must be positive, got %v", d)
			return
		}
		c.TickDuration = d
	}
}

// WithLFUHalfLife makes LFU age access counts: a count loses half its weight
// for every half-life that passed since LastAccess. Default 0: no decay, pure
// (AccessCount, LastAccess) order. Must be >= 0.
func WithLFUHalfLife(d time.Duration) Option {
	return func(c *options.Config) {
		c.Tune(options.TuneLFUHalfLife)
		if d < 0 {
			c.Reject("LFU half-life must not be negative, got %v", d)
			return
		}
		c.LFUHalfLife = d
	}
}

// WithSLRUThreshold sets how many accesses move a sequence from SLRU's
// probationary segment to its protected one. Default 2. Must be >= 1.
func WithSLRUThreshold(n int) Option {
	return func(c *options.Config) {
		c.Tune(options.TuneSLRUThreshold)
		if n < 1 {
			c.Reject("SLRU threshold must be at least 1, got %d", n)
			return
		}
		c.SLRUThreshold = n
	}
}

// WithCostAlpha sets FrequencyCost's exponent on the block count: larger
// alpha protects long sequences (expensive to re-prefill) more. Default 2.
// Must be finite and >= 0.
func WithCostAlpha(alpha float64) Option {
	return func(c *options.Config) {
		c.Tune(options.TuneCostAlpha)
		if !(alpha >= 0) || math.IsInf(alpha, 0) {
			c.Reject("cost alpha must be finite and >= 0, got %v", alpha)
			return
		}
		c.CostAlpha = alpha
	}
}

// WithCostDecay sets FrequencyCost's decay per second of idle time: retention
// is divided by 1 + decay x age_seconds. Default 0. Must be finite and >= 0.
func WithCostDecay(perSecond float64) Option {
	return func(c *options.Config) {
		c.Tune(options.TuneCostDecay)
		if !(perSecond >= 0) || math.IsInf(perSecond, 0) {
			c.Reject("cost decay must be finite and >= 0, got %v", perSecond)
			return
		}
		c.CostDecay = perSecond
	}
}

// WithLifetimeHorizon sets how long Predictive expects a sequence to stay
// useful after its last access when nothing better is known; a sequence
// that is a fraction f of the way to MaxLen gets (1-f) of it. Default 30s.
// Must be > 0.
func WithLifetimeHorizon(d time.Duration) Option {
	return func(c *options.Config) {
		c.Tune(options.TuneLifetimeHorizon)
		if d <= 0 {
			c.Reject("lifetime horizon must be positive, got %v", d)
			return
		}
		c.LifetimeHorizon = d
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
	return func(c *options.Config) {
		if n < 0 {
			c.Reject("eviction history must not be negative, got %d", n)
			return
		}
		c.EvictionHistory = n
	}
}

// WithGhostCap bounds how many evicted sequences an adaptive strategy
// remembers as ghosts, by which it recognises a sequence that comes back:
// ARC's lists B1 and B2 together, S3-FIFO's ghost queue (which also holds
// at most its main queue's size) and [Auto]'s ghosts, with the requests
// counted for each. SIEVE keeps no ghosts, and the key strategies no
// history: they refuse it. Default 65,536. Must be >= 1.
func WithGhostCap(n int) Option {
	return func(c *options.Config) {
		c.Tune(options.TuneGhostCap)
		if n < 1 {
			c.Reject("ghost cap must be at least 1, got %d", n)
			return
		}
		c.GhostCap = n
	}
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
	return func(c *options.Config) {
		c.Tune(options.TuneBelow)
		if n < 0 {
			c.Reject("tier below must be at least 0 blocks, got %d", n)
			return
		}
		c.Below = n
	}
}

// WithTiming(false) stops the policy reading the clock around each
// selection, for callers that measure latency themselves: Result.Elapsed,
// Metrics.AvgEvictionTime and P99EvictionTime stay 0. The two clock reads
// can cost more than the rest of a one-victim [Index] eviction, on virtual
// machines whose clock is slow to read. Default: on.
func WithTiming(on bool) Option {
	return func(c *options.Config) { c.NoTiming = !on }
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
	return func(c *options.Config) {
		c.Tune(options.TuneSampling)
		if k < 1 {
			c.Reject("sample size must be at least 1, got %d", k)
			return
		}
		c.Sampling = k
	}
}

// WithLogger logs every eviction at debug level: strategy, victims, freed
// blocks and elapsed time. The policy logs after releasing its lock.
func WithLogger(l *slog.Logger) Option {
	return func(c *options.Config) { c.Logger = l }
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
	return func(c *options.Config) {
		c.Tune(options.TuneCapacity)
		if n < 1 || n > options.MaxCapacity {
			c.Reject("capacity must be in [1, %d], got %d", options.MaxCapacity, n)
			return
		}
		c.Capacity = n
	}
}
