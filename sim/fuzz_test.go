package sim

import (
	"errors"
	"reflect"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/tier"
)

// workloadFromBytes decodes a small workload: the first byte picks the
// capacity (1-32 blocks), then each group of 3 bytes is a request: a prompt
// of 0-7 blocks drawn from 16 hashes (a shared head and a varying tail), an
// output length, and an arrival gap.
func workloadFromBytes(data []byte) (*Workload, int) {
	if len(data) == 0 {
		return nil, 0
	}
	capacity := 1 + int(data[0]%32)
	w := &Workload{Name: "fuzz", BlockTokens: 4, GroupKind: "session"}
	var at int64
	for i := 1; i+2 < len(data) && len(w.Requests) < 64; i += 3 {
		a, b, c := data[i], data[i+1], data[i+2]
		n := int(a % 8)
		hashes := make([]uint64, n)
		for j := range hashes {
			hashes[j] = uint64(j)*4 + uint64((a>>3)+uint8(j)*b)%4
		}
		at += int64(c % 8)
		w.Requests = append(w.Requests, Request{
			Timestamp: at, InputTokens: max(4*n-int(b%4), 0), OutputTokens: int(c >> 3),
			HashIDs: hashes, Group: uint64(a >> 6), Priority: int8(b % 3),
		})
	}
	return w, capacity
}

// FuzzPool replays and serves arbitrary small workloads under every
// strategy (serving at every granularity): no errors, the pool's
// accounting holds after every step, no strategy loads fewer blocks than
// Belady's MIN, nothing beats an unbounded cache, and the Index's path
// picks what the Policy's does, in a replay and in a serve run; in time,
// the engine keeps its caps and Little's law.
func FuzzPool(f *testing.F) {
	f.Add([]byte{3, 0x21, 0x13, 0x44, 0x7f, 0x02, 0x09, 0x33, 0x14, 0x50})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0x07, 0x01, 0x00})
	f.Add([]byte{31, 0x0e, 0x35, 0x10, 0x0e, 0x35, 0x10, 0x0f, 0x35, 0x10})
	f.Fuzz(func(t *testing.T, data []byte) {
		w, capacity := workloadFromBytes(data)
		if w == nil || len(w.Requests) == 0 {
			return
		}
		ceil := computeCeiling(w)
		cfg := Config{Capacity: capacity}
		opt, optLoads := runBelady(t, w, cfg)
		for _, s := range kvevict.Strategies() {
			rep, loads := runReplay(t, w, s, cfg)
			if loads < optLoads {
				t.Fatalf("%s loaded %d blocks, fewer than MIN's %d", s, loads, optLoads)
			}
			if rep.BlockHits > ceil.hits || opt.BlockHits > ceil.hits {
				t.Fatalf("%s hits %d, Belady %d, above the unbounded %d", s, rep.BlockHits, opt.BlockHits, ceil.hits)
			}
			checkReport(t, &rep)
			compareReplayPaths(t, w, s, capacity)
			for _, g := range []Granularity{GranularitySequence, GranularityTail} {
				fast, fastSteps := serveFingerprints(t, w, s, capacity, g, false)
				slow, slowSteps := serveFingerprints(t, w, s, capacity, g, true)
				fast.EvictionP50, fast.EvictionP99, slow.EvictionP50, slow.EvictionP99 = 0, 0, 0, 0
				if firstDifference(fastSteps, slowSteps) >= 0 || !reflect.DeepEqual(fast, slow) {
					t.Fatalf("serve %s at %s granularity: the Index's path and the Policy's differ", s, g)
				}
			}
			for _, g := range Granularities() {
				srv, err := Serve(w, s, ServeConfig{Config: cfg, TokenTime: 1000, Granularity: g,
					afterStep: func(p *pool) { checkPool(t, p) }})
				if g == GranularityBlock && errors.Is(err, errors.ErrUnsupported) {
					continue // ARC, S3-FIFO, SIEVE: lists of sequences, no tree
				}
				if err != nil {
					t.Fatalf("serve %s at %s granularity: %v", s, g, err)
				}
				checkReport(t, &srv)
			}
			// In time, under caps the bytes choose: the accounting holds,
			// the cap is kept, and Little's law (checkReport).
			batch, budget := 1+int(data[0]%4), 1+int(data[len(data)-1])*8
			srv, err := Serve(w, s, ServeConfig{Config: cfg, afterStep: func(p *pool) {
				checkPool(t, p)
				if len(p.running) > batch {
					t.Fatalf("%d running, max batch %d", len(p.running), batch)
				}
			}, EngineConfig: EngineConfig{Cost: clockCost(t, w.BlockTokens), MaxBatch: batch, TokenBudget: budget}})
			if err != nil {
				t.Fatalf("serve %s in time: %v", s, err)
			}
			checkReport(t, &srv)
		}
	})
}

// runReplay is Replay, also returning the blocks it loaded, checking the
// tier.Cache after every request.
func runReplay(t *testing.T, w *Workload, s kvevict.Strategy, cfg Config) (Report, int64) {
	t.Helper()
	p, err := kvevict.New(s)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tier.NewPolicyCache(p, cfg.Capacity)
	if err != nil {
		t.Fatal(err)
	}
	r := &replayer{w: w, cache: c}
	tl := newTally(w, computeCeiling(w))
	for i := range w.Requests {
		if _, err := r.request(i, tl); err != nil {
			t.Fatalf("%s, request %d: %v", s, i, err)
		}
		if err := r.cache.Check(); err != nil {
			t.Fatalf("%s, request %d: %v", s, i, err)
		}
	}
	return tl.report(string(s), "replay", cfg.Capacity), tl.loads
}

func runBelady(t *testing.T, w *Workload, cfg Config) (Report, int64) {
	t.Helper()
	var loads int64
	rep, err := belady(w, cfg, &loads)
	if err != nil {
		t.Fatal(err)
	}
	return rep, loads
}
