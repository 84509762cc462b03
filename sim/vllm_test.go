package sim

import (
	"fmt"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/tier"
)

// vllmFigures are vLLM's offloading on the conversation trace, from its
// own code: TestVLLMOffloadFigures says how they were derived.
var vllmFigures = []struct {
	policy                                       kvevict.Strategy
	gpu                                          int
	gpuHits, cpuHits, stored, cpuEvicted, failed int64
}{
	{kvevict.LRU, 1000, 12_847, 12_117, 263_536, 259_536, 0},
	{kvevict.LRU, 2500, 16_974, 44_072, 227_454, 217_454, 0},
	{kvevict.LRU, 5000, 32_260, 50_775, 205_465, 185_465, 0},
	{kvevict.ARC, 1000, 12_847, 16_260, 192_946, 188_946, 66_244},
	{kvevict.ARC, 2500, 16_974, 39_541, 231_481, 221_481, 0},
	{kvevict.ARC, 5000, 32_260, 50_085, 206_155, 186_155, 0},
}

// TestVLLMOffloadFigures replays the conversation trace through
// tier.WriteVLLM and checks it against vLLM's own code.
//
// How the figures were derived: vLLM's files, unmodified, were run under
// Debian's python3 3.11 with numpy, torch and vllm.logger stubbed, outside
// this repository: vllm/v1/kv_offload/cpu/manager.py (the code index's
// c8dd6f9, the bytes of upstream main's 5bd8c71 of 2026-05-14),
// cpu/policies/base.py (index 59bf71d), kv_offload/base.py (index
// 14d6506), and cpu/policies/lru.py and arc.py at upstream c42981d, the
// versions of that policy interface (touch(keys), evict(n, protected));
// the call order is that of the OffloadingConnectorScheduler at 5bd8c71,
// before PR #51787. CPUOffloadingManager(num_blocks = 4 x GPU,
// cache_policy = "lru" or "arc"), store_threshold 1, events off; keys are
// the trace's hash ids, one CPU block per GPU block. Per request, in file
// order: g = the GPU's prefix hits (the GPU being the plain replay's LRU
// pool, whose hits and evictions the harness checked against `kvevict
// compare`: 12,847 / 16,974 / 32,260 hits); touch(all keys); h =
// consecutive lookup hits from key g; prepare_load and complete_load of
// keys[g:g+h]; the GPU admits the request; prepare_store(keys[start:]),
// start = g+h if h > 0 else 0; if it stored any, touch(all keys) then
// complete_store. A prepare_store that returns None is a failed store and
// is not retried.
//
// stored are the blocks newly written to the host, evicted the host's
// victims, failed the blocks not yet on the host that failed stores
// offered (vLLM's ARC failed 1,357 stores at 1,000 blocks, offering
// 67,620 blocks of which 66,244 were not on the host).
func TestVLLMOffloadFigures(t *testing.T) {
	if reduced() {
		t.Skip("six replays of the whole trace; run without -short and -race")
	}
	w := loadConversation(t)
	for _, c := range vllmFigures {
		t.Run(fmt.Sprintf("%s/gpu=%d", c.policy, c.gpu), func(t *testing.T) {
			rep, err := ReplayTiers(w, kvevict.LRU, TierConfig{
				Config: Config{Capacity: c.gpu},
				Tiers:  Tiers{Below: []tier.Level{{Medium: tier.CPU, Capacity: 4 * c.gpu, Strategy: c.policy}}, Write: tier.WriteVLLM},
			})
			if err != nil {
				t.Fatal(err)
			}
			cpu := rep.Tiers[1]
			if rep.GPUHits != c.gpuHits || cpu.Hits != c.cpuHits || cpu.StoredBlocks != c.stored ||
				cpu.EvictedBlocks != c.cpuEvicted || cpu.FailedStores != c.failed {
				t.Errorf("GPU hits %d, host hits %d, stored %d, evicted %d, failed %d; vLLM's %d, %d, %d, %d, %d",
					rep.GPUHits, cpu.Hits, cpu.StoredBlocks, cpu.EvictedBlocks, cpu.FailedStores,
					c.gpuHits, c.cpuHits, c.stored, c.cpuEvicted, c.failed)
			}
			if want := rep.BlockRefs - c.gpuHits - c.cpuHits; rep.Misses != want {
				t.Errorf("misses %d, want %d", rep.Misses, want)
			}
		})
	}
}

// TestChosenTiersBeatVLLM checks the tier configuration docs/tiers.md
// chooses on the synthetic workloads alone (docs/tiers_choose.py: GPU LRU,
// a host tier of Auto four times its size, written back, exclusive) on the
// conversation trace, against vLLM's offloading with lru as vLLM's own
// code gives it (vllmFigures): more hits at each GPU size, and on average
// at least a quarter of the gap between vLLM's hit ratio and Belady's MIN
// at the total capacity (GPU and host) closed.
func TestChosenTiersBeatVLLM(t *testing.T) {
	if reduced() {
		t.Skip("three tiered replays and three of Belady over the whole trace; run without -short and -race")
	}
	w := loadConversation(t)
	closed := 0.0
	n := 0
	for _, v := range vllmFigures {
		if v.policy != kvevict.LRU {
			continue
		}
		rep, err := ReplayTiers(w, kvevict.LRU, TierConfig{
			Config: Config{Capacity: v.gpu},
			Tiers:  Tiers{Below: []tier.Level{{Medium: tier.CPU, Capacity: 4 * v.gpu, Strategy: kvevict.Auto}}, Write: tier.WriteBack, Exclusive: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		belady, err := Belady(w, Config{Capacity: 5 * v.gpu})
		if err != nil {
			t.Fatal(err)
		}
		vllm := float64(v.gpuHits+v.cpuHits) / float64(rep.BlockRefs)
		share := (rep.HitRatio - vllm) / (belady.HitRatio - vllm)
		t.Logf("GPU %d blocks: vLLM %.4f, chosen %.4f, Belady total %.4f: %.1f%% of the gap", v.gpu, vllm, rep.HitRatio, belady.HitRatio, 100*share)
		if rep.HitRatio <= vllm {
			t.Errorf("GPU %d blocks: hit ratio %.4f, not above vLLM's %.4f", v.gpu, rep.HitRatio, vllm)
		}
		closed += share
		n++
	}
	if mean := closed / float64(n); mean < 0.25 {
		t.Errorf("mean share of the gap closed %.1f%%, want at least 25%%", 100*mean)
	}
}
