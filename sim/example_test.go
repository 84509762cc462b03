package sim_test

import (
	"fmt"
	"log"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/sim"
)

// Replay a trace under two strategies and Belady's bound.
func ExampleReplay() {
	w, err := sim.LoadTrace("testdata/mooncake_conversation_excerpt.jsonl")
	if err != nil {
		log.Fatal(err)
	}
	cfg := sim.Config{Capacity: 1600}
	for _, s := range []kvevict.Strategy{kvevict.LRU, kvevict.FILO} {
		rep, err := sim.Replay(w, s, cfg)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%-6s hit ratio %.3f\n", rep.Strategy, rep.HitRatio)
	}
	opt, err := sim.Belady(w, cfg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%-6s hit ratio %.3f\n", opt.Strategy, opt.HitRatio)
	// Output:
	// lru    hit ratio 0.042
	// filo   hit ratio 0.060
	// belady hit ratio 0.169
}

// Serve a synthetic workload through a paged KV pool.
func ExampleServe() {
	w, err := sim.Synthetic("chat", 1, 500)
	if err != nil {
		log.Fatal(err)
	}
	rep, err := sim.Serve(w, kvevict.LRU, sim.ServeConfig{Config: sim.Config{Capacity: 400}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d requests, hit ratio %.3f, %d preemptions\n", len(w.Requests), rep.HitRatio, rep.Preemptions)
	// Output:
	// 500 requests, hit ratio 0.429, 4 preemptions
}

// The synthetic workloads, by name.
func ExampleSynthetic() {
	for _, name := range sim.WorkloadNames() {
		w, err := sim.Synthetic(name, 7, 100)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%-9s %d requests, groups are %ss: %s\n", name, len(w.Requests), w.GroupKind, sim.DescribeWorkload(name))
	}
	// Output:
	// chat      100 requests, groups are sessions: multi-turn chat sessions over a few shared system prompts
	// documents 100 requests, groups are sessions: batch jobs asking several questions about each of a set of long documents
	// scan      100 requests, groups are sessions: chat with a burst of one-shot long prompts in the middle that pollutes LRU
	// tenants   100 requests, groups are tenants: chat from three tenants of low, normal and high priority, the low one busiest
}
