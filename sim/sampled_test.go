package sim

import (
	"fmt"
	"testing"

	"github.com/sagellm/kvevict"
)

// TestSampledDelta replays two small synthetic workloads (500 requests, a
// 500-block pool) with exact selection and with kvevict.WithSampling(5) and
// (16), in both modes, and checks every hit ratio against a golden number
// from a real run (goldenTolerance): the gap between sampled and exact that
// README reports, on a workload small enough for -race. Sampling is seeded,
// so a run is deterministic.
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
	golden := map[string]float64{
		"chat/replay/lru/k=0": 0.4754, "chat/replay/lru/k=5": 0.4488, "chat/replay/lru/k=16": 0.4700,
		"chat/replay/slru/k=0": 0.4651, "chat/replay/slru/k=5": 0.4484, "chat/replay/slru/k=16": 0.4583,
		"chat/serve/lru/k=0": 0.4715, "chat/serve/lru/k=5": 0.4728, "chat/serve/lru/k=16": 0.4732,
		"chat/serve/slru/k=0": 0.4737, "chat/serve/slru/k=5": 0.4701, "chat/serve/slru/k=16": 0.4754,
		"scan/replay/lru/k=0": 0.4146, "scan/replay/lru/k=5": 0.3912, "scan/replay/lru/k=16": 0.4075,
		"scan/replay/slru/k=0": 0.4031, "scan/replay/slru/k=5": 0.3826, "scan/replay/slru/k=16": 0.3976,
		"scan/serve/lru/k=0": 0.4136, "scan/serve/lru/k=5": 0.4093, "scan/serve/lru/k=16": 0.4131,
		"scan/serve/slru/k=0": 0.4144, "scan/serve/slru/k=5": 0.4048, "scan/serve/slru/k=16": 0.4126,
	}
	for _, tc := range []struct {
		w        *Workload
		capacity int
	}{{chat, 500}, {scan, 500}} {
		for _, mode := range []string{"replay", "serve"} {
			for _, s := range []kvevict.Strategy{kvevict.LRU, kvevict.SLRU} {
				for _, k := range []int{0, 5, 16} {
					cfg := Config{Capacity: tc.capacity}
					if k > 0 {
						cfg.Options = []kvevict.Option{kvevict.WithSampling(k)}
					}
					var rep Report
					if mode == "serve" {
						rep, err = Serve(tc.w, s, ServeConfig{Config: cfg})
					} else {
						rep, err = Replay(tc.w, s, cfg)
					}
					if err != nil {
						t.Fatal(err)
					}
					name := fmt.Sprintf("%s/%s/%s/k=%d", tc.w.Name, mode, s, k)
					t.Logf("%-22s hit ratio %.4f", name, rep.HitRatio)
					if want, ok := golden[name]; ok {
						checkRatio(t, name, rep.HitRatio, want)
					} else {
						t.Errorf("%s: no golden number", name)
					}
				}
			}
		}
	}
}
