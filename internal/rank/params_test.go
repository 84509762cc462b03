package rank

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestFastKeysMatchGeneral checks that the inlined common cases of the
// Predictive and FrequencyCost keys give exactly the general keys, on random
// candidates and on the edges: huge lifetimes and ticks, negative ticks,
// SeqLen past MaxLen, no accesses, sequences past the power table, and
// other tick sizes, horizons and exponents.
func TestFastKeysMatchGeneral(t *testing.T) {
	configs := []func(*Config){
		func(*Config) {},
		func(c *Config) { c.TickDuration = time.Microsecond },
		func(c *Config) { c.TickDuration, c.LifetimeHorizon = 3*time.Nanosecond, 1000*time.Hour },
		func(c *Config) { c.CostAlpha = 0 },
		func(c *Config) { c.CostAlpha = 0.5 },
		func(c *Config) { c.CostAlpha = 300 }, // b^alpha overflows to +Inf
		func(c *Config) { c.TickDuration, c.LifetimeHorizon = time.Hour, time.Duration(math.MaxInt64) },
	}
	edges := []int64{math.MinInt64, -1, 0, 1, 1 << 53, 1<<62 - 1, 1 << 62, 1<<62 + 1, math.MaxInt64 - 1, math.MaxInt64}
	rng := rand.New(rand.NewPCG(5, 6))
	pick := func() int64 {
		if rng.IntN(3) == 0 {
			return edges[rng.IntN(len(edges))]
		}
		return rng.Int64N(1 << 40)
	}
	checked := [2]int{}
	for _, set := range configs {
		cfg := testConfig()
		set(&cfg)
		p := NewParams(KindPredictive, &cfg)
		cost := NewParams(KindCost, &cfg)
		for range 20_000 {
			f := Fields{
				Blocks:            rng.IntN(2000),
				LastAccess:        pick(),
				AccessCount:       int(max(pick(), 0)) % 1000,
				EstimatedLifetime: time.Duration(max(pick(), 0)),
				SeqLen:            int(max(pick(), 0)),
				MaxLen:            int(max(pick(), 0)),
			}
			if rng.IntN(2) == 0 {
				f.EstimatedLifetime = 0
			}
			if rng.IntN(3) == 0 {
				f.MaxLen = rng.IntN(4096)
				f.SeqLen = rng.IntN(5000)
			}
			if got, ok := PredictiveKeyFast(f.LastAccess, f.EstimatedLifetime, f.SeqLen, f.MaxLen, &p); ok {
				checked[0]++
				if want := predictiveKeyGeneral(f.LastAccess, f.EstimatedLifetime, f.SeqLen, f.MaxLen, &p); got != want {
					t.Fatalf("predictive %+v: fast key %v, general %v", f, got, want)
				}
			}
			if got, ok := CostKeyFast(f.AccessCount, f.Blocks, f.LastAccess, &cost); ok {
				checked[1]++
				if want := costKeyGeneral(f.AccessCount, f.Blocks, f.LastAccess, 0, &cost); got != want {
					t.Fatalf("cost %+v: fast key %v, general %v", f, got, want)
				}
			}
		}
	}
	if checked[0] < 10_000 || checked[1] < 10_000 {
		t.Errorf("fast paths taken %v times: the test does not exercise them", checked)
	}
}

// testConfig is the configuration of kvevict's default options.
func testConfig() Config {
	return Config{
		TickDuration:    time.Nanosecond,
		SLRUThreshold:   2,
		CostAlpha:       2,
		LifetimeHorizon: 30 * time.Second,
		Capacity:        4096,
		GhostCap:        1 << 16,
	}
}

// TestParams: only FrequencyCost with decay reads now; QoSAware ranks a
// low priority before a high one, whatever their recency.
func TestParams(t *testing.T) {
	cfg := testConfig()
	decay := testConfig()
	decay.CostDecay = 1
	if p := NewParams(KindCost, &decay); !p.UsesNow() {
		t.Error("decaying FrequencyCost keys do not read now")
	}
	if p := NewParams(KindLRU, &decay); p.UsesNow() {
		t.Error("LRU keys read now")
	}
	p := NewParams(KindQoS, &cfg)
	low, high := Fields{Priority: 0, LastAccess: 9}, Fields{Priority: 2, LastAccess: 1}
	if c := p.Key(&low, 9).Compare(p.Key(&high, 9)); c != -1 {
		t.Fatalf("QoSAware: low compares %d to high, want -1", c)
	}
}
