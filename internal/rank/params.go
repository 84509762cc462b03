package rank

import (
	"math"
	"time"
)

// Fields are what a strategy's key reads of a candidate: a kvevict
// Candidate's fields, or a prefix tree node's, which is a candidate of one
// block.
type Fields struct {
	LastAccess        int64 // tick of the latest access
	CreatedAt         int64 // tick at which it entered the cache
	AccessCount       int   // hits so far, at least 0
	Priority          int8  // QoS class
	Blocks            int   // how many blocks it holds
	EstimatedLifetime time.Duration
	SeqLen, MaxLen    int
}

// Params are a key strategy and its parameters in tick units, computed
// once from a [Config] by [NewParams]. They are immutable.
type Params struct {
	kind             Kind
	lfuHalfLifeTicks float64 // 0: no decay
	slruThreshold    int
	costAlpha        float64
	costPow          []float64 // costPow[b] = b^costAlpha for small b
	costDecayPerTick float64
	tickNanos        float64 // nanoseconds per tick
	horizonTicks     int64
	usesNow          bool // the key reads now
}

// costPowTableSize bounds the table of b^alpha that spares FrequencyCost a
// math.Pow per candidate; longer sequences call math.Pow.
const costPowTableSize = 1024

// NewParams returns the parameters of key strategy k under cfg.
func NewParams(k Kind, cfg *Config) Params {
	tick := float64(cfg.TickDuration)
	p := Params{
		kind:             k,
		slruThreshold:    cfg.SLRUThreshold,
		costAlpha:        cfg.CostAlpha,
		costDecayPerTick: costDecayPerTick(cfg),
		tickNanos:        tick,
		horizonTicks:     saturatingTicks(float64(cfg.LifetimeHorizon) / tick),
	}
	p.usesNow = UsesNow(k, cfg)
	if cfg.LFUHalfLife > 0 {
		p.lfuHalfLifeTicks = float64(cfg.LFUHalfLife) / tick
	}
	p.costPow = make([]float64, costPowTableSize)
	for b := range p.costPow {
		p.costPow[b] = math.Pow(float64(b), cfg.CostAlpha)
	}
	return p
}

// UsesNow reports whether the keys of strategy k under cfg depend on the
// current tick (FrequencyCost with decay), as [Params.UsesNow] of
// NewParams(k, cfg) does, without building them. O(1).
func UsesNow(k Kind, cfg *Config) bool {
	return k == KindCost && costDecayPerTick(cfg) > 0
}

// costDecayPerTick is FrequencyCost's decay per tick under cfg.
func costDecayPerTick(cfg *Config) float64 {
	return cfg.CostDecay * float64(cfg.TickDuration) / 1e9
}

// Kind returns the strategy the keys are of.
func (p *Params) Kind() Kind { return p.kind }

// UsesNow reports whether keys depend on the current tick (FrequencyCost
// with decay), so that a structure keeping candidates in key order must
// re-rank as time passes.
func (p *Params) UsesNow() bool { return p.usesNow }

// saturatingTicks converts a tick count to int64, saturating instead of
// overflowing.
func saturatingTicks(t float64) int64 {
	if t >= math.MaxInt64 {
		return math.MaxInt64
	}
	if t <= math.MinInt64 {
		return math.MinInt64
	}
	return int64(t)
}

// SaturatingAdd returns a+b for b >= 0, clamped at math.MaxInt64.
func SaturatingAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}

// orderedFloat maps a float64 to an int64 with the same order, so float
// keys compare as integers. -0 maps like +0; NaN must not occur.
func orderedFloat(f float64) int64 {
	if f == 0 {
		return 0
	}
	i := int64(math.Float64bits(f))
	if i < 0 {
		i ^= math.MaxInt64
	}
	return i
}
