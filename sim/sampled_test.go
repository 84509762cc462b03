package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/tier"
)

// TestSampledDelta replays two small synthetic workloads (500 requests, a
// 500-block pool) with exact selection and with kvevict.WithSampling(5) and
// (16), in both modes, and checks that each sampled hit ratio stays within
// the distance of the exact one that docs/index.md states for its strategy
// and mode (sampledBound): a relation, so a change to the sampler's draws
// does not need new numbers, while a sampler that stops approximating the
// exact order fails.
func TestSampledDelta(t *testing.T) {
	if raceEnabled {
		t.Skip("long single-threaded replays; run without -race")
	}
	chat, err := Synthetic("chat", 1, 500)
	if err != nil {
		t.Fatal(err)
	}
	scan, err := Synthetic("scan", 1, 500)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []*Workload{chat, scan} {
		for _, mode := range []string{"replay", "serve"} {
			for _, s := range []kvevict.Strategy{kvevict.LRU, kvevict.SLRU} {
				var exact float64
				for _, k := range []int{0, 5, 16} {
					cfg := Config{Capacity: 500}
					if k > 0 {
						cfg.Options = []kvevict.Option{kvevict.WithSampling(k)}
					}
					var rep Report
					if mode == "serve" {
						rep, err = Serve(w, s, ServeConfig{Config: cfg})
					} else {
						rep, err = Replay(w, s, cfg)
					}
					if err != nil {
						t.Fatal(err)
					}
					name := fmt.Sprintf("%s/%s/%s/k=%d", w.Name, mode, s, k)
					t.Logf("%-22s hit ratio %.4f", name, rep.HitRatio)
					if k == 0 {
						exact = rep.HitRatio
						continue
					}
					if bound := sampledBound(s, mode, k); math.Abs(rep.HitRatio-exact) > bound {
						t.Errorf("%s: hit ratio %.4f, %.4f from exact %.4f, more than %.3f", name, rep.HitRatio, rep.HitRatio-exact, exact, bound)
					}
				}
			}
		}
	}
}

// sampledBound is the largest distance from the exact hit ratio that
// docs/index.md reports for sampled selection over the simulator's
// workloads: for recency (LRU) 3 points at k=5 and 1 at k=16 in replay
// mode, 1 and 0.3 in serve mode; for the frequency strategies (SLRU) 7.8
// and 4.5 in replay mode, 2.2 and 0.55 in serve mode.
func sampledBound(s kvevict.Strategy, mode string, k int) float64 {
	switch {
	case s != kvevict.LRU && mode == "serve" && k == 5:
		return 0.022
	case s != kvevict.LRU && mode == "serve":
		return 0.0055
	case s != kvevict.LRU && k == 5:
		return 0.078
	case s != kvevict.LRU:
		return 0.045
	case mode == "serve" && k == 5:
		return 0.010
	case mode == "serve":
		return 0.003
	case k == 5:
		return 0.030
	default:
		return 0.010
	}
}

// replayHitRatio runs the tier.Cache of the given capacity, driven by p, over
// trace and returns the hit ratio. It panics if the cache reports an error.
func replayHitRatio(p kvevict.Policy, capacity int, trace []uint64) float64 {
	c, err := tier.NewPolicyCache(p, capacity)
	if err != nil {
		panic(err)
	}
	for _, id := range trace {
		if _, err := c.Access(id); err != nil {
			panic(err)
		}
	}
	return float64(c.Hits()) / float64(len(trace))
}

// replayTraces are the sampled mode's workloads, 100k accesses each with
// fixed seeds, for a cache of replayCapacity sequences: Zipf popularity
// (s = 1.1) over 10x the cache, and a loop over 1.2x the cache.
const replayCapacity = 200

func replayTraces() map[string][]uint64 {
	const accesses = 100_000
	zipf := make([]uint64, accesses)
	z := rand.NewZipf(rand.New(rand.NewPCG(7, 8)), 1.1, 1, 10*replayCapacity-1)
	for i := range zipf {
		zipf[i] = z.Uint64()
	}
	loop := make([]uint64, accesses)
	for i := range loop {
		loop[i] = uint64(i % (replayCapacity * 6 / 5))
	}
	return map[string][]uint64{"zipf": zipf, "loop": loop}
}

// TestSampledHitRatio replays the traces with exact and sampled selection
// and checks the relations a user choosing k relies on: on the zipf trace,
// sampling stays within 0.01 of the exact hit ratio for k = 5 and 16; on
// the loop just longer than the cache, exact LRU and LFU never hit (each
// evicts the block the loop needs next), and sampling's random choices
// beat them, as random eviction beats LRU on loops.
func TestSampledHitRatio(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("replays 1.2M accesses")
	}
	traces := replayTraces()
	for _, s := range []kvevict.Strategy{kvevict.LRU, kvevict.LFU} {
		hits := map[string]float64{}
		for _, trace := range []string{"zipf", "loop"} {
			for _, k := range []int{0, 5, 16} {
				var opts []kvevict.Option
				if k > 0 {
					opts = append(opts, kvevict.WithSampling(k))
				}
				p, err := kvevict.New(s, opts...)
				if err != nil {
					t.Fatal(err)
				}
				hits[fmt.Sprintf("%s/k=%d", trace, k)] = replayHitRatio(p, replayCapacity, traces[trace])
			}
		}
		t.Logf("%s: %v", s, hits)
		for _, k := range []int{5, 16} {
			zipf, exact := hits[fmt.Sprintf("zipf/k=%d", k)], hits["zipf/k=0"]
			if math.Abs(zipf-exact) > 0.01 {
				t.Errorf("%s zipf: k=%d hit ratio %.4f, exact %.4f: more than 0.01 apart", s, k, zipf, exact)
			}
			if loop := hits[fmt.Sprintf("loop/k=%d", k)]; loop <= hits["loop/k=0"] {
				t.Errorf("%s loop: k=%d hit ratio %.4f, not above exact's %.4f", s, k, loop, hits["loop/k=0"])
			}
		}
		if hits["loop/k=0"] != 0 {
			t.Errorf("%s loop: exact hit ratio %.4f, want 0", s, hits["loop/k=0"])
		}
	}
}
