package sim

import (
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/tier"
)

// llama returns the model the tests price requests by: Llama-3-8B.
func llama(tb testing.TB) tier.Model {
	tb.Helper()
	m, err := tier.LookupModel("llama-3-8b")
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// mustCost is tier.NewCost for arguments a test knows are valid.
func mustCost(tb testing.TB, m tier.Model, blockTokens int, c tier.Compute, links map[tier.Medium]tier.Link) *tier.Cost {
	tb.Helper()
	cost, err := tier.NewCost(m, blockTokens, c, links)
	if err != nil {
		tb.Fatal(err)
	}
	return cost
}

// TestReplayTiersGPUIsReplay: the GPU of a tiered replay admits every
// request's blocks as a plain replay does, whatever lies below it, so its
// hits and evictions are Replay's, block for block (Auto above an
// exclusive tier, told of it, a Replay's told the same); the tiers below
// only add hits. And a host tier that holds every block under write-through
// serves every block an unbounded cache would: the tiered replay's prefill
// is the unbounded cache's.
func TestReplayTiersGPUIsReplay(t *testing.T) {
	skipUnderRace(t)
	t.Parallel()
	requests, strategies := 600, []kvevict.Strategy{kvevict.LRU, kvevict.LFU, kvevict.ARC, kvevict.S3FIFO, kvevict.Auto}
	if reduced() {
		requests, strategies = 150, strategies[2:3]
	}
	w, err := Synthetic("multiturn", 1, requests)
	if err != nil {
		t.Fatal(err)
	}
	const capacity = 300
	modes := []struct {
		name string
		cfg  TierConfig
	}{
		{"through", TierConfig{}},
		{"selective=2", TierConfig{Tiers: Tiers{Write: tier.WriteSelective, Threshold: 2}}},
		{"back", TierConfig{Tiers: Tiers{Write: tier.WriteBack}}},
		{"back-exclusive", TierConfig{Tiers: Tiers{Write: tier.WriteBack, Exclusive: true}}},
	}
	for _, s := range strategies {
		for _, m := range modes {
			cfg := m.cfg
			cfg.Capacity = capacity
			cfg.Below = []tier.Level{
				{Medium: tier.CPU, Capacity: 2 * capacity, Strategy: kvevict.SIEVE},
				{Medium: tier.Storage, Capacity: 4 * capacity, Strategy: kvevict.LRU},
			}
			var opts []kvevict.Option
			if s == kvevict.Auto && cfg.Exclusive {
				opts = append(opts, kvevict.WithTierBelow(6*capacity))
			}
			plain, err := Replay(w, s, Config{Capacity: capacity, Options: opts})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := ReplayTiers(w, s, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if rep.GPUHits != plain.BlockHits || rep.EvictedBlocks != plain.EvictedBlocks || rep.BlockRefs != plain.BlockRefs {
				t.Errorf("%s, %s: GPU hits %d, evicted %d, refs %d; Replay's %d, %d, %d", s, m.name,
					rep.GPUHits, rep.EvictedBlocks, rep.BlockRefs, plain.BlockHits, plain.EvictedBlocks, plain.BlockRefs)
			}
			if rep.BlockHits < rep.GPUHits || rep.BlockHits+rep.Misses != rep.BlockRefs || rep.Tiers[0].Hits != rep.GPUHits {
				t.Errorf("%s, %s: hits %d (GPU %d), misses %d, refs %d", s, m.name, rep.BlockHits, rep.GPUHits, rep.Misses, rep.BlockRefs)
			}
			var below int64
			for _, st := range rep.Tiers[1:] {
				below += st.Hits
			}
			if rep.BlockHits != rep.GPUHits+below {
				t.Errorf("%s, %s: %d hits, %d on the GPU and %d below", s, m.name, rep.BlockHits, rep.GPUHits, below)
			}
			if rep.RePrefilledBlocks > rep.EvictedBlocks {
				t.Errorf("%s, %s: %d re-prefilled of %d evicted", s, m.name, rep.RePrefilledBlocks, rep.EvictedBlocks)
			}
		}
		all, err := ReplayTiers(w, s, TierConfig{Config: Config{Capacity: capacity},
			Tiers: Tiers{Below: []tier.Level{{Medium: tier.CPU, Capacity: 1 << 20, Strategy: kvevict.LRU}}}})
		if err != nil {
			t.Fatal(err)
		}
		if all.PrefillTokens != all.UnboundedPrefillTokens || all.RePrefilledBlocks != 0 {
			t.Errorf("%s over a host tier that holds everything: prefill %d tokens, unbounded %d, re-prefilled %d",
				s, all.PrefillTokens, all.UnboundedPrefillTokens, all.RePrefilledBlocks)
		}
	}
}

// TestReplayTiersClock works a two-request script by hand: what each
// request loads and recomputes, priced by the cost model. Blocks of 4
// tokens; the GPU holds 1 block, the host 4, written through.
//   - request 1, blocks [1 2], 8 tokens: both computed, Prefill(0, 8); the
//     GPU keeps block 1, the host stores both.
//   - request 2, blocks [1 2 3], 10 tokens: 1 on the GPU, 2 loaded from
//     the host (Load(CPU, 1), paying if it beats Prefill(4, 8)), 3
//     computed, Prefill(8, 10).
func TestReplayTiersClock(t *testing.T) {
	w := &Workload{Name: "script", BlockTokens: 4, GroupKind: "session", Requests: []Request{
		{HashIDs: []uint64{1, 2}, InputTokens: 8},
		{HashIDs: []uint64{1, 2, 3}, InputTokens: 10},
	}}
	model := llama(t)
	cost := mustCost(t, model, 4, tier.DefaultCompute(), nil)
	rep, err := ReplayTiers(w, kvevict.LRU, TierConfig{Config: Config{Capacity: 1}, Cost: cost,
		Tiers: Tiers{Below: []tier.Level{{Medium: tier.CPU, Capacity: 4, Strategy: kvevict.LRU}}}})
	if err != nil {
		t.Fatal(err)
	}
	compute := cost.Prefill(0, 8) + cost.Prefill(8, 10)
	load := cost.Load(tier.CPU, 1)
	var unpaid int64
	if !cost.Pays(tier.CPU, 1, 4) {
		unpaid = 1
	}
	if rep.ComputeSeconds != compute.Seconds() || rep.LoadSeconds != load.Seconds() ||
		rep.PrefillSeconds != (compute+load).Seconds() || rep.UnpaidLoads != unpaid {
		t.Fatalf("compute %v s, load %v s, prefill %v s, unpaid %d; want %v, %v, %v, %d", rep.ComputeSeconds,
			rep.LoadSeconds, rep.PrefillSeconds, rep.UnpaidLoads, compute.Seconds(), load.Seconds(), (compute + load).Seconds(), unpaid)
	}
	cpu := rep.Tiers[1]
	if rep.GPUHits != 1 || cpu.Hits != 1 || rep.Misses != 3 || cpu.StoredBlocks != 3 ||
		cpu.BytesRead != cost.BlockBytes() || cpu.BytesWritten != 3*cost.BlockBytes() || cpu.WriteAmplification != 3 {
		t.Fatalf("GPU hits %d, host %+v, misses %d", rep.GPUHits, cpu, rep.Misses)
	}
}

// TestReplayTiersEvictionLatency: a tiered replay whose GPU evicted blocks
// reports the latency of its choices, as a plain replay does, rather than
// zeros that read as free.
func TestReplayTiersEvictionLatency(t *testing.T) {
	w, err := LoadTrace(excerpt)
	if err != nil {
		t.Fatal(err)
	}
	below := []tier.Level{{Medium: tier.CPU, Capacity: 800, Strategy: kvevict.LRU}}
	rep, err := ReplayTiers(w, kvevict.LRU, TierConfig{Config: Config{Capacity: 200}, Tiers: Tiers{Below: below}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.EvictedBlocks == 0 {
		t.Fatal("the GPU evicted nothing: the test exercises nothing")
	}
	if rep.EvictionP50 <= 0 || rep.EvictionP99 < rep.EvictionP50 {
		t.Errorf("GPU evicted %d blocks, eviction p50 %d ns, p99 %d ns; want 0 < p50 <= p99", rep.EvictedBlocks, rep.EvictionP50, rep.EvictionP99)
	}
}
