package sim_test

import (
	"fmt"
	"io"
	"log"
	"strings"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/sim"
	"github.com/sagellm/kvevict/tier"
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

// Serve a workload through a pool with a host tier below it, in time: the
// blocks the pool lost come back over the host's link before the prefill
// of the rest.
func ExampleServe_tiers() {
	w, err := sim.Synthetic("agentic", 1, 400)
	if err != nil {
		log.Fatal(err)
	}
	m, err := tier.LookupModel("llama-3-8b")
	if err != nil {
		log.Fatal(err)
	}
	gpu, err := tier.LookupGPU("h100")
	if err != nil {
		log.Fatal(err)
	}
	cost, err := tier.NewCost(m, w.BlockTokens, gpu.Compute(), nil) // the host over PCIe Gen5
	if err != nil {
		log.Fatal(err)
	}
	cfg := sim.ServeConfig{Config: sim.Config{Capacity: 600}, EngineConfig: sim.EngineConfig{Cost: cost, MaxBatch: 32, TokenBudget: 2048}}
	for _, below := range []sim.Tiers{{}, {Below: []tier.Level{{Medium: tier.CPU, Capacity: 2400, Strategy: kvevict.LRU}}}} {
		cfg.Tiers = below
		rep, err := sim.Serve(w, kvevict.LRU, cfg)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d tiers below: hit ratio %.3f, TTFT p99 %.1f s, loads %.1f s\n", len(below.Below), rep.HitRatio, rep.TTFTP99, rep.LoadSeconds)
	}
	// Output:
	// 0 tiers below: hit ratio 0.217, TTFT p99 83.9 s, loads 0.0 s
	// 1 tiers below: hit ratio 0.704, TTFT p99 54.8 s, loads 15.2 s
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
	// agentic   100 requests, groups are sessions: about 50 concurrent agent sessions growing to 35-90K tokens, pausing for tool calls, amid bursts of one-shot requests
	// chat      100 requests, groups are sessions: multi-turn chat sessions over a few shared system prompts
	// documents 100 requests, groups are sessions: batch jobs asking several questions about each of a set of long documents
	// multiturn 100 requests, groups are sessions: long conversations whose context grows to tens of thousands of tokens, returning after pauses
	// scan      100 requests, groups are sessions: chat with a burst of one-shot long prompts in the middle that pollutes LRU
	// tenants   100 requests, groups are tenants: chat from three tenants of low, normal and high priority, the low one busiest
}

// Stream a trace request by request.
func ExampleTraceReader() {
	trace := `{"timestamp": 0, "input_length": 1200, "output_length": 40, "hash_ids": [0, 1, 2]}
{"timestamp": 250, "input_length": 1300, "output_length": 12, "hash_ids": [0, 1, 2, 3]}
{"timestamp": 300, "input_length": "long", "output_length": 12, "hash_ids": [0]}
`
	tr := sim.NewTraceReader(strings.NewReader(trace))
	for {
		req, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err)
			break
		}
		fmt.Printf("at %d ms: %d blocks, session %d\n", req.Timestamp, len(req.HashIDs), req.Group)
	}
	// Output:
	// at 0 ms: 3 blocks, session 0
	// at 250 ms: 4 blocks, session 0
	// trace line 3: "input_length" must be an integer, got a JSON string
}

// countingEvictor is an Evictor that wraps another: the seam where a
// different eviction granularity plugs into the pool.
type countingEvictor struct {
	sim.Evictor
	calls, blocks int
}

func (e *countingEvictor) Evict(s *sim.EvictionState, need int) (sim.Eviction, error) {
	res, err := e.Evictor.Evict(s, need)
	if err == nil {
		e.calls++
		e.blocks += len(res.Blocks)
	}
	return res, err
}

// Plug an Evictor into the pool of Serve.
func ExampleEvictor() {
	w, err := sim.Synthetic("documents", 1, 300)
	if err != nil {
		log.Fatal(err)
	}
	p, err := kvevict.New(kvevict.LRU)
	if err != nil {
		log.Fatal(err)
	}
	ev := &countingEvictor{Evictor: sim.NewTailEvictor(p)}
	cfg := sim.ServeConfig{Config: sim.Config{Capacity: 300}, Evictor: ev}
	if _, err := sim.Serve(w, kvevict.LRU, cfg); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d evictions freed %d blocks; the policy saw %d selections\n",
		ev.calls, ev.blocks, p.Metrics().Selections)
	// Output:
	// 804 evictions freed 3267 blocks; the policy saw 804 selections
}

// Evict single blocks, deepest first, from a prefix tree ranked by LRU.
func ExampleBlockEvictor() {
	w, err := sim.Synthetic("multiturn", 1, 300)
	if err != nil {
		log.Fatal(err)
	}
	ev, err := sim.NewBlockEvictor(kvevict.LRU, 5000) // a pool of 5,000 blocks
	if err != nil {
		log.Fatal(err)
	}
	cfg := sim.ServeConfig{Config: sim.Config{Capacity: 5000}, Granularity: sim.GranularityBlock, Evictor: ev}
	rep, err := sim.Serve(w, kvevict.LRU, cfg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d tokens re-prefilled, %d blocks evicted\n", rep.Granularity, rep.RePrefillTokens, rep.EvictedBlocks)
	// Output:
	// block: 835552 tokens re-prefilled, 38104 blocks evicted
}

// Compare the granularities of Serve on long conversations.
func ExampleGranularity() {
	w, err := sim.Synthetic("multiturn", 1, 120)
	if err != nil {
		log.Fatal(err)
	}
	for _, g := range sim.Granularities() {
		rep, err := sim.Serve(w, kvevict.LRU, sim.ServeConfig{Config: sim.Config{Capacity: 3000}, Granularity: g})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%-8s %d tokens re-prefilled\n", rep.Granularity, rep.RePrefillTokens)
	}
	// Output:
	// sequence 191712 tokens re-prefilled
	// tail     177152 tokens re-prefilled
	// block    170528 tokens re-prefilled
}
