package rank

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Errors of configuration, which kvevict exports under the same names.
var (
	// ErrInvalidArgument: a negative requiredBlocks, or an invalid option.
	ErrInvalidArgument = errors.New("kvevict: invalid argument")
	// ErrUnknownStrategy: a name that is none of the strategies.
	ErrUnknownStrategy = errors.New("kvevict: unknown strategy")
)

// Config is what kvevict's options set. kvevict's constructors and package
// prefix's each start from [DefaultConfig], apply the caller's options and
// check the result with [Resolve].
type Config struct {
	TickDuration    time.Duration
	LFUHalfLife     time.Duration
	SLRUThreshold   int
	CostAlpha       float64
	CostDecay       float64 // per second
	LifetimeHorizon time.Duration
	EvictionHistory int  // 0: no eviction is remembered
	GhostCap        int  // evicted candidates an adaptive strategy remembers
	NoTiming        bool // WithTiming(false)
	Sampling        int  // 0: exact selection
	Capacity        int  // an adaptive strategy's cache size, in sequences
	Logger          *slog.Logger
	Tuned           Tunable // the strategy-specific options given
	Errs            []error
}

// The defaults of the options.
const (
	defaultTickDuration    = time.Nanosecond
	defaultSLRUThreshold   = 2
	defaultCostAlpha       = 2.0
	defaultLifetimeHorizon = 30 * time.Second
	// DefaultEvictionHistory is how many recent evictions a policy
	// remembers for re-prefill detection and fairness.
	DefaultEvictionHistory = 1 << 16
	// DefaultGhostCap is how many evicted candidates an adaptive strategy
	// remembers.
	DefaultGhostCap = 1 << 16
	// DefaultCapacity is how many candidates an adaptive strategy's cache
	// holds.
	DefaultCapacity = 4096
	// MaxCapacity bounds the capacity so node indices fit an int32.
	MaxCapacity = 1 << 28
)

// DefaultConfig returns the configuration no option changed.
func DefaultConfig() Config {
	return Config{
		TickDuration:    defaultTickDuration,
		SLRUThreshold:   defaultSLRUThreshold,
		CostAlpha:       defaultCostAlpha,
		LifetimeHorizon: defaultLifetimeHorizon,
		EvictionHistory: DefaultEvictionHistory,
		GhostCap:        DefaultGhostCap,
		Capacity:        DefaultCapacity,
	}
}

// Apply returns the default configuration with opts applied in order; nil
// options are skipped.
func Apply[O ~func(*Config)](opts []O) Config {
	cfg := DefaultConfig()
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	return cfg
}

// Reject records an invalid option value, as an error matching
// [ErrInvalidArgument] that [Resolve] returns.
func (c *Config) Reject(format string, args ...any) {
	c.Errs = append(c.Errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...))
}

// Constructor names what a configuration is for: strategy-specific
// options must tune the strategy, WithSampling only a Policy's selection,
// and WithCapacity, in sequences, no tree.
type Constructor string

// The constructors, named as a caller knows them.
const (
	ForPolicy Constructor = "New"
	ForIndex  Constructor = "NewIndex"
	ForTree   Constructor = "prefix.New"
)

// Resolve looks up strategy name and checks cfg for constructor ctor: it
// refuses, with an error matching [ErrInvalidArgument], an invalid value
// and an option that tunes neither the strategy nor what ctor builds, so
// that no option is ignored silently, and an unknown name with
// [UnknownStrategy]'s error.
func Resolve(name string, cfg *Config, ctor Constructor) (Info, error) {
	info, ok := Lookup(name)
	if !ok {
		return Info{}, UnknownStrategy(name)
	}
	errs := cfg.Errs
	allowed := info.Tunes
	if ctor != ForPolicy {
		allowed &^= TuneSampling
	}
	tuned := cfg.Tuned
	if ctor == ForTree && tuned&TuneCapacity != 0 {
		// The tree's capacity is in blocks, an argument of its constructor.
		errs = append(errs, fmt.Errorf("%w: WithCapacity counts sequences, and a tree's candidates are blocks: give the pool's size in blocks as prefix.New's capacity", ErrInvalidArgument))
		tuned &^= TuneCapacity
	}
	for t := Tunable(1); t != 0 && t <= tuned; t <<= 1 {
		if tuned&t == 0 || allowed&t != 0 {
			continue
		}
		if info.Tunes&t != 0 { // WithSampling outside New
			errs = append(errs, fmt.Errorf("%w: %s does not apply to %s, only to New", ErrInvalidArgument, t, ctor))
			continue
		}
		errs = append(errs, fmt.Errorf("%w: %s does not tune strategy %q (it tunes %s)", ErrInvalidArgument, t, name, tunedBy(t)))
	}
	if err := errors.Join(errs...); err != nil {
		return Info{}, err
	}
	return info, nil
}

// Tunable is one strategy-specific option, a bit of Config.Tuned and of
// Info.Tunes. The other options apply to every strategy.
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
	default:
		return "WithLifetimeHorizon"
	}
}

// tunedBy lists the strategies that option t tunes, for error messages.
func tunedBy(t Tunable) string {
	var names []string
	for _, info := range strategies {
		if info.Tunes&t != 0 {
			names = append(names, info.Name)
		}
	}
	return strings.Join(names, ", ")
}
