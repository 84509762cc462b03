package sim_test

import (
	"fmt"
	"log"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/sim"
	"github.com/sagellm/kvevict/tier"
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

// Serve an agentic workload on two engines that batch and decode, on one
// H100 each with Llama-3-8B and vLLM's scheduler defaults, its sessions'
// turns closed loop, routed round robin. Every time is modelled.
func ExampleCluster_decode() {
	w, err := sim.Synthetic("agentic", 1, 300)
	if err != nil {
		log.Fatal(err)
	}
	model, err := tier.LookupModel("llama-3-8b")
	if err != nil {
		log.Fatal(err)
	}
	gpu, err := tier.LookupGPU("h100")
	if err != nil {
		log.Fatal(err)
	}
	cost, err := tier.NewCost(model, w.BlockTokens, gpu.Compute(), nil)
	if err != nil {
		log.Fatal(err)
	}
	maxBatch, tokenBudget := sim.VLLMSchedulerDefaults(gpu)
	cfg := sim.ClusterConfig{Config: sim.Config{Capacity: 2000}, Engines: 2, Decode: true,
		EngineConfig: sim.EngineConfig{Cost: cost, MaxBatch: maxBatch, TokenBudget: tokenBudget}}
	rep, err := sim.Cluster(w, kvevict.LRU, sim.NewRoundRobin(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("hit ratio %.3f, TTFT p99 %.2f s, TPOT p99 %.3f s, sessions done in %.0f s (median)\n",
		rep.HitRatio, rep.TTFTP99, rep.TPOTP99, rep.SessionCompletionP50)
	// Output:
	// hit ratio 0.560, TTFT p99 15.31 s, TPOT p99 0.399 s, sessions done in 32 s (median)
}
