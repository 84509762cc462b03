package sim_test

import (
	"fmt"
	"log"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/sim"
)

// Route a chat workload over four engines, evenly and by the prefix each
// engine holds.
func ExampleCluster() {
	w, err := sim.Synthetic("chat", 1, 1000)
	if err != nil {
		log.Fatal(err)
	}
	direct, err := sim.NewDirectRouter(0.5) // half a block of score per request of load
	if err != nil {
		log.Fatal(err)
	}
	cfg := sim.ClusterConfig{Config: sim.Config{Capacity: 300}, Engines: 4}
	for _, r := range []struct {
		name   string
		router sim.Router
	}{{"round-robin", sim.NewRoundRobin()}, {"direct", direct}} {
		rep, err := sim.Cluster(w, kvevict.LRU, r.router, cfg)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%-11s hit ratio %.3f, load imbalance %.2f\n", r.name, rep.HitRatio, rep.LoadImbalance)
	}
	// Output:
	// round-robin hit ratio 0.415, load imbalance 1.00
	// direct      hit ratio 0.563, load imbalance 1.04
}
