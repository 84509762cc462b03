package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/prefix"
	"github.com/sagellm/kvevict/tier"
)

// handTimed is a four-request workload of 16-token blocks, and a cost
// model that prefills 1,000 tokens a second (a token a millisecond), so
// that every time below is worked out by hand.
func handTimed(t *testing.T) (*Workload, *tier.Cost) {
	t.Helper()
	w := &Workload{Name: "hand", BlockTokens: 16, Requests: []Request{
		{Timestamp: 0, InputTokens: 32, HashIDs: []uint64{1, 2}},
		{Timestamp: 10, InputTokens: 48, HashIDs: []uint64{1, 2, 3}},
		{Timestamp: 20, InputTokens: 48, HashIDs: []uint64{1, 2, 3}},
		{Timestamp: 100, InputTokens: 16, HashIDs: []uint64{4}},
	}}
	m := llama(t)
	cost := mustCost(t, m, 16, tier.Compute{TokensPerSecond: 1000}, nil)
	return w, cost
}

// timingRouter routes as the router it wraps and records, per request,
// every engine's Wait as the router saw it.
type timingRouter struct {
	Router
	waits [][]time.Duration
}

func (r *timingRouter) Route(req *Request, engines []*Engine) (Choice, error) {
	var w []time.Duration
	for _, e := range engines {
		w = append(w, e.Wait())
	}
	r.waits = append(r.waits, w)
	return r.Router.Route(req, engines)
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestClusterTimeByHand checks a cluster in time against the queue worked
// out by hand. Round robin over two engines, a token a millisecond:
//
//	request  arrives  engine  hits  prefill  starts  ends  TTFT
//	0          0 ms     0      0     32 ms      0     32    32
//	1         10 ms     1      0     48 ms     10     58    48
//	2         20 ms     0      2     16 ms     32     48    28
//	3        100 ms     1      0     16 ms    100    116    16
//
// TTFTs sorted: 16, 28, 32, 48; nearest rank p50 28, p90 and p99 48; two
// within a 30 ms SLO. Engine 1 was busy 64 ms of the 116 from the first
// arrival to the last end. At speedup 2 the arrivals are 0, 5, 10 and 50
// ms: TTFTs 32, 48, 38 (starts at 32) and 19 (starts at 53).
func TestClusterTimeByHand(t *testing.T) {
	w, cost := handTimed(t)
	r := &timingRouter{Router: NewRoundRobin()}
	rep, err := Cluster(w, kvevict.LRU, r, ClusterConfig{Config: Config{Capacity: 10}, Engines: 2, EngineConfig: EngineConfig{Cost: cost, SLO: 30 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	checkLittle(t, "cluster", &rep.Times)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"p50", rep.TTFTP50, 0.028}, {"p90", rep.TTFTP90, 0.048}, {"p99", rep.TTFTP99, 0.048},
		{"within SLO", rep.WithinSLO, 0.5}, {"prefill seconds", rep.PrefillSeconds, 0.112},
		{"busiest utilization", rep.BusiestUtilization, 64.0 / 116},
	} {
		if !near(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	// The waits each router saw: request 2 finds engine 0 busy until 32 ms
	// and engine 1 until 58; request 3 finds both free.
	ms := time.Millisecond
	want := [][]time.Duration{{0, 0}, {22 * ms, 0}, {12 * ms, 38 * ms}, {0, 0}}
	for i := range want {
		if r.waits[i][0] != want[i][0] || r.waits[i][1] != want[i][1] {
			t.Errorf("request %d saw waits %v, want %v", i, r.waits[i], want[i])
		}
	}

	rep, err = Cluster(w, kvevict.LRU, NewRoundRobin(), ClusterConfig{Config: Config{Capacity: 10}, Engines: 2, Speedup: 2, EngineConfig: EngineConfig{Cost: cost, SLO: 30 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	checkLittle(t, "cluster", &rep.Times)
	// Sorted 19, 32, 38, 48.
	if !near(rep.TTFTP50, 0.032) || !near(rep.TTFTP99, 0.048) || !near(rep.WithinSLO, 0.25) {
		t.Errorf("speedup 2: p50 %v p99 %v within %v, want 0.032, 0.048, 0.25", rep.TTFTP50, rep.TTFTP99, rep.WithinSLO)
	}
}

// TestTTFTRouterByHand checks Mooncake's rule on the same workload. Request
// 0 finds two idle, empty engines and goes to the first. Request 1 would
// wait 22 ms on engine 0 and prefill 16 tokens past its 2 cached blocks
// (38 ms), or prefill all 48 on engine 1: engine 0, ending at 48 ms.
// Request 2 is cached whole on engine 0: it waits there 28 ms with nothing
// to prefill, against 48 ms on engine 1: engine 0. Request 3 costs 16 ms
// on either idle engine, and goes to engine 1, which received fewer
// requests. TTFTs 32, 38, 28 and 16.
func TestTTFTRouterByHand(t *testing.T) {
	w, cost := handTimed(t)
	r, err := NewTTFTRouter(newExactMirror(2), cost)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingRouter{Router: r}
	rep, err := Cluster(w, kvevict.LRU, rec, ClusterConfig{Config: Config{Capacity: 10}, Engines: 2, EngineConfig: EngineConfig{Cost: cost, SLO: 30 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	checkLittle(t, "cluster", &rep.Times)
	if want := []int{0, 0, 0, 1}; !equalInts(rec.engines, want) {
		t.Errorf("engines %v, want %v", rec.engines, want)
	}
	// Sorted 16, 28, 32, 38.
	if !near(rep.TTFTP50, 0.028) || !near(rep.TTFTP99, 0.038) || !near(rep.WithinSLO, 0.5) {
		t.Errorf("p50 %v p99 %v within %v, want 0.028, 0.038, 0.5", rep.TTFTP50, rep.TTFTP99, rep.WithinSLO)
	}
	if rep.BlockHits != 2+3 {
		t.Errorf("%d block hits, want 5", rep.BlockHits)
	}
}

// recordingRouter routes as the router it wraps and records its choices.
type recordingRouter struct {
	Router
	engines []int
}

func (r *recordingRouter) Route(req *Request, engines []*Engine) (Choice, error) {
	c, err := r.Router.Route(req, engines)
	r.engines = append(r.engines, c.Engine)
	return c, err
}

// TestClusterTimeRefuses checks the time model's arguments.
func TestClusterTimeRefuses(t *testing.T) {
	w, cost := handTimed(t)
	other, err := tier.NewCost(cost.Model(), 32, cost.Compute(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]ClusterConfig{
		"block size": {EngineConfig: EngineConfig{Cost: other}},
		"speedup":    {EngineConfig: EngineConfig{Cost: cost}, Speedup: -1},
		"inf":        {EngineConfig: EngineConfig{Cost: cost}, Speedup: math.Inf(1)},
		"nan":        {EngineConfig: EngineConfig{Cost: cost}, Speedup: math.NaN()},
		"slo":        {EngineConfig: EngineConfig{Cost: cost, SLO: -time.Second}},
	} {
		cfg.Config, cfg.Engines = Config{Capacity: 10}, 2
		if _, err := Cluster(w, kvevict.LRU, NewRoundRobin(), cfg); err == nil {
			t.Errorf("%s: no error", name)
		} else if name != "block size" && !errors.Is(err, kvevict.ErrInvalidArgument) {
			t.Errorf("%s: %v does not match ErrInvalidArgument", name, err)
		}
	}
	if _, err := NewTTFTRouter(nil, cost); err == nil {
		t.Error("nil mirror: no error")
	}
	if _, err := NewTTFTRouter(newExactMirror(2), nil); err == nil {
		t.Error("nil cost: no error")
	}
}

// TestTTFTRouterConversation: on the conversation trace (its timestamps
// are real) at 4 and 8 engines of 2,500 blocks, Llama-3-8B on one H100 per
// engine at 50% MFU, at the speedup that keeps round robin's busiest
// engine about 80% busy, Mooncake's rule has a TTFT p99 at least 5% below
// least-loaded's and below the prefix router's at every load weight tried.
// The speedups were found with kvevict cluster (docs/cluster.md).
func TestTTFTRouterConversation(t *testing.T) {
	if reduced() {
		t.Skip("long single-threaded replays; run without -race or -short")
	}
	t.Parallel()
	w := loadConversation(t)
	m := llama(t)
	cost := mustCost(t, m, w.BlockTokens, tier.DefaultCompute(), nil)
	for _, tc := range []struct {
		engines int
		speedup float64
	}{{4, 1.7}, {8, 3.2}} {
		run := func(r Router) ClusterReport {
			rep, err := Cluster(w, kvevict.LRU, r, ClusterConfig{Config: Config{Capacity: 2500}, Engines: tc.engines, Speedup: tc.speedup, EngineConfig: EngineConfig{Cost: cost}})
			if err != nil {
				t.Fatal(err)
			}
			checkLittle(t, "cluster", &rep.Times)
			return rep
		}
		if u := run(NewRoundRobin()).BusiestUtilization; u < 0.75 || u > 0.85 {
			t.Errorf("%d engines at speedup %v: round robin's busiest engine %.3f busy, want 0.80 +- 0.05", tc.engines, tc.speedup, u)
		}
		ttft, err := NewTTFTRouter(newExactMirror(tc.engines), cost)
		if err != nil {
			t.Fatal(err)
		}
		got := run(ttft).TTFTP99
		others := map[string]float64{"least-loaded": run(NewLeastLoaded()).TTFTP99}
		for _, lw := range []float64{0.25, 0.5, 1, 2, 4, 8, 16, 32} {
			r, err := NewMirrorRouter(newExactMirror(tc.engines), lw)
			if err != nil {
				t.Fatal(err)
			}
			others[fmt.Sprintf("prefix at load weight %v", lw)] = run(r).TTFTP99
		}
		for name, p99 := range others {
			if got > 0.95*p99 {
				t.Errorf("%d engines: ttft's TTFT p99 %.3f s, %s's %.3f s: not 5%% lower", tc.engines, got, name, p99)
			}
		}
	}
}

// TestClusterTiersByHand: one engine whose tree holds 2 blocks, over a host
// tier of 10 written through, a token prefilled a millisecond and a block
// (2 MiB of Llama-3-8B's cache at 16 tokens) loaded a millisecond after a
// millisecond's latency. Request 0, [1 2] at 0 ms, and request 1, [3 4] at
// 100 ms, miss everywhere: 32 ms each, and the tree keeps [3 4], the host
// all four. Request 2, [1 2] at 200 ms, finds both on the host: loaded in
// 1 + 2 ms, nothing left to prefill. TTFTs 32, 32 and 3 ms; 2 hits of 6.
func TestClusterTiersByHand(t *testing.T) {
	m := llama(t)
	block := m.BytesPerBlock(16)
	cost := mustCost(t, m, 16, tier.Compute{TokensPerSecond: 1000},
		map[tier.Medium]tier.Link{tier.CPU: {Bandwidth: float64(block) * 1000, Latency: time.Millisecond}})
	w := &Workload{Name: "hand", BlockTokens: 16, Requests: []Request{
		{Timestamp: 0, InputTokens: 32, HashIDs: []uint64{1, 2}},
		{Timestamp: 100, InputTokens: 32, HashIDs: []uint64{3, 4}},
		{Timestamp: 200, InputTokens: 32, HashIDs: []uint64{1, 2}},
	}}
	rep, err := Cluster(w, kvevict.LRU, NewRoundRobin(), ClusterConfig{Config: Config{Capacity: 2}, Engines: 1, EngineConfig: EngineConfig{Cost: cost}, Tiers: Tiers{Below: []tier.Level{{Medium: tier.CPU, Capacity: 10, Strategy: kvevict.LRU}}}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.BlockHits != 2 || rep.BlockRefs != 6 || !near(rep.PrefillSeconds, 0.067) || !near(rep.LoadSeconds, 0.003) || !near(rep.TTFTP50, 0.032) {
		t.Errorf("hits %d of %d, prefill %v s, load %v s, p50 %v s; want 2 of 6, 0.067, 0.003, 0.032", rep.BlockHits, rep.BlockRefs, rep.PrefillSeconds, rep.LoadSeconds, rep.TTFTP50)
	}
	checkLittle(t, "tiers by hand", &rep.Times)
	if len(rep.Tiers) != 2 {
		t.Fatalf("tiers %+v", rep.Tiers)
	}
	gpu, cpu := rep.Tiers[0], rep.Tiers[1]
	if gpu.Hits != 0 || gpu.StoredBlocks != 6 || gpu.EvictedBlocks != 4 || cpu.Hits != 2 || cpu.StoredBlocks != 4 || cpu.BytesRead != 2*block {
		t.Errorf("GPU %+v, CPU %+v", gpu, cpu)
	}
}

// TestClusterTiersAddHits: tiers below the engines change no tree (round
// robin routes alike), so the GPU's hits are the cluster's without tiers
// and the hits below add to them; a host tier that holds every block,
// written through, behind one engine finds every block referenced before
// in a prefix (the unbounded cache's hits); and no cluster passes the
// pooled bound at every tier's capacity together.
func TestClusterTiersAddHits(t *testing.T) {
	skipUnderRace(t)
	for _, name := range WorkloadNames() {
		w, err := Synthetic(name, 2, 300)
		if err != nil {
			t.Fatal(err)
		}
		ceil := computeCeiling(w)
		for _, engines := range []int{1, 3} {
			plain := runCluster(t, w, kvevict.LRU, NewRoundRobin(), engines, 100)
			for _, mode := range []struct {
				write     tier.Write
				exclusive bool
			}{{tier.WriteThrough, false}, {tier.WriteBack, false}, {tier.WriteBack, true}} {
				cfg := ClusterConfig{Config: Config{Capacity: 100}, Engines: engines, Tiers: Tiers{Write: mode.write, Exclusive: mode.exclusive, Below: []tier.Level{{Medium: tier.CPU, Capacity: 300, Strategy: kvevict.LRU}}}}
				rep, err := Cluster(w, kvevict.LRU, NewRoundRobin(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Tiers[0].Hits != plain.BlockHits || rep.BlockHits != rep.Tiers[0].Hits+rep.Tiers[1].Hits || rep.BlockHits < plain.BlockHits {
					t.Errorf("%s, %d engines, %v: plain %d hits, tiered %d (%+v)", name, engines, mode, plain.BlockHits, rep.BlockHits, rep.Tiers)
				}
				bound, err := PooledBound(w, Config{Capacity: engines * 400})
				if err != nil {
					t.Fatal(err)
				}
				if rep.HitRatio > bound {
					t.Errorf("%s, %d engines, %v: %v above the bound %v", name, engines, mode, rep.HitRatio, bound)
				}
			}
		}
		rep, err := Cluster(w, kvevict.LRU, NewRoundRobin(), ClusterConfig{Config: Config{Capacity: 100}, Engines: 1,
			Tiers: Tiers{Below: []tier.Level{{Medium: tier.CPU, Capacity: ceil.distinct, Strategy: kvevict.LRU}}}})
		if err != nil {
			t.Fatal(err)
		}
		if rep.BlockHits != ceil.hits {
			t.Errorf("%s: a host tier holding everything finds %d blocks, the unbounded cache %d", name, rep.BlockHits, ceil.hits)
		}
	}
	w, _ := handTimed(t)
	_, err := Cluster(w, kvevict.LRU, NewRoundRobin(), ClusterConfig{Config: Config{Capacity: 2}, Engines: 1, Tiers: Tiers{Write: tier.WriteVLLM, Below: []tier.Level{{Medium: tier.CPU, Capacity: 10, Strategy: kvevict.LRU}}}})
	if !errors.Is(err, tier.ErrConfig) {
		t.Errorf("vLLM's mode below a tree: %v", err)
	}
}

// exactTierMirror is an exactMirror that also mirrors each engine's tiers
// below its pool from their events, refusing an event that contradicts
// what it holds.
type exactTierMirror struct {
	*exactMirror
	below []map[tier.Medium]map[uint64]bool
}

func newExactTierMirror(engines int) *exactTierMirror {
	m := &exactTierMirror{exactMirror: newExactMirror(engines)}
	for range engines {
		m.below = append(m.below, map[tier.Medium]map[uint64]bool{tier.CPU: {}, tier.Storage: {}})
	}
	return m
}

func (m *exactTierMirror) ApplyTiers(engine int, events []tier.Event) error {
	for _, e := range events {
		held := m.below[engine][e.Medium]
		if held == nil {
			return fmt.Errorf("engine %d: an event on %s", engine, e.Medium)
		}
		for _, h := range e.Hashes {
			if held[h] != (e.Kind == tier.Removed) {
				return fmt.Errorf("engine %d: %v of block %d on %s, held %v", engine, e.Kind, h, e.Medium, held[h])
			}
			if e.Kind == tier.Stored {
				held[h] = true
			} else {
				delete(held, h)
			}
		}
	}
	return nil
}

func (m *exactTierMirror) HeldOn(engine int, medium tier.Medium, h uint64) bool {
	if medium == tier.GPU {
		return m.held[engine][h]
	}
	return m.below[engine][medium][h]
}

// fixedTierMirror answers from fixed sets: held[engine][medium].
type fixedTierMirror struct {
	held []map[tier.Medium][]uint64
}

func (m fixedTierMirror) Apply(int, []prefix.Event) error    { return nil }
func (m fixedTierMirror) ApplyTiers(int, []tier.Event) error { return nil }
func (m fixedTierMirror) CachedPrefix(i int, hashes []uint64) int {
	return prefixHits(hashes, func(h uint64) bool { return m.HeldOn(i, tier.GPU, h) })
}
func (m fixedTierMirror) HeldOn(i int, md tier.Medium, h uint64) bool {
	return slices.Contains(m.held[i][md], h)
}

// TestTierRouterByHand: llm-d's scorer over every tier. A prompt of
// blocks 1 2 3: engine 0 holds 1 2 on the GPU (1 + 1 = 2), engine 1 holds
// 1 on the GPU and 2 3 on the host (1 + 0.8 + 0.8 = 2.6), engine 2 holds 1
// 2 3 on storage, which llm-d's defaults do not weigh (3 x 1 = 3): engine
// 2. With the host weighing 0.4, engine 1 scores 1.8 and engine 2 still
// 3; with storage at 0.5, engine 1's 2.6 wins over 1.5; and with 1 request of
// load on engine 1 at a load weight of 1, engine 0's 2 wins over 1.6 and 1.5.
//
// The ttft rule over the same mirror, a token a millisecond and a block
// loaded in a millisecond after one of latency (as TestClusterTiersByHand):
// engine 0 prefills 16 tokens (16 ms); engine 1 loads 2 blocks from the
// host (3 ms) and prefills nothing; engine 2 loads 3 from storage over its
// own link (4 ms, its latency 1 ms too): engine 1.
func TestTierRouterByHand(t *testing.T) {
	m := fixedTierMirror{held: []map[tier.Medium][]uint64{
		{tier.GPU: {1, 2}},
		{tier.GPU: {1}, tier.CPU: {2, 3}},
		{tier.Storage: {1, 2, 3}},
	}}
	req := &Request{InputTokens: 48, HashIDs: []uint64{1, 2, 3}}
	engines := func(loads ...int) []*Engine {
		var now time.Duration
		var out []*Engine
		for _, l := range loads {
			out = append(out, &Engine{load: l, now: &now})
		}
		return out
	}
	for _, tc := range []struct {
		weights    map[tier.Medium]float64
		loadWeight float64
		loads      []int
		want       int
	}{
		{LLMDTierWeights, 0, []int{0, 0, 0}, 2},
		{map[tier.Medium]float64{tier.GPU: 1, tier.CPU: 0.4}, 0, []int{0, 0, 0}, 2},
		{map[tier.Medium]float64{tier.GPU: 1, tier.CPU: 0.8, tier.Storage: 0.5}, 0, []int{0, 0, 0}, 1},
		{map[tier.Medium]float64{tier.GPU: 1, tier.CPU: 0.8, tier.Storage: 0.5}, 1, []int{0, 1, 0}, 0},
	} {
		r, err := NewTierRouter(m, tc.weights, tc.loadWeight)
		if err != nil {
			t.Fatal(err)
		}
		c, err := r.Route(req, engines(tc.loads...))
		if err != nil {
			t.Fatal(err)
		}
		if c.Engine != tc.want || c.Predicted != m.CachedPrefix(c.Engine, req.HashIDs) {
			t.Errorf("weights %v, load weight %v, loads %v: %+v, want engine %d", tc.weights, tc.loadWeight, tc.loads, c, tc.want)
		}
	}
	if _, err := NewTierRouter(m, map[tier.Medium]float64{tier.CPU: -1}, 0); !errors.Is(err, kvevict.ErrInvalidArgument) {
		t.Errorf("a negative weight: %v", err)
	}

	model := llama(t)
	block := float64(model.BytesPerBlock(16)) * 1000
	cost := mustCost(t, model, 16, tier.Compute{TokensPerSecond: 1000}, map[tier.Medium]tier.Link{
		tier.CPU: {Bandwidth: block, Latency: time.Millisecond}, tier.Storage: {Bandwidth: block, Latency: time.Millisecond}})
	r, err := NewTTFTRouter(m, cost)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := r.Route(req, engines(0, 0, 0)); err != nil || c.Engine != 1 {
		t.Errorf("ttft over the tiers: %+v, %v; want engine 1", c, err)
	}
	if got := r.(*mirrored).service; len(got) != 3 || got[0] != 16*time.Millisecond || got[1] != 3*time.Millisecond || got[2] != 4*time.Millisecond {
		t.Errorf("estimated services %v, want 16ms 3ms 4ms", got)
	}
}

// TestTierRoutersOnTiers: over engines with a host tier, a mirror fed with
// the pools' and the tiers' events holds what the hierarchies emit (it
// refuses any contradiction), llm-d's scorer and the ttft rule over every
// tier route, and nothing passes the pooled bound at every tier's capacity.
func TestTierRoutersOnTiers(t *testing.T) {
	skipUnderRace(t)
	for _, name := range WorkloadNames() {
		w, cost := syntheticPriced(t, name)
		bound, err := PooledBound(w, Config{Capacity: 3 * (100 + 300)})
		if err != nil {
			t.Fatal(err)
		}
		for _, write := range []tier.Write{tier.WriteThrough, tier.WriteBack} {
			tiered, err := NewTierRouter(newExactTierMirror(3), LLMDTierWeights, 0.5)
			if err != nil {
				t.Fatal(err)
			}
			ttft, err := NewTTFTRouter(newExactTierMirror(3), cost)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range []Router{tiered, ttft} {
				rep, err := Cluster(w, kvevict.LRU, r, ClusterConfig{Config: Config{Capacity: 100}, Engines: 3, EngineConfig: EngineConfig{Cost: cost}, Tiers: Tiers{Write: write, Below: []tier.Level{{Medium: tier.CPU, Capacity: 300, Strategy: kvevict.LRU}}}})
				if err != nil {
					t.Fatalf("%s, %v: %v", name, write, err)
				}
				checkLittle(t, "cluster", &rep.Times)
				if rep.HitRatio > bound || rep.MispredictedPerRequest != 0 {
					t.Errorf("%s, %v: hit ratio %v (bound %v), %v mispredicted", name, write, rep.HitRatio, bound, rep.MispredictedPerRequest)
				}
			}
		}
	}
}
