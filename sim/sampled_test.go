package sim

import (
	"fmt"
	"math"
	"testing"

	"github.com/sagellm/kvevict"
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
