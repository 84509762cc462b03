package sim

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/tier"
)

// decodeConfig is a cluster of engines engines of capacity blocks that
// decode, on one H100 with llama-3-8b, with caps small enough that the
// synthetic workloads queue.
func decodeConfig(t *testing.T, w *Workload, engines, capacity int) ClusterConfig {
	return ClusterConfig{Config: Config{Capacity: capacity}, Engines: engines, Decode: true,
		EngineConfig: EngineConfig{Cost: clockCost(t, w.BlockTokens), MaxBatch: 32, TokenBudget: 2048}}
}

// TestClusterOneEngineIsServe checks the one model: a cluster of one engine
// that decodes, behind round-robin, is serve mode's pool at block
// granularity, request for request, in the open loop and the closed one,
// with a host tier below the pool and without.
func TestClusterOneEngineIsServe(t *testing.T) {
	for _, name := range []string{"agentic", "multiturn", "chat"} {
		w, err := Synthetic(name, 1, 400)
		if err != nil {
			t.Fatal(err)
		}
		for _, loop := range []Loop{"", LoopOpen} {
			cfg := decodeConfig(t, w, 1, 600)
			cfg.Loop = loop
			if loop == LoopOpen {
				cfg.Tiers = cpuTier(1200, tier.WriteBack, false)
			}
			srv, err := Serve(w, kvevict.LRU, ServeConfig{Config: cfg.Config, Granularity: GranularityBlock, EngineConfig: cfg.EngineConfig, Tiers: cfg.Tiers})
			if err != nil {
				t.Fatal(err)
			}
			checkReport(t, &srv)
			rep, err := Cluster(w, kvevict.LRU, NewRoundRobin(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			checkLittle(t, name+" cluster", &rep.Times)
			st := srv.Times
			if rep.HitRatio != srv.HitRatio || rep.TTFTP99 != st.TTFTP99 || rep.TPOTP99 != st.TPOTP99 ||
				rep.E2EMean != st.E2EMean || rep.Preemptions != srv.Preemptions || rep.MeanInSystem != st.MeanInSystem {
				t.Errorf("%s, loop %q: cluster of one: hit %v ttft p99 %v tpot p99 %v e2e %v preempted %d in system %v; serve: %v %v %v %v %d %v",
					name, loop, rep.HitRatio, rep.TTFTP99, rep.TPOTP99, rep.E2EMean, rep.Preemptions, rep.MeanInSystem,
					srv.HitRatio, st.TTFTP99, st.TPOTP99, st.E2EMean, srv.Preemptions, st.MeanInSystem)
			}
			if !reflect.DeepEqual(rep.Tiers, srv.Tiers) || rep.LoadSeconds != st.LoadSeconds || (cfg.Below != nil) != (st.LoadSeconds > 0) {
				t.Errorf("%s, loop %q: cluster of one: tiers %+v, load %v s; serve: %+v, %v s", name, loop, rep.Tiers, rep.LoadSeconds, srv.Tiers, st.LoadSeconds)
			}
			if srv.Preemptions == 0 && name == "agentic" {
				t.Errorf("%s: no preemption: the pool is too large to test the model under pressure", name)
			}
		}
	}
}

// TestClusterDecodeMirror checks the pools' KV events: a router that
// mirrors them routes as one that reads the pools directly, so the two
// runs are the same run.
func TestClusterDecodeMirror(t *testing.T) {
	w, err := Synthetic("agentic", 2, 600)
	if err != nil {
		t.Fatal(err)
	}
	cfg := decodeConfig(t, w, 3, 500)
	mirror, err := NewMirrorRouter(newExactMirror(3), 0.5)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := NewDirectRouter(0.5)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Cluster(w, kvevict.LRU, mirror, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Cluster(w, kvevict.LRU, direct, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkLittle(t, "mirror", &a.Times)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("mirror of the pools' events: %+v\ndirect: %+v", a, b)
	}
	if a.MispredictedPerRequest != 0 {
		t.Errorf("a mirror of every event mispredicted %v blocks a request", a.MispredictedPerRequest)
	}
	rr, err := Cluster(w, kvevict.LRU, NewRoundRobin(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.HitRatio <= rr.HitRatio {
		t.Errorf("prefix routing hit %.4f, round-robin %.4f: agentic's sessions share their prefixes", a.HitRatio, rr.HitRatio)
	}
}

// TestClusterClosedLoopHalving checks the closed loop across a cluster: on
// agentic under load, half the engines delay the sessions' later turns,
// which arrive after their previous turn's finish, and lengthen the
// sessions.
func TestClusterClosedLoopHalving(t *testing.T) {
	w, err := Synthetic("agentic", 1, 800)
	if err != nil {
		t.Fatal(err)
	}
	delay := map[int]float64{}
	completion := map[int]float64{}
	for _, engines := range []int{4, 2} {
		cfg := decodeConfig(t, w, engines, 400)
		cfg.Speedup = 4
		if err := cfg.checkDecode(w); err != nil {
			t.Fatal(err)
		}
		c, err := newCluster(w, kvevict.LRU, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.run(NewRoundRobin(), &cfg); err != nil {
			t.Fatal(err)
		}
		rep := c.report()
		checkLittle(t, "halving", &rep.Times)
		f := c.fleet
		followers := 0
		for r := range w.Requests {
			if !f.links.follows[r] {
				continue
			}
			followers++
			// A follower's arrival is its timestamp, or later when its
			// previous turn finished late.
			late := f.rec.arrival[r] - f.sent(r)
			if late < 0 {
				t.Fatalf("%d engines: request %d arrived %d µs before its timestamp", engines, r, -late)
			}
			delay[engines] += float64(late) / 1e6
		}
		if followers == 0 {
			t.Fatal("agentic has no session turn that follows another")
		}
		delay[engines] /= float64(followers)
		completion[engines] = rep.SessionCompletionP50
		if rep.SessionCompletionP50 <= 0 || rep.SessionCompletionP99 < rep.SessionCompletionP50 {
			t.Errorf("%d engines: session completion p50 %v p99 %v", engines, rep.SessionCompletionP50, rep.SessionCompletionP99)
		}
	}
	if !(delay[2] > delay[4]) || !(completion[2] > completion[4]) {
		t.Errorf("later turns' mean delay: 4 engines %.3f s, 2 engines %.3f s; session completion p50 %.3f s, %.3f s: half the engines must delay both",
			delay[4], delay[2], completion[4], completion[2])
	}
}

// TestClusterTreeTimes checks the times of a cluster without Decode, an
// engine prefilling one request at a time: a request finishes at its first
// token, Little's law holds, and goodput is the share within the SLO.
func TestClusterTreeTimes(t *testing.T) {
	w, err := Synthetic("multiturn", 1, 500)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ClusterConfig{Config: Config{Capacity: 300}, Engines: 2, Speedup: 20,
		EngineConfig: EngineConfig{Cost: clockCost(t, w.BlockTokens), SLO: 1e9}}
	rep, err := Cluster(w, kvevict.LRU, NewRoundRobin(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	tm := rep.Times
	checkLittle(t, "tree", &tm)
	if tm.E2EP99 != tm.TTFTP99 || tm.E2EMean != tm.TTFTMean || tm.TPOTP99 != 0 || tm.ThroughputTokensPerS != 0 {
		t.Errorf("a prefill-only engine finishes at the first token: %+v", tm)
	}
	if tm.Goodput != rep.WithinSLO || tm.MeanInSystem <= 0 || tm.MeanRunning > 2 {
		t.Errorf("goodput %v within slo %v, in system %v, running %v", tm.Goodput, rep.WithinSLO, tm.MeanInSystem, tm.MeanRunning)
	}
	// A session completes at its last request's first token, from its
	// first request's arrival: worked out here from each request's times.
	c, err := newCluster(w, kvevict.LRU, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.run(NewRoundRobin(), &cfg); err != nil {
		t.Fatal(err)
	}
	type span struct{ first, last time.Duration }
	sessions := map[uint64]span{}
	for r := range w.Requests {
		g, a, f := w.Requests[r].Group, c.arrivals[r], c.finishes[r]
		s, ok := sessions[g]
		if !ok {
			s = span{a, f}
		}
		sessions[g] = span{min(s.first, a), max(s.last, f)}
	}
	var ticks []int64
	for _, s := range sessions {
		ticks = append(ticks, int64((s.last-s.first)/time.Microsecond))
	}
	_, p50, _, p99 := summary(ticks)
	near := func(x, y float64) bool { return math.Abs(x-y) <= 2e-6 } // whole microseconds
	if got := c.report(); !near(got.SessionCompletionP50, p50) || !near(got.SessionCompletionP99, p99) || p50 == 0 {
		t.Errorf("session completion p50 %v p99 %v, want %v and %v from each request's arrival and finish",
			got.SessionCompletionP50, got.SessionCompletionP99, p50, p99)
	}
}

// TestClusterDecodeRefuses checks what Decode needs and what needs it.
func TestClusterDecodeRefuses(t *testing.T) {
	w, err := Synthetic("tenants", 1, 50)
	if err != nil {
		t.Fatal(err)
	}
	if w.GroupKind == "session" {
		t.Fatal("tenants groups by session: the closed loop's refusal needs a workload without sessions")
	}
	good := decodeConfig(t, w, 2, 100)
	for name, change := range map[string]func(*ClusterConfig){
		"no cost": func(c *ClusterConfig) { c.Cost = nil },
		"vllm's tiers": func(c *ClusterConfig) {
			c.Below, c.Write = []tier.Level{{Medium: tier.CPU, Capacity: 100, Strategy: kvevict.LRU}}, tier.WriteVLLM
		},
		"batch, no decode":   func(c *ClusterConfig) { c.Decode = false },
		"loop, no decode":    func(c *ClusterConfig) { c.Decode, c.MaxBatch, c.TokenBudget, c.Loop = false, 0, 0, LoopOpen },
		"closed, no session": func(c *ClusterConfig) { c.Loop = LoopClosed },
		"negative budget":    func(c *ClusterConfig) { c.TokenBudget = -1 },
	} {
		cfg := good
		change(&cfg)
		_, err := Cluster(w, kvevict.LRU, NewRoundRobin(), cfg)
		if !errors.Is(err, kvevict.ErrInvalidArgument) {
			t.Errorf("%s: got %v, want an invalid argument", name, err)
		}
	}
	if _, err := Cluster(w, kvevict.LRU, NewRoundRobin(), good); err != nil {
		t.Errorf("the good configuration: %v", err)
	}
}

// TestClusterTodaysConfiguration checks that the engine model holds the
// cluster's prefill-only figures as one configuration: engines that decode
// with one request at a time, a token budget of the longest prompt, the
// open loop and prompts that ask for no output give the hit ratio and the
// TTFT percentiles of engines that prefill one request at a time, to 4
// decimals, on the conversation trace at the loads docs/cluster.md
// reports, under the routers that do not read when an engine computed a
// block. Those that do (direct, reading the prefix an engine holds, and
// ttft, its queue) differ: a prefix tree takes a request's blocks when it
// is routed, a pool when it is admitted. docs/cluster.md gives their
// figures, which this test logs.
func TestClusterTodaysConfiguration(t *testing.T) {
	skipUnderRace(t)
	w := loadConversation(t)
	quiet := *w
	quiet.Requests = slices.Clone(w.Requests)
	longest := 0
	for i := range quiet.Requests {
		quiet.Requests[i].OutputTokens = 0
		longest = max(longest, quiet.Requests[i].InputTokens)
	}
	roofline := clockCost(t, w.BlockTokens)
	flops := roofline.Compute()
	flops.MemoryBandwidth = 0 // the prefill-only engines price FLOPs alone
	cost, err := tier.NewCost(roofline.Model(), w.BlockTokens, flops, nil)
	if err != nil {
		t.Fatal(err)
	}
	engines := 0 // the mirror's, set before each run
	routers := map[string]func() Router{
		"round-robin":  NewRoundRobin,
		"least-loaded": NewLeastLoaded,
		"approx":       func() Router { r, _ := NewApproxRouter(1, 0.5); return r },
		"direct":       func() Router { r, _ := NewDirectRouter(0.5); return r },
		"ttft":         func() Router { r, _ := NewTTFTRouter(newExactMirror(engines), cost); return r },
	}
	exact := map[string]bool{"round-robin": true, "least-loaded": true, "approx": true}
	for _, load := range []struct {
		engines int
		speedup float64
	}{{4, 1.7}, {8, 3.2}} {
		engines = load.engines
		for _, name := range []string{"round-robin", "least-loaded", "approx", "direct", "ttft"} {
			tree := ClusterConfig{Config: Config{Capacity: 2500}, Engines: load.engines, Speedup: load.speedup,
				EngineConfig: EngineConfig{Cost: cost, SLO: 2e9}}
			pool := tree
			pool.Decode = true
			pool.MaxBatch, pool.TokenBudget, pool.Loop = 1, longest, LoopOpen
			a, err := Cluster(&quiet, kvevict.LRU, routers[name](), tree)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Cluster(&quiet, kvevict.LRU, routers[name](), pool)
			if err != nil {
				t.Fatal(err)
			}
			checkLittle(t, name, &a.Times)
			checkLittle(t, name, &b.Times)
			t.Logf("%d engines at %gx, %s: prefill only: hit %.4f TTFT p50 %.4f p90 %.4f p99 %.4f; decoding engines: %.4f %.4f %.4f %.4f",
				load.engines, load.speedup, name, a.HitRatio, a.TTFTP50, a.TTFTP90, a.TTFTP99, b.HitRatio, b.TTFTP50, b.TTFTP90, b.TTFTP99)
			// Within 0.0001: the pool's clock counts whole microseconds, and
			// a prompt found whole computes its last token.
			near := func(x, y float64) bool { return math.Abs(x-y) < 1e-4 }
			if exact[name] && !(near(a.HitRatio, b.HitRatio) && near(a.TTFTP50, b.TTFTP50) && near(a.TTFTP90, b.TTFTP90) && near(a.TTFTP99, b.TTFTP99)) {
				t.Errorf("%d engines, %s: the prefill-only configuration of the engine model differs from the prefill-only engines: TTFT p50 %+.6f p90 %+.6f p99 %+.6f s, hit ratio %+.6f",
					load.engines, name, b.TTFTP50-a.TTFTP50, b.TTFTP90-a.TTFTP90, b.TTFTP99-a.TTFTP99, b.HitRatio-a.HitRatio)
			}
		}
	}
}
