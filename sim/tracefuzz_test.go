package sim

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/tier"
)

// FuzzTraceRuns reads arbitrary bytes as a trace and runs what the reader
// accepts through every mode the command runs a trace in: a replay, a
// serve run at each granularity, a tiered replay and a cluster in time
// behind a router that reads the engines. No input may panic, and a trace
// the reader accepts must run: the reader's bounds ([MaxTimestamp],
// [MaxTokens]) are what every run can take.
func FuzzTraceRuns(f *testing.F) {
	excerpt, err := os.ReadFile(excerpt)
	if err != nil {
		f.Fatal(err)
	}
	lines := bytes.SplitAfter(excerpt, []byte("\n"))
	f.Add(bytes.Join(lines[:8], nil), uint8(4))
	f.Add([]byte(`{"timestamp": 0, "input_length": 6758, "output_length": 16777216, "hash_ids": [0, 1, 2, 3]}`+"\n"+
		`{"timestamp": 1099511627776, "input_length": 16777216, "output_length": 500, "hash_ids": [0, 1, 5]}`), uint8(3))
	f.Add(append([]byte(`{"timestamp": 0, "input_length": 6758, "output_length": 9223372036854775000, "hash_ids": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]}`+"\n"),
		bytes.Join(lines[1:20], nil)...), uint8(0))
	f.Add([]byte(`{"timestamp": 5, "input_length": 0, "output_length": 0, "hash_ids": [7, 7, 7], "session_id": 3}`+"\n"+
		`{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [], "priority": -128}`), uint8(1))
	f.Add([]byte(`{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2], "session_id": "a", "request_id": "a1"}`+"\n"+
		`{"timestamp": 0, "input_length": 4, "output_length": 16777216, "hash_ids": [3], "session_id": "b", "request_id": "b1"}`+"\n"+
		`{"timestamp": 1, "input_length": 700, "output_length": 1, "hash_ids": [1, 2], "session_id": "a", "delay": 2592000000}`+"\n"+
		`{"timestamp": 1, "input_length": 4, "output_length": 1, "hash_ids": [4], "wait_for": ["a1", "b1"], "delay_ms": 0.5, "tool_wait_ms": 800}`), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, capacity uint8) {
		w, err := ReadWorkload(bytes.NewReader(data), "fuzz")
		if err != nil || len(w.Requests) > 64 {
			return
		}
		cfg := Config{Capacity: 1 + int(capacity%64)}
		if _, err := Replay(w, kvevict.LRU, cfg); err != nil {
			t.Fatalf("replay: %v", err)
		}
		for _, g := range Granularities() {
			if _, err := Serve(w, kvevict.LRU, ServeConfig{Config: cfg, Granularity: g, TokenTime: MaxTokenTime}); err != nil {
				t.Fatalf("serve at %s granularity: %v", g, err)
			}
		}
		cost := mustCost(t, llama(t), w.BlockTokens, tier.DefaultCompute(), nil)
		below := []tier.Level{{Medium: tier.CPU, Capacity: 2 * cfg.Capacity, Strategy: kvevict.LRU}}
		if _, err := ReplayTiers(w, kvevict.LRU, TierConfig{Config: cfg, Cost: cost, Tiers: Tiers{Below: below}}); err != nil {
			t.Fatalf("tiered replay: %v", err)
		}
		r, err := NewDirectRouter(0.5)
		if err != nil {
			t.Fatal(err)
		}
		ccfg := ClusterConfig{Config: cfg, Engines: 2, EngineConfig: EngineConfig{Cost: cost}, Tiers: Tiers{Below: below}}
		if _, err := Cluster(w, kvevict.Auto, r, ccfg); err != nil {
			t.Fatalf("cluster: %v", err)
		}
		ccfg.Speedup = 1e-3
		if _, err := Cluster(w, kvevict.LRU, NewRoundRobin(), ccfg); err != nil && !errors.Is(err, kvevict.ErrInvalidArgument) {
			t.Fatalf("cluster slowed down: %v", err)
		}
		// Engines that decode, routed on a mirror of their events: a
		// small batch and budget, so that requests queue, chunk and are
		// preempted.
		m, err := NewMirrorRouter(newExactMirror(2), 0.5)
		if err != nil {
			t.Fatal(err)
		}
		dcfg := ClusterConfig{Config: cfg, Engines: 2, Decode: true, EngineConfig: EngineConfig{Cost: cost, MaxBatch: 2, TokenBudget: 64}}
		rep, err := Cluster(w, kvevict.LRU, m, dcfg)
		if err != nil {
			t.Fatalf("cluster that decodes: %v", err)
		}
		if rep.MispredictedPerRequest != 0 {
			t.Fatalf("a mirror of every event mispredicted %v blocks a request", rep.MispredictedPerRequest)
		}
		// The same over a host tier, written back, on a mirror of the
		// pools' and the tiers' events, which refuses a contradiction.
		tr, err := NewTierRouter(newExactTierMirror(2), LLMDTierWeights, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		dcfg.Tiers = Tiers{Below: below, Write: tier.WriteBack}
		if rep, err = Cluster(w, kvevict.LRU, tr, dcfg); err != nil {
			t.Fatalf("cluster that decodes over tiers: %v", err)
		}
		if rep.MispredictedPerRequest != 0 {
			t.Fatalf("over tiers, a mirror of every event mispredicted %v blocks a request", rep.MispredictedPerRequest)
		}
		if _, err := Serve(w, kvevict.LRU, ServeConfig{Config: cfg, Granularity: GranularityTail, EngineConfig: EngineConfig{Cost: cost}, Tiers: dcfg.Tiers}); err != nil {
			t.Fatalf("serve over tiers: %v", err)
		}
	})
}
