package kvevict

import (
	"errors"
	"fmt"
	"math"

	"github.com/sagellm/kvevict/internal/rank"
)

func init() { rank.Register(newRanker) }

// ranker is a key strategy's [rank.Ranker], for package prefix's tree,
// which keeps its own order outside a [Policy]. It is immutable.
type ranker struct {
	params keyParams
}

// newRanker returns the ranker of key strategy s, configured by the same
// options as [New] but [WithSampling]. An adaptive strategy returns an error
// matching [errors.ErrUnsupported].
func newRanker(s string, opts ...Option) (rank.Ranker[Candidate], error) {
	info, cfg, err := resolve(Strategy(s), opts, forRanker)
	if err != nil {
		return nil, err
	}
	if info.history != nil {
		return nil, fmt.Errorf("kvevict: a ranker of %q: %w: it ranks by a history of its own, not by a key", s, errors.ErrUnsupported)
	}
	return &ranker{params: newKeyParams(info.kind, &cfg)}, nil
}

// KeyAt returns c's key at tick now. Only FrequencyCost with decay reads now.
// O(1).
func (r *ranker) KeyAt(c Candidate, now int64) rank.Key {
	p := r.params
	p.now = now
	return p.keyOf(&c)
}

// UsesNow reports whether keys depend on the current tick.
func (r *ranker) UsesNow() bool { return r.params.usesNow }

// keyKind says which strategy's key keyParams.keyOf computes.
type keyKind uint8

const (
	kindLRU keyKind = iota
	kindMRU
	kindFIFO
	kindFILO
	kindLFU
	kindSLRU
	kindQoS
	kindPredictive
	kindCost
	kindHistory // an adaptive strategy: no key, strategyInfo.history ranks
)

// keyOf returns the strategy's key for an evictable candidate: a pure
// function of the candidate and the parameters. The selection, the prefix
// tree and the index all rank through it. A switch rather than a function
// value lets the simple keys inline, so that ranking a candidate costs no
// call.
func (p *keyParams) keyOf(c *Candidate) rank.Key {
	if p.kind == kindLRU {
		return lruKey(c, p) // inlined: the most used strategy pays no call
	}
	return p.otherKey(c)
}

func (p *keyParams) otherKey(c *Candidate) rank.Key {
	switch p.kind {
	case kindLRU:
		return lruKey(c, p)
	case kindMRU:
		return mruKey(c, p)
	case kindFIFO:
		return fifoKey(c, p)
	case kindFILO:
		return filoKey(c, p)
	case kindLFU:
		return lfuKey(c, p)
	case kindSLRU:
		return slruKey(c, p)
	case kindQoS:
		return qosKey(c, p)
	case kindPredictive:
		return predictiveKey(c, p)
	default:
		return costKey(c, p)
	}
}

// keyParams are a strategy and its parameters in tick units, precomputed
// by New.
type keyParams struct {
	kind             keyKind
	lfuHalfLifeTicks float64 // 0: no decay
	slruThreshold    int
	costAlpha        float64
	costPow          []float64 // costPow[b] = b^costAlpha for small b
	costDecayPerTick float64
	tickNanos        float64 // nanoseconds per tick
	horizonTicks     int64

	usesNow bool  // the key reads now
	now     int64 // the call's current tick: the largest LastAccess among its candidates
}

// costPowTableSize bounds the table of b^alpha that spares FrequencyCost a
// math.Pow per candidate; longer sequences call math.Pow.
const costPowTableSize = 1024

func newKeyParams(kind keyKind, cfg *config) keyParams {
	tick := float64(cfg.tickDuration)
	p := keyParams{
		kind:             kind,
		slruThreshold:    cfg.slruThreshold,
		costAlpha:        cfg.costAlpha,
		costDecayPerTick: cfg.costDecay * tick / 1e9,
		tickNanos:        tick,
		horizonTicks:     saturatingTicks(float64(cfg.lifetimeHorizon) / tick),
	}
	p.usesNow = kind == kindCost && p.costDecayPerTick > 0
	if cfg.lfuHalfLife > 0 {
		p.lfuHalfLifeTicks = float64(cfg.lfuHalfLife) / tick
	}
	p.costPow = make([]float64, costPowTableSize)
	for b := range p.costPow {
		p.costPow[b] = math.Pow(float64(b), cfg.costAlpha)
	}
	return p
}

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
