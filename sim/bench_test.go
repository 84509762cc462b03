package sim

import (
	"fmt"
	"testing"

	"github.com/sagellm/kvevict"
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

// BenchmarkServe serves the same workload through the pool.
func BenchmarkServe(b *testing.B) {
	w, err := Synthetic("chat", 1, 2000)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{250, 1000, 4000} {
		b.Run(fmt.Sprintf("strategy=lru/n=%d", n), func(b *testing.B) {
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
	}
}
