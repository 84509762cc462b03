package kvevict

import (
	"errors"
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
	configs := [][]Option{
		nil,
		{WithTickDuration(time.Microsecond)},
		{WithTickDuration(3 * time.Nanosecond), WithLifetimeHorizon(1000 * time.Hour)},
		{WithCostAlpha(0)},
		{WithCostAlpha(0.5)},
		{WithCostAlpha(300)}, // b^alpha overflows to +Inf
		{WithTickDuration(time.Hour), WithLifetimeHorizon(time.Duration(math.MaxInt64))},
	}
	edges := []int64{math.MinInt64, -1, 0, 1, 1 << 53, 1<<62 - 1, 1 << 62, 1<<62 + 1, math.MaxInt64 - 1, math.MaxInt64}
	rng := rand.New(rand.NewPCG(5, 6))
	pick := func() int64 {
		if rng.IntN(3) == 0 {
			return edges[rng.IntN(len(edges))]
		}
		return rng.Int64N(1 << 40)
	}
	blocks := make([]int, 2000)
	checked := [2]int{}
	for _, opts := range configs {
		cfg := defaultConfig()
		for _, opt := range opts {
			opt(&cfg)
		}
		if err := errors.Join(cfg.errs...); err != nil {
			t.Fatal(err)
		}
		p := newKeyParams(kindPredictive, &cfg)
		cost := newKeyParams(kindCost, &cfg)
		for range 20_000 {
			c := Candidate{
				ID:                rng.Uint64(),
				Blocks:            blocks[:rng.IntN(len(blocks))],
				LastAccess:        pick(),
				AccessCount:       int(max(pick(), 0)) % 1000,
				EstimatedLifetime: time.Duration(max(pick(), 0)),
				SeqLen:            int(max(pick(), 0)),
				MaxLen:            int(max(pick(), 0)),
			}
			if rng.IntN(2) == 0 {
				c.EstimatedLifetime = 0
			}
			if rng.IntN(3) == 0 {
				c.MaxLen = rng.IntN(4096)
				c.SeqLen = rng.IntN(5000)
			}
			if got, ok := predictiveKeyFast(&c, &p); ok {
				checked[0]++
				if want := predictiveKeyGeneral(&c, &p); got != want {
					t.Fatalf("predictive %+v: fast key %v, general %v", c, got, want)
				}
			}
			if got, ok := costKeyFast(&c, &cost); ok {
				checked[1]++
				if want := costKeyGeneral(&c, &cost); got != want {
					t.Fatalf("cost %+v: fast key %v, general %v", c, got, want)
				}
			}
		}
	}
	if checked[0] < 10_000 || checked[1] < 10_000 {
		t.Errorf("fast paths taken %v times: the test does not exercise them", checked)
	}
}
