package sim

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/tier"
)

// BenchmarkReplay replays the synthetic chat workload (2,000 requests, seed
// 1) at several capacities, reporting the hit ratio beside the time.
func BenchmarkReplay(b *testing.B) {
	w, err := Synthetic("chat", 1, 2000)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{250, 1000, 4000} {
		for _, s := range []kvevict.Strategy{kvevict.LRU, kvevict.SLRU} {
			b.Run(fmt.Sprintf("strategy=%s/n=%d", s, n), func(b *testing.B) {
				b.ReportAllocs()
				var rep Report
				for b.Loop() {
					if rep, err = Replay(w, s, Config{Capacity: n}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(rep.HitRatio, "hit-ratio")
			})
		}
		b.Run(fmt.Sprintf("strategy=belady/n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var rep Report
			for b.Loop() {
				if rep, err = Belady(w, Config{Capacity: n}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(rep.HitRatio, "hit-ratio")
		})
	}
}

// BenchmarkServe serves the same workload through the pool, and in time
// (clock=h100: llama-3-8b on the h100 preset, vLLM's caps for it) beside
// it, so that one run gives what the clock costs.
func BenchmarkServe(b *testing.B) {
	w, err := Synthetic("chat", 1, 2000)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{250, 1000, 4000} {
		b.Run(fmt.Sprintf("strategy=lru/clock=none/n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var rep Report
			for b.Loop() {
				if rep, err = Serve(w, kvevict.LRU, ServeConfig{Config: Config{Capacity: n}}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(rep.HitRatio, "hit-ratio")
			b.ReportMetric(float64(rep.Preemptions), "preemptions")
		})
		b.Run(fmt.Sprintf("strategy=lru/clock=h100/n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			cost := clockCost(b, w.BlockTokens)
			var rep Report
			for b.Loop() {
				if rep, err = Serve(w, kvevict.LRU, ServeConfig{Config: Config{Capacity: n}, EngineConfig: EngineConfig{Cost: cost, MaxBatch: 1024, TokenBudget: 8192}}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(rep.HitRatio, "hit-ratio")
			b.ReportMetric(rep.TTFTP99, "ttft-p99-s")
		})
	}
}

// BenchmarkReplayScale replays the chat workload of 20,000 requests
// (701,186 block references over 137,239 distinct blocks) under every
// strategy at pools of 4,000, 16,000 and 64,000 blocks, and reports the
// CPU per block reference: a replay's cost should not grow with the pool.
// Run it with -benchtime 1x; each iteration is a whole replay.
func BenchmarkReplayScale(b *testing.B) {
	w, err := Synthetic("chat", 1, 20_000)
	if err != nil {
		b.Fatal(err)
	}
	refs := blockRefs(w)
	for _, s := range kvevict.Strategies() {
		for _, n := range []int{4_000, 16_000, 64_000} {
			b.Run(fmt.Sprintf("strategy=%s/n=%d", s, n), func(b *testing.B) {
				var rep Report
				for b.Loop() {
					if rep, err = Replay(w, s, Config{Capacity: n}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(refs), "ns/ref")
				b.ReportMetric(rep.HitRatio, "hit-ratio")
			})
		}
	}
}

// BenchmarkReplayRequests replays the chat workload at 2,500 to 20,000
// requests on a pool of 16,000 blocks, for one strategy of each kind (a
// key, a history's lists, Auto's groups): a replay's cost should grow with
// the block references, not faster. Run it with -benchtime 1x.
func BenchmarkReplayRequests(b *testing.B) {
	for _, n := range []int{2_500, 5_000, 10_000, 20_000} {
		w, err := Synthetic("chat", 1, n)
		if err != nil {
			b.Fatal(err)
		}
		refs := blockRefs(w)
		for _, s := range []kvevict.Strategy{kvevict.LRU, kvevict.ARC, kvevict.Auto} {
			b.Run(fmt.Sprintf("strategy=%s/requests=%d", s, n), func(b *testing.B) {
				for b.Loop() {
					if _, err := Replay(w, s, Config{Capacity: 16_000}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(refs), "ns/ref")
				b.ReportMetric(float64(refs), "refs")
			})
		}
	}
}

// BenchmarkReplayDay replays a day of one engine's traffic: the chat
// workload of 285,000 requests (10,021,664 block references over 1,958,786
// distinct blocks) under every strategy, at pools of 10^5 and 10^6 blocks.
// It reports references per second and the largest heap seen during the
// run, which follows the blocks resident, at most the distinct ones, not
// the capacity. Run it with -benchtime 1x.
func BenchmarkReplayDay(b *testing.B) {
	w, err := Synthetic("chat", 1, 285_000)
	if err != nil {
		b.Fatal(err)
	}
	refs := blockRefs(w)
	for _, s := range kvevict.Strategies() {
		for _, n := range []int{100_000, 1_000_000} {
			b.Run(fmt.Sprintf("strategy=%s/n=%d", s, n), func(b *testing.B) {
				var peak uint64
				var ms runtime.MemStats
				sample := func(int, int) {
					runtime.ReadMemStats(&ms)
					peak = max(peak, ms.HeapInuse)
				}
				var rep Report
				for b.Loop() {
					runtime.GC()
					if rep, err = Replay(w, s, Config{Capacity: n, Progress: sample}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(refs)*float64(b.N)/b.Elapsed().Seconds(), "refs/s")
				b.ReportMetric(float64(peak)/(1<<20), "heap-MiB")
				b.ReportMetric(rep.HitRatio, "hit-ratio")
			})
		}
	}
}

// blockRefs counts w's block references.
func blockRefs(w *Workload) int {
	n := 0
	for i := range w.Requests {
		n += len(w.Requests[i].HashIDs)
	}
	return n
}

// BenchmarkReplayTiersDay is BenchmarkReplayDay's traffic across a GPU of
// 10^5 blocks and a host tier of 4 x 10^5, both of the strategy under test,
// written through, each request priced by the cost model (Llama-3-8B).
func BenchmarkReplayTiersDay(b *testing.B) {
	w, err := Synthetic("chat", 1, 285_000)
	if err != nil {
		b.Fatal(err)
	}
	model := llama(b)
	cost := mustCost(b, model, w.BlockTokens, tier.DefaultCompute(), nil)
	refs := blockRefs(w)
	for _, s := range []kvevict.Strategy{kvevict.LRU, kvevict.ARC, kvevict.Auto} {
		for _, write := range []tier.Write{tier.WriteThrough, tier.WriteBack} {
			b.Run(fmt.Sprintf("strategy=%s/write=%s", s, write), func(b *testing.B) {
				var rep TierReport
				for b.Loop() {
					cfg := TierConfig{Config: Config{Capacity: 100_000}, Cost: cost, Tiers: Tiers{Write: write, Below: []tier.Level{{Medium: tier.CPU, Capacity: 400_000, Strategy: s}}}}
					if rep, err = ReplayTiers(w, s, cfg); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(refs)*float64(b.N)/b.Elapsed().Seconds(), "refs/s")
				b.ReportMetric(rep.HitRatio, "hit-ratio")
			})
		}
	}
}

// BenchmarkCluster runs the synthetic chat workload (2,000 requests, seed
// 1) over 8 engines of 500 blocks behind round robin and the prefix
// router, with and without the time model: the time model's share of a
// cluster run's wall time is the ratio of the two.
func BenchmarkCluster(b *testing.B) {
	w, err := Synthetic("chat", 1, 2000)
	if err != nil {
		b.Fatal(err)
	}
	m := llama(b)
	cost := mustCost(b, m, w.BlockTokens, tier.DefaultCompute(), nil)
	for _, router := range []string{"round-robin", "direct"} {
		for _, timed := range []bool{false, true} {
			b.Run(fmt.Sprintf("router=%s/time=%v", router, timed), func(b *testing.B) {
				b.ReportAllocs()
				cfg := ClusterConfig{Config: Config{Capacity: 500}, Engines: 8}
				if timed {
					cfg.Cost = cost
				}
				for b.Loop() {
					r := NewRoundRobin()
					if router == "direct" {
						if r, err = NewDirectRouter(0.5); err != nil {
							b.Fatal(err)
						}
					}
					if _, err := Cluster(w, kvevict.LRU, r, cfg); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
