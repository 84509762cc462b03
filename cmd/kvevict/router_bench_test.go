package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/kvevents"
	"github.com/sagellm/kvevict/prefix"
	"github.com/sagellm/kvevict/sim"
)

// conversationTrace is the full Mooncake conversation trace, beside the
// repository; the router benchmark skips without it.
const conversationTrace = "../../../shared/traces/mooncake_conversation.jsonl"

// routerLoadWindow and routerLoadWeight define the load a router weighs
// against prefix match: the requests an engine received among the last
// routerLoadWindow, each costing routerLoadWeight blocks of match.
const (
	routerLoadWindow = 64
	routerLoadWeight = 0.5
)

// engine is one serving engine of the simulated cluster: a pool of blocks
// whose stores and removals go, as vLLM events through the wire encoding,
// into the router's mirror under the engine's topic.
type engine struct {
	topic   string
	tree    *prefix.Tree
	pending []kvevents.Event
}

// routeTrace replays w over n engines of capacity blocks each, routing
// every request by prefix match (scored on the mirror) or round robin, and
// returns the block hit ratio: prompt blocks found on the engine chosen,
// over all prompt blocks.
func routeTrace(b *testing.B, w *sim.Workload, n, capacity int, byPrefix bool) float64 {
	mirror, err := kvevents.NewMirror(capacity)
	if err != nil {
		b.Fatal(err)
	}
	engines := make([]*engine, n)
	for i := range engines {
		e := &engine{topic: fmt.Sprintf("kv@pod-%d@m", i)}
		e.tree, err = newPoolTree(kvevict.LRU, capacity, func(ev prefix.Event) {
			e.pending = append(e.pending, kvevents.FromPrefix(ev, int64(w.BlockTokens), nil))
		})
		if err != nil {
			b.Fatal(err)
		}
		engines[i] = e
	}
	var recent []int // engines of the last requests, for load
	load := make([]int, n)
	var hits, blocks int
	hashes := make([]kvevents.Hash, 0, 64)
	for r := range w.Requests {
		req := &w.Requests[r]
		hashes = hashes[:0]
		for _, h := range req.HashIDs {
			hashes = append(hashes, kvevents.IntHash(h))
		}
		pick := r % n
		if byPrefix {
			best := -1e18
			for i, e := range engines {
				score := float64(mirror.Match(e.topic, hashes)) - routerLoadWeight*float64(load[i])
				if score > best {
					best, pick = score, i
				}
			}
		}
		e := engines[pick]
		hits += e.tree.Peek(req.HashIDs)
		blocks += len(req.HashIDs)
		if err := admit(e.tree, req.HashIDs, int64(r), capacity); err != nil {
			b.Fatal(err)
		}
		payload, err := kvevents.Encode(&kvevents.EventBatch{Events: e.pending}, kvevents.EncodingMap)
		if err != nil {
			b.Fatal(err)
		}
		batch, skipped, err := kvevents.Decode(payload)
		if err != nil || skipped.Total() > 0 {
			b.Fatalf("decode: %v %v", err, skipped)
		}
		mirror.Apply(e.topic, &batch)
		e.pending = e.pending[:0]
		recent = append(recent, pick)
		load[pick]++
		if len(recent) > routerLoadWindow {
			load[recent[0]]--
			recent = recent[1:]
		}
	}
	return float64(hits) / float64(blocks)
}

// BenchmarkRouter measures what a KV-aware router gains on the conversation
// trace: the block hit ratio of routing by the longest prefix on each
// engine's mirror (less a load term) against round robin.
//
//	go test ./cmd/kvevict -run '^$' -bench Router -benchtime 1x
func BenchmarkRouter(b *testing.B) {
	if _, err := os.Stat(conversationTrace); err != nil {
		b.Skip("no conversation trace beside the repository")
	}
	w, err := sim.LoadTrace(conversationTrace)
	if err != nil {
		b.Fatal(err)
	}
	for _, engines := range []int{4, 8} {
		b.Run(fmt.Sprintf("engines=%d/capacity=2500", engines), func(b *testing.B) {
			var byPrefix, roundRobin float64
			for b.Loop() {
				byPrefix = routeTrace(b, w, engines, 2500, true)
				roundRobin = routeTrace(b, w, engines, 2500, false)
			}
			b.ReportMetric(byPrefix, "prefix_hit_ratio")
			b.ReportMetric(roundRobin, "round_robin_hit_ratio")
		})
	}
}
