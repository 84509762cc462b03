package sim

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/tier"
)

// clockCost is the cost model of the tests in time: llama-3-8b on the h100
// preset, in blocks of blockTokens.
func clockCost(t testing.TB, blockTokens int) *tier.Cost {
	t.Helper()
	m, err := tier.LookupModel("llama-3-8b")
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := tier.LookupGPU("h100")
	if err != nil {
		t.Fatal(err)
	}
	c, err := tier.NewCost(m, blockTokens, gpu.Compute(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestServeMD1 holds one engine to queueing theory: one sequence at a time
// (MaxBatch 1), prompts of one length that share nothing, one output token
// each (computed by the prefill's step) and Poisson arrivals make an M/D/1
// queue, whose mean time in the system is service + rho x service /
// (2 (1 - rho)) (the Pollaczek-Khinchine formula with no variance of the
// service). The mean TTFT must be within 5% of it at utilisation 0.5 and
// 0.8, for each of three seeds.
func TestServeMD1(t *testing.T) {
	const (
		blockTokens = 512
		prompt      = 2048
		requests    = 20000
	)
	cost := clockCost(t, blockTokens)
	service := cost.Step(tier.Step{Tokens: prompt, FLOPs: cost.Model().PrefillFLOPs(0, prompt)}).Seconds()
	for _, rho := range []float64{0.5, 0.8} {
		for seed := uint64(1); seed <= 3; seed++ {
			rng := rand.New(rand.NewPCG(seed, 0))
			w := &Workload{Name: "md1", BlockTokens: blockTokens, GroupKind: "tenant"}
			at := 0.0 // seconds
			for i := range requests {
				at += rng.ExpFloat64() * service / rho
				ids := make([]uint64, prompt/blockTokens)
				for j := range ids {
					ids[j] = uint64(i*len(ids) + j)
				}
				w.Requests = append(w.Requests, Request{Timestamp: int64(math.Round(at * 1000)),
					InputTokens: prompt, OutputTokens: 1, HashIDs: ids, Group: uint64(i)})
			}
			rep, err := Serve(w, kvevict.LRU, ServeConfig{Config: Config{Capacity: 64}, EngineConfig: EngineConfig{Cost: cost, MaxBatch: 1}})
			if err != nil {
				t.Fatal(err)
			}
			checkReport(t, &rep)
			want := service + rho*service/(2*(1-rho))
			if got := rep.TTFTMean; math.Abs(got-want) > 0.05*want {
				t.Errorf("rho %.1f, seed %d: mean TTFT %.4fs, M/D/1 gives %.4fs (service %.4fs)", rho, seed, got, want, service)
			}
		}
	}
}

// TestServeClockInvariants runs the engine in time on every synthetic
// workload, with and without caps: the pool's accounting holds after every
// event, Little's law holds (checkReport), and the times are ordered as
// they must be (TTFT <= E2E, percentiles rising).
func TestServeClockInvariants(t *testing.T) {
	skipUnderRace(t)
	t.Parallel()
	for _, name := range WorkloadNames() {
		n, capacity := 150, 160
		switch name {
		case "multiturn":
			n, capacity = 16, 700
		case "agentic":
			n, capacity = 100, 400
		}
		w, err := Synthetic(name, 1, n)
		if err != nil {
			t.Fatal(err)
		}
		cost := clockCost(t, w.BlockTokens)
		for _, caps := range []struct{ batch, budget int }{{0, 0}, {4, 512}, {256, 8192}} {
			cfg := ServeConfig{Config: Config{Capacity: capacity}, afterStep: func(p *pool) {
				checkPool(t, p)
				if p.clock.maxBatch > 0 && len(p.running) > p.clock.maxBatch {
					t.Fatalf("%d running, max batch %d", len(p.running), p.clock.maxBatch)
				}
			}, EngineConfig: EngineConfig{Cost: cost, MaxBatch: caps.batch, TokenBudget: caps.budget}}
			rep, err := Serve(w, kvevict.LRU, cfg)
			if err != nil {
				t.Fatalf("%s %+v: %v", name, caps, err)
			}
			checkReport(t, &rep)
			tm := rep.Times
			if tm == nil {
				t.Fatalf("%s: a run with a cost model reports no times", name)
			}
			if !(tm.TTFTP50 <= tm.TTFTP90 && tm.TTFTP90 <= tm.TTFTP99 && tm.E2EP50 <= tm.E2EP99 && tm.TTFTMean <= tm.E2EMean) {
				t.Errorf("%s %+v: times out of order: %+v", name, caps, *tm)
			}
			if tm.TTFTP50 <= 0 || tm.ThroughputTokensPerS <= 0 || tm.BusiestUtilization > 1 {
				t.Errorf("%s %+v: implausible times %+v", name, caps, *tm)
			}
		}
	}
}

// TestServeClockBatchCap: a cap of one sequence serves requests one at a
// time, so that a second request arriving with the first waits for all of
// its decode: its TTFT is at least the first's E2E.
func TestServeClockBatchCap(t *testing.T) {
	cost := clockCost(t, 16)
	w := &Workload{Name: "two", BlockTokens: 16, GroupKind: "tenant", Requests: []Request{
		{InputTokens: 32, OutputTokens: 50, HashIDs: []uint64{1, 2}, Group: 1},
		{InputTokens: 32, OutputTokens: 50, HashIDs: []uint64{3, 4}, Group: 2},
	}}
	one, err := Serve(w, kvevict.LRU, ServeConfig{Config: Config{Capacity: 20}, EngineConfig: EngineConfig{Cost: cost, MaxBatch: 1}})
	if err != nil {
		t.Fatal(err)
	}
	both, err := Serve(w, kvevict.LRU, ServeConfig{Config: Config{Capacity: 20}, EngineConfig: EngineConfig{Cost: cost}})
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, &one)
	checkReport(t, &both)
	// One at a time: the second's TTFT is the first's E2E plus its own
	// prefill, so the largest TTFT passes the smallest E2E.
	if one.TTFTP99 < one.E2EP50 {
		t.Errorf("max batch 1: TTFT p99 %.4fs below E2E p50 %.4fs: the second did not wait", one.TTFTP99, one.E2EP50)
	}
	if both.TTFTP99 >= both.E2EP50 {
		t.Errorf("no cap: TTFT p99 %.4fs, E2E p50 %.4fs: the two should run together", both.TTFTP99, both.E2EP50)
	}
	if one.MeanRunning > 1 {
		t.Errorf("max batch 1: %.3f sequences running on average", one.MeanRunning)
	}
	// Goodput at a TTFT SLO of 100 ms: the first's prefill of 32 tokens is
	// a step bound by reading the weights (about 5 ms), the second waits for
	// the first's 50 decode steps of about 5 ms each first: one of two
	// keeps the SLO one at a time, both together.
	for _, c := range []struct {
		batch int
		want  float64
	}{{1, 0.5}, {0, 1}} {
		rep, err := Serve(w, kvevict.LRU, ServeConfig{Config: Config{Capacity: 20}, EngineConfig: EngineConfig{Cost: cost, MaxBatch: c.batch, SLO: 100 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Goodput != c.want {
			t.Errorf("max batch %d: goodput %v, want %v", c.batch, rep.Goodput, c.want)
		}
	}
}

func TestServeEngineRefusals(t *testing.T) {
	w, _ := Synthetic("chat", 1, 10)
	tenants, _ := Synthetic("tenants", 1, 10)
	cost := clockCost(t, w.BlockTokens)
	for _, c := range []struct {
		name string
		w    *Workload
		cfg  ServeConfig
	}{
		{"token time with cost", w, ServeConfig{TokenTime: time.Millisecond, EngineConfig: EngineConfig{Cost: cost}}},
		{"blocks of another size", w, ServeConfig{EngineConfig: EngineConfig{Cost: clockCost(t, w.BlockTokens+1)}}},
		{"negative max batch", w, ServeConfig{EngineConfig: EngineConfig{MaxBatch: -1}}},
		{"max batch too large", w, ServeConfig{EngineConfig: EngineConfig{MaxBatch: MaxBatchLimit + 1}}},
		{"negative budget", w, ServeConfig{EngineConfig: EngineConfig{Cost: cost, TokenBudget: -1}}},
		{"budget without a clock", w, ServeConfig{EngineConfig: EngineConfig{TokenBudget: 100}}},
		{"unknown loop", w, ServeConfig{EngineConfig: EngineConfig{Loop: "half"}}},
		{"closed loop without sessions", tenants, ServeConfig{EngineConfig: EngineConfig{Loop: LoopClosed}}},
		{"negative SLO", w, ServeConfig{EngineConfig: EngineConfig{Cost: cost, SLO: -1}}},
		{"SLO without a clock", w, ServeConfig{EngineConfig: EngineConfig{TPOTSLO: time.Second}}},
	} {
		c.cfg.Capacity = 100
		if _, err := Serve(c.w, kvevict.LRU, c.cfg); !errors.Is(err, kvevict.ErrInvalidArgument) {
			t.Errorf("%s: err = %v, want ErrInvalidArgument", c.name, err)
		}
	}
}

// TestServeLoop: open loop, every request arrives at its timestamp; closed
// loop (the default for sessions), never before it, and on agentic, whose
// turns wait for their tool calls, an engine held to two sequences at once
// sends some later turns late.
func TestServeLoop(t *testing.T) {
	w, err := Synthetic("agentic", 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	cost := clockCost(t, w.BlockTokens)
	late := map[Loop]int{}
	for _, loop := range []Loop{LoopOpen, ""} {
		var arrival []int64
		cfg := ServeConfig{Config: Config{Capacity: 400}, afterStep: func(p *pool) { arrival = p.clock.rec.arrival }, EngineConfig: EngineConfig{Cost: cost, MaxBatch: 2, Loop: loop}}
		rep, err := Serve(w, kvevict.LRU, cfg)
		if err != nil {
			t.Fatal(err)
		}
		checkReport(t, &rep)
		for r, at := range arrival {
			ts := w.Requests[r].Timestamp * 1000
			switch {
			case at < ts:
				t.Fatalf("loop %q: request %d arrived at %d, before its timestamp %d", loop, r, at, ts)
			case at > ts:
				late[loop]++
			}
		}
	}
	if late[LoopOpen] != 0 || late[""] == 0 {
		t.Errorf("requests arriving after their timestamps: open loop %d (want 0), closed %d (want some)", late[LoopOpen], late[""])
	}
}
