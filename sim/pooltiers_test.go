package sim

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/tier"
)

// cpuTier is one host tier of blocks blocks under LRU, written as write
// says.
func cpuTier(blocks int, write tier.Write, exclusive bool) Tiers {
	return Tiers{Below: []tier.Level{{Medium: tier.CPU, Capacity: blocks, Strategy: kvevict.LRU}}, Write: write, Exclusive: exclusive}
}

// loadTrace is the hand case of TestServeTiersLoadBeforePrefill, in
// blocks of bt tokens: A and B fill a pool of 10 blocks, X and Y evict
// them to the host, and C and D come back for them at once.
func loadTrace(bt int) *Workload {
	req := func(ms int64, first uint64) Request {
		return Request{Timestamp: ms, InputTokens: 4 * bt, OutputTokens: 1,
			HashIDs: []uint64{first, first + 1, first + 2, first + 3}, Group: first}
	}
	return &Workload{Name: "hand", BlockTokens: bt, GroupKind: "tenant", Requests: []Request{
		req(0, 1), req(0, 5), req(1000, 9), req(1000, 13), req(2000, 1), req(2000, 5)}}
}

// servePool runs Serve and returns its report and the pool it ran.
func servePool(t *testing.T, w *Workload, s kvevict.Strategy, cfg ServeConfig) (Report, *pool) {
	t.Helper()
	var p *pool
	cfg.afterStep = func(q *pool) { p = q; checkPool(t, q) }
	rep, err := Serve(w, s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rep, p
}

// TestServeTiersLoadBeforePrefill works a request's time out by hand: its
// blocks, evicted to the host tier, are loaded over the host's link before
// its prefill, which then computes its last token alone; a second request
// whose load queues behind the first's on the link starts its prefill one
// load later.
func TestServeTiersLoadBeforePrefill(t *testing.T) {
	const bt = 16
	w := loadTrace(bt)
	cost := clockCost(t, bt)
	cfg := ServeConfig{Config: Config{Capacity: 10}, Granularity: GranularityBlock,
		EngineConfig: EngineConfig{Cost: cost}, Tiers: cpuTier(100, tier.WriteBack, false)}
	rep, p := servePool(t, w, kvevict.LRU, cfg)
	link, ok := tier.DefaultLink(tier.CPU)
	if !ok {
		t.Fatal("no default host link")
	}
	// A block of llama-3-8b is bt x 128 KiB (32 layers x 8 KV heads x 128
	// x 2 (K and V) x 2 bytes a token).
	blockBytes := float64(bt * 32 * 8 * 128 * 2 * 2)
	load := link.Latency.Seconds() + 4*blockBytes/link.Bandwidth
	if got := rep.LoadSeconds; math.Abs(got-2*load) > 1e-9 {
		t.Errorf("load seconds %v, want two loads of 4 blocks, %v", got, 2*load)
	}
	if got := rep.Tiers[1].Hits; got != 8 {
		t.Errorf("host hits %d, want C's and D's 4 blocks each", got)
	}
	// C's prefill computes its last token (63 tokens in its KV) after its
	// load, alone for one load's time, until D's load ends and D's chunk
	// joins the step; C's step then takes the time of both chunks, and
	// D's, once C is done, the time of its own alone. Each step is
	// memory-bound: the weights and the KV read once.
	m := cost.Model()
	n := 4 * bt
	alone := cost.Step(tier.Step{Tokens: 1, FLOPs: m.PrefillFLOPs(n-1, n), KVTokens: int64(n - 1)}).Seconds()
	both := cost.Step(tier.Step{Tokens: 2, FLOPs: 2 * m.PrefillFLOPs(n-1, n), KVTokens: int64(2 * (n - 1))}).Seconds()
	wantC := 2*load + (1-load/alone)*both
	wantD := wantC + (1-(wantC-2*load)/both)*alone
	rec := p.clock.rec
	ttft := func(r int) float64 { return float64(rec.first[r]-rec.arrival[r]) / 1e6 }
	if got := ttft(4); math.Abs(got-wantC) > 2e-6 {
		t.Errorf("C's TTFT %.6f s, want %.6f: its load %.6f s, its step %.6f s alone for one load, %.6f s beside D's", got, wantC, load, alone, both)
	}
	if got := ttft(5); math.Abs(got-wantD) > 2e-6 {
		t.Errorf("D's TTFT %.6f s, want %.6f: two loads, then its step beside C's and alone", got, wantD)
	}
	if rep.BlockHits != 8 || rep.Tiers[0].Hits != 0 {
		t.Errorf("hits %d, on the GPU %d: want C's and D's 8, all from the host", rep.BlockHits, rep.Tiers[0].Hits)
	}
}

// TestServeTiersLoadOutOfBatch: a sequence waiting for its loads is out of
// the batch cap, as vLLM keeps it waiting outside max_num_seqs, and once
// loaded it waits for room. The hand case above with a batch of one: C and
// D are both admitted and load one after the other; C prefills alone once
// its load ends; D's ends while C's step runs, so D waits for C's finish
// and then prefills alone. C's TTFT is a load and a step, D's a load and
// two steps (one more load if D had waited for C's finish to be admitted).
func TestServeTiersLoadOutOfBatch(t *testing.T) {
	const bt = 16
	w := loadTrace(bt)
	cost := clockCost(t, bt)
	cfg := ServeConfig{Config: Config{Capacity: 10}, Granularity: GranularityBlock,
		EngineConfig: EngineConfig{Cost: cost, MaxBatch: 1}, Tiers: cpuTier(100, tier.WriteBack, false)}
	_, p := servePool(t, w, kvevict.LRU, cfg)
	m := cost.Model()
	n := 4 * bt
	load := cost.Load(tier.CPU, 4).Seconds()
	alone := cost.Step(tier.Step{Tokens: 1, FLOPs: m.PrefillFLOPs(n-1, n), KVTokens: int64(n - 1)}).Seconds()
	rec := p.clock.rec
	ttft := func(r int) float64 { return float64(rec.first[r]-rec.arrival[r]) / 1e6 }
	if got, want := ttft(4), load+alone; math.Abs(got-want) > 2e-6 {
		t.Errorf("C's TTFT %.6f s, want its load %.6f s and its step %.6f s: %.6f", got, load, alone, want)
	}
	if got, want := ttft(5), load+2*alone; math.Abs(got-want) > 2e-6 {
		t.Errorf("D's TTFT %.6f s, want C's load and two steps: %.6f", got, want)
	}
}

// TestServeTiersLinkMD1 holds the host's link to M/D/1: every request of
// the measured phase loads 4 blocks, all on the host, over a link that
// takes L for them, and arrives in a Poisson stream of rate rho / L; the
// prefill after its load is all but free (a measured rate of 10^9
// tokens/s, no memory reads). Its time to first token is then its wait
// for the link, the loads queued before it, plus its own: on average L +
// rho x L / (2 (1 - rho)), within 5% at rho 0.5 and 0.8 for seeds 1-3.
// A first phase primes the host with every prompt, written through, and
// fills the pool with others, so that the measured requests find their
// blocks on the host only.
func TestServeTiersLinkMD1(t *testing.T) {
	skipUnderRace(t)
	const (
		bt       = 16
		blocks   = 4
		measured = 20000
		capacity = 2000
		load     = 0.1 // seconds, L
	)
	m := llama(t)
	bw := float64(blocks) * float64(m.BytesPerBlock(bt)) / load
	cost := mustCost(t, m, bt, tier.Compute{TokensPerSecond: 1e9}, map[tier.Medium]tier.Link{tier.CPU: {Bandwidth: bw}})
	primes := measured + capacity // the last capacity/blocks primes stay in the pool; the measured reuse the first
	for _, rho := range []float64{0.5, 0.8} {
		for seed := uint64(1); seed <= 3; seed++ {
			rng := rand.New(rand.NewPCG(seed, 0))
			w := &Workload{Name: "link", BlockTokens: bt, GroupKind: "tenant"}
			prompt := func(i int) []uint64 {
				return []uint64{uint64(blocks * i), uint64(blocks*i + 1), uint64(blocks*i + 2), uint64(blocks*i + 3)}
			}
			for i := range primes {
				w.Requests = append(w.Requests, Request{Timestamp: int64(i), InputTokens: blocks * bt, OutputTokens: 1, HashIDs: prompt(i), Group: uint64(i)})
			}
			at := float64(primes) / 1000 // seconds: after the primes
			for i := range measured {
				at += rng.ExpFloat64() * load / rho
				w.Requests = append(w.Requests, Request{Timestamp: int64(math.Round(at * 1000)), InputTokens: blocks * bt, OutputTokens: 1,
					HashIDs: prompt(i), Group: uint64(primes + i)})
			}
			cfg := ServeConfig{Config: Config{Capacity: capacity}, Granularity: GranularityBlock,
				EngineConfig: EngineConfig{Cost: cost}, Tiers: cpuTier(blocks*primes, tier.WriteThrough, false)}
			rep, err := Serve(w, kvevict.LRU, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := rep.Tiers[1].Hits, int64(blocks*measured); got != want {
				t.Fatalf("rho %.1f, seed %d: %d blocks loaded, want the measured requests' %d", rho, seed, got, want)
			}
			// The primes' time to first token is all but nothing: the
			// mean over the measured alone is the mean over all scaled.
			got := rep.TTFTMean * float64(len(w.Requests)) / measured
			want := load + rho*load/(2*(1-rho))
			if math.Abs(got-want) > 0.05*want {
				t.Errorf("rho %.1f, seed %d: mean TTFT %.4f s over the loads, M/D/1 gives %.4f s (L %.3f s)", rho, seed, got, want, load)
			}
		}
	}
}

// TestClusterWaitPricesLoads: a decoding engine's queue estimate prices
// a waiting request's blocks below its pool as a load, as the cluster
// without Decode does. In the hand case above, C waits for its load when
// D is routed, at the same millisecond: C's blocks are all on the host,
// so its estimate is one load of 4 blocks and no prefill (a prompt found
// whole is priced as none).
func TestClusterWaitPricesLoads(t *testing.T) {
	w := loadTrace(16)
	cost := clockCost(t, 16)
	r := &timingRouter{Router: NewRoundRobin()}
	cfg := ClusterConfig{Config: Config{Capacity: 10}, Engines: 1, Decode: true,
		EngineConfig: EngineConfig{Cost: cost}, Tiers: cpuTier(100, tier.WriteBack, false)}
	if _, err := Cluster(w, kvevict.LRU, r, cfg); err != nil {
		t.Fatal(err)
	}
	if got, want := r.waits[5][0], cost.Load(tier.CPU, 4); got != want {
		t.Errorf("D sees a wait of %v, want C's load of 4 blocks, %v", got, want)
	}
}

// TestServeTiersKeepThePool checks that tiers below the pool change what
// it serves, not what it holds: without a clock a load takes no time, so
// the pool admits, evicts and preempts as without tiers, its own hits are
// the run's without, and the tiers only add hits.
func TestServeTiersKeepThePool(t *testing.T) {
	w, err := Synthetic("agentic", 1, 400)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []Granularity{GranularityTail, GranularityBlock} {
		cfg := ServeConfig{Config: Config{Capacity: 500}, Granularity: g}
		plain, _ := servePool(t, w, kvevict.LRU, cfg)
		gpuHits := int64(-1)
		for name, below := range map[string]Tiers{
			"through":   cpuTier(2000, tier.WriteThrough, false),
			"back":      cpuTier(2000, tier.WriteBack, false),
			"exclusive": cpuTier(2000, tier.WriteBack, true),
			"small":     cpuTier(100, tier.WriteThrough, false),
		} {
			cfg.Tiers = below
			rep, _ := servePool(t, w, kvevict.LRU, cfg)
			checkReport(t, &rep)
			if rep.EvictedBlocks != plain.EvictedBlocks || rep.Preemptions != plain.Preemptions || rep.Utilization != plain.Utilization {
				t.Errorf("%s %s: evicted %d, preempted %d, utilization %v; without tiers %d, %d, %v",
					g, name, rep.EvictedBlocks, rep.Preemptions, rep.Utilization, plain.EvictedBlocks, plain.Preemptions, plain.Utilization)
			}
			// The GPU's hits, at every admission, are the pool's, whatever
			// is below it; the first admissions' hits count the tiers'.
			if gpuHits < 0 {
				gpuHits = rep.Tiers[0].Hits
			}
			if rep.Tiers[0].Hits != gpuHits || rep.BlockHits < plain.BlockHits || rep.BlockHits > plain.BlockHits+rep.Tiers[1].Hits {
				t.Errorf("%s %s: hits %d, on the GPU %d, from the host %d; without tiers %d, on the GPU with other tiers %d",
					g, name, rep.BlockHits, rep.Tiers[0].Hits, rep.Tiers[1].Hits, plain.BlockHits, gpuHits)
			}
			if rep.Times != nil {
				t.Errorf("%s %s: times without a clock", g, name)
			}
		}
	}
}

// TestServeTiersHoldEverything checks the bound: a host tier that every
// block is written through to, and that holds them all, serves every
// block seen before, so the pool computes what an unbounded cache would.
// The loop is open, so that first admissions come in request order, the
// order the unbounded cache is counted in.
func TestServeTiersHoldEverything(t *testing.T) {
	for _, name := range []string{"agentic", "chat", "multiturn"} {
		w, err := Synthetic(name, 2, 300)
		if err != nil {
			t.Fatal(err)
		}
		// A pool that holds the longest prompt twice: none is rejected.
		longest := 0
		for _, r := range w.Requests {
			longest = max(longest, len(r.HashIDs))
		}
		cfg := ServeConfig{Config: Config{Capacity: 2 * longest}, Granularity: GranularityBlock,
			EngineConfig: EngineConfig{Loop: LoopOpen}, Tiers: cpuTier(1<<20, tier.WriteThrough, false)}
		if w.GroupKind != "session" {
			cfg.Loop = ""
		}
		rep, _ := servePool(t, w, kvevict.LRU, cfg)
		if rep.PrefillTokens != rep.UnboundedPrefillTokens || rep.RePrefillTokens != 0 || rep.EvictedBlocks == 0 || rep.Rejected+rep.Truncated > 0 {
			t.Errorf("%s: prefill %d tokens, an unbounded cache %d, re-prefill %d (evicted %d blocks, rejected %d, truncated %d): want equal, none, under pressure, none",
				name, rep.PrefillTokens, rep.UnboundedPrefillTokens, rep.RePrefillTokens, rep.EvictedBlocks, rep.Rejected, rep.Truncated)
		}
	}
}

// TestServeTiersInTime checks a run across tiers with a clock against
// Little's law, and the host's loads against its hits: each load of a run
// costs the link's latency and its bytes over the bandwidth, so the load
// seconds lie between the bytes' time alone and that plus a latency per
// block.
func TestServeTiersInTime(t *testing.T) {
	w, err := Synthetic("agentic", 3, 400)
	if err != nil {
		t.Fatal(err)
	}
	cost := clockCost(t, w.BlockTokens)
	cfg := ServeConfig{Config: Config{Capacity: 600}, Granularity: GranularityBlock,
		EngineConfig: EngineConfig{Cost: cost, MaxBatch: 32, TokenBudget: 2048}, Tiers: cpuTier(2400, tier.WriteBack, false)}
	rep, _ := servePool(t, w, kvevict.LRU, cfg)
	checkLittle(t, "serve across tiers", rep.Times)
	link, _ := cost.Link(tier.CPU)
	host := rep.Tiers[1]
	bytes := float64(host.BytesRead) / link.Bandwidth
	if host.Hits == 0 || rep.LoadSeconds < bytes || rep.LoadSeconds > bytes+float64(host.Hits)*link.Latency.Seconds() {
		t.Errorf("load seconds %v for %d blocks read, %d bytes: want %v plus at most a latency a block", rep.LoadSeconds, host.Hits, host.BytesRead, bytes)
	}
}

// TestServeTiersRefuse checks what the tiers below a pool cannot take.
func TestServeTiersRefuse(t *testing.T) {
	w, err := Synthetic("agentic", 1, 50)
	if err != nil {
		t.Fatal(err)
	}
	vllm := cpuTier(100, tier.WriteVLLM, false)
	if _, err := Serve(w, kvevict.LRU, ServeConfig{Config: Config{Capacity: 100}, Tiers: vllm}); !errors.Is(err, kvevict.ErrInvalidArgument) {
		t.Errorf("vLLM's offloading below the pool: got %v, want an invalid argument", err)
	}
	bad := cpuTier(0, tier.WriteBack, false)
	if _, err := Serve(w, kvevict.LRU, ServeConfig{Config: Config{Capacity: 100}, Tiers: bad}); !errors.Is(err, tier.ErrConfig) {
		t.Errorf("a tier of no blocks: got %v, want tier.ErrConfig", err)
	}
}
