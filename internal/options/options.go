// Package options holds kvevict's strategies and the resolution of its
// options, for package kvevict's constructors and package prefix's tree
// alike: the table of strategies (each one's name, the mechanism it ranks
// by and the options that tune it), the configuration the options set,
// and the rules by which a constructor refuses an option. kvevict's
// Option is this package's, so that a tree resolves the options it is
// given as kvevict.New does, and stays opaque: only this package applies
// one. The words users read (each option's doc, its default and its
// valid values) are kvevict's.
package options

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sagellm/kvevict/internal/rank"
)

// The errors kvevict exports as its own: ErrInvalidArgument and
// ErrUnknownStrategy.
var (
	ErrInvalidArgument = errors.New("kvevict: invalid argument")
	ErrUnknownStrategy = errors.New("kvevict: unknown strategy")
)

// Option is kvevict.Option: it records its value in a Config, or refuses
// it. Config is internal, so only kvevict's With functions make one: the
// idiom of every option in kvevict's modules, a function over a
// configuration its users cannot name.
type Option func(*Config)

// Config is what the options set: the parameters of the mechanisms, which
// package prefix's tree shares, and those only a Policy or an Index reads;
// then which strategy-specific options were given and the invalid values,
// for Resolve to check.
type Config struct {
	rank.Config
	EvictionHistory int  // 0: no eviction is remembered
	NoTiming        bool // WithTiming(false)
	Sampling        int  // 0: exact selection
	Logger          *slog.Logger
	tuned           Tunable // the strategy-specific options given
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
	// MaxCapacity bounds the capacity so that a history's node indices
	// fit an int32.
	MaxCapacity = 1 << 28
)

// newConfig returns the default configuration with opts applied in order;
// nil options are skipped.
func newConfig(opts []Option) Config {
	cfg := Config{
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
			opt(&cfg)
		}
	}
	return cfg
}

// Tune records that strategy-specific option t was given, for Resolve to
// check that the strategy takes it.
func (c *Config) Tune(t Tunable) { c.tuned |= t }

// Reject records an invalid option value, as an error matching
// ErrInvalidArgument that Resolve returns.
func (c *Config) Reject(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...))
}

// Tunable is one strategy-specific option, a bit of what a Config records
// and of Info.Tunes. The other options apply to every strategy.
type Tunable uint16

// The strategy-specific options.
const (
	TuneCapacity Tunable = 1 << iota
	TuneSampling
	TuneLFUHalfLife
	TuneSLRUThreshold
	TuneCostAlpha
	TuneCostDecay
	TuneLifetimeHorizon
	TuneGhostCap
	TuneBelow
)

// String returns the option's name.
func (t Tunable) String() string {
	switch t {
	case TuneCapacity:
		return "WithCapacity"
	case TuneSampling:
		return "WithSampling"
	case TuneLFUHalfLife:
		return "WithLFUHalfLife"
	case TuneSLRUThreshold:
		return "WithSLRUThreshold"
	case TuneCostAlpha:
		return "WithCostAlpha"
	case TuneCostDecay:
		return "WithCostDecay"
	case TuneGhostCap:
		return "WithGhostCap"
	case TuneBelow:
		return "WithTierBelow"
	default:
		return "WithLifetimeHorizon"
	}
}

// Constructor names what a configuration is for, as a caller knows it:
// strategy-specific options must tune the strategy, WithSampling only a
// Policy's selection, and WithCapacity, in sequences, no tree.
type Constructor string

// The constructors.
const (
	ForPolicy Constructor = "New"
	ForIndex  Constructor = "NewIndex"
	ForTree   Constructor = "prefix.New"
)

// Resolve looks up strategy name and applies opts for constructor ctor. It
// refuses, with an error matching ErrInvalidArgument, an invalid value and
// an option that tunes neither the strategy nor what ctor builds, so that
// no option is ignored silently, and an unknown name with Unknown's error.
func Resolve(name string, opts []Option, ctor Constructor) (Info, Config, error) {
	cfg := newConfig(opts)
	info, ok := Lookup(name)
	if !ok {
		return Info{}, cfg, Unknown(name)
	}
	errs := cfg.errs
	allowed := info.Tunes
	if ctor != ForPolicy {
		allowed &^= TuneSampling
	}
	tuned := cfg.tuned
	if ctor == ForTree && tuned&TuneCapacity != 0 {
		// The tree's capacity is in blocks, an argument of its constructor.
		errs = append(errs, fmt.Errorf("%w: WithCapacity counts sequences, and a tree's candidates are blocks: give the pool's size in blocks as prefix.New's capacity", ErrInvalidArgument))
		tuned &^= TuneCapacity
	}
	if ctor == ForTree && tuned&TuneBelow != 0 {
		errs = append(errs, fmt.Errorf("%w: WithTierBelow applies to New and NewIndex, not to a prefix tree", ErrInvalidArgument))
		tuned &^= TuneBelow
	}
	for t := Tunable(1); t != 0 && t <= tuned; t <<= 1 {
		if tuned&t == 0 || allowed&t != 0 {
			continue
		}
		if info.Tunes&t != 0 { // WithSampling outside New
			// New serves it: a known thing this constructor cannot.
			errs = append(errs, fmt.Errorf("%w: %s does not apply to %s, only to New (%w)", ErrInvalidArgument, t, ctor, errors.ErrUnsupported))
			continue
		}
		errs = append(errs, fmt.Errorf("%w: %s does not tune strategy %q (it tunes %s)", ErrInvalidArgument, t, name, tunedBy(t)))
	}
	if err := errors.Join(errs...); err != nil {
		return Info{}, cfg, err
	}
	return info, cfg, nil
}

// tunedBy lists the strategies that option t tunes, for error messages.
func tunedBy(t Tunable) string {
	var names []string
	for _, info := range table {
		if info.Tunes&t != 0 {
			names = append(names, info.Name)
		}
	}
	return strings.Join(names, ", ")
}
