package sim

import (
	"fmt"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/internal/tracetest"
)

// TestReplayAutoBetweenLRUAndBelady replays the committed excerpt under
// Auto: it must not fall below LRU by more than the golden tolerance (with
// every request seen once and no partial block it is LRU by definition; the
// mechanisms it adds are there to do better), and it loads no fewer blocks
// than Belady's MIN.
func TestReplayAutoBetweenLRUAndBelady(t *testing.T) {
	skipUnderRace(t)
	w, err := LoadTrace(excerpt)
	if err != nil {
		t.Fatal(err)
	}
	for _, capacity := range []int{200, 400, 1600} {
		lru, err := Replay(w, kvevict.LRU, Config{Capacity: capacity})
		if err != nil {
			t.Fatal(err)
		}
		var loads int64
		auto, err := replay(w, kvevict.Auto, Config{Capacity: capacity}, &loads)
		if err != nil {
			t.Fatal(err)
		}
		_, optLoads := runBelady(t, w, Config{Capacity: capacity})
		if auto.HitRatio < lru.HitRatio-goldenTolerance {
			t.Errorf("capacity %d: auto %.4f below LRU %.4f", capacity, auto.HitRatio, lru.HitRatio)
		}
		if loads < optLoads {
			t.Errorf("capacity %d: auto loaded %d blocks, fewer than MIN's %d", capacity, loads, optLoads)
		}
		checkReport(t, &auto)
	}
}

// recordingPolicy is LRU that keeps the candidates of its last selection.
type recordingPolicy struct {
	kvevict.Policy
	last []kvevict.Candidate
}

func (p *recordingPolicy) SelectVictims(cands []kvevict.Candidate, need int) (kvevict.Result, error) {
	p.last = append(p.last[:0], cands...)
	return p.Policy.SelectVictims(cands, need)
}

// TestReplayMarksPartialBlocks: the last block of a prompt whose length is
// not a multiple of the block size is a partial candidate; every other
// block, and the last of a prompt that ends on a block boundary, is full.
// A block first seen partial and then inside a longer prompt is full.
func TestReplayMarksPartialBlocks(t *testing.T) {
	w := &Workload{Name: "partial", BlockTokens: 4, Requests: []Request{
		{InputTokens: 6, HashIDs: []uint64{1, 2}},      // 2 holds 2 of 4 tokens
		{InputTokens: 12, HashIDs: []uint64{1, 2, 10}}, // now 2 is full, and 10
		{InputTokens: 8, HashIDs: []uint64{3, 4}},      // 4 is full
		{InputTokens: 9, HashIDs: []uint64{5, 6, 7}},   // 7 holds 1 token
		{InputTokens: 4, HashIDs: []uint64{8}},         // 8 is full
		{InputTokens: 2, HashIDs: []uint64{9}},         // evicts; 9 partial
	}}
	lru, err := kvevict.New(kvevict.LRU)
	if err != nil {
		t.Fatal(err)
	}
	p := &recordingPolicy{Policy: lru}
	r, _ := replayAll(t, w, p, 9)
	got := map[uint64]bool{}
	for _, c := range p.last {
		got[c.ID] = c.LastBlockPartial
	}
	want := map[uint64]bool{1: false, 2: false, 10: false, 3: false, 4: false, 5: false, 6: false, 7: true, 8: false}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("partial by block at the last selection: %v, want %v", got, want)
	}
	p.last = nil
	if _, err := r.cache.Request([]uint64{11}, kvevict.PriorityNormal); err != nil { // evicts again
		t.Fatal(err)
	}
	for _, c := range p.last {
		if c.ID == 9 && !c.LastBlockPartial {
			t.Error("block 9, the 2-token prompt's only block, is not partial")
		}
	}
}

// TestServeAutoCountsContent: in serve mode a returning turn is a new
// sequence, so Auto counting by sequence ID would be LRU. Told each
// candidate's head hash and each prompt's hashes it counts content: on the
// conversation trace at tail granularity it must be above LRU and close a
// tenth of LRU's gap to Belady's MIN at 2,500 and 5,000 blocks, where
// docs/auto.md measures a fifth.
func TestServeAutoCountsContent(t *testing.T) {
	skipUnderRace(t)
	w, err := LoadTrace(tracetest.Conversation(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, capacity := range []int{2500, 5000} {
		cfg := ServeConfig{Config: Config{Capacity: capacity}, Granularity: GranularityTail}
		lru, err := Serve(w, kvevict.LRU, cfg)
		if err != nil {
			t.Fatal(err)
		}
		auto, err := Serve(w, kvevict.Auto, cfg)
		if err != nil {
			t.Fatal(err)
		}
		opt, _ := runBelady(t, w, Config{Capacity: capacity})
		closed := (auto.HitRatio - lru.HitRatio) / (opt.HitRatio - lru.HitRatio)
		if closed < 0.1 {
			t.Errorf("%d blocks: auto %.4f, LRU %.4f, Belady %.4f: %.1f%% of the gap closed, want 10%%",
				capacity, auto.HitRatio, lru.HitRatio, opt.HitRatio, 100*closed)
		}
	}
}
