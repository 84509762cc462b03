package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sagellm/kvevict/kvevents"
)

// TestPublishTiers runs publish -tier under each write policy and
// inclusion, with a host tier and, written back, a storage tier below it,
// and replays what a subscriber received into one set of blocks per
// medium. Each set ends as large as publish says its tier is, and holds no
// more than the tier's capacity at any event; a GPU store carries its
// blocks' token ids and a lower tier's carries none and no parent, as
// vLLM's offloading sends them; and every block a lower tier stores is, at
// that event, held on some medium: a subscriber that finds a lower tier's
// block through its entry on another (llm-d's index) never meets one it
// does not know. The requests of the excerpt fit the GPU, which that
// needs.
func TestPublishTiers(t *testing.T) {
	const capacity = 300
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"through", []string{"-tier", "cpu:4x:lru"}},
		{"selective", []string{"-tier", "cpu:4x:s3fifo", "-write", "selective=2"}},
		{"back", []string{"-tier", "cpu:2x:arc", "-tier", "storage:3x:lru", "-write", "back"}},
		{"back-exclusive", []string{"-tier", "cpu:2x:lru", "-tier", "storage:3x:sieve", "-write", "back", "-exclusive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), socketTimeout)
			defer cancel()
			r := newMediumReplay()
			args := append([]string{"-trace", excerpt, "-capacity", fmt.Sprint(capacity), "-block-size", "4", "-warmup", "200ms"}, tc.flags...)
			sum := publishInto(ctx, t, r.apply, args...)
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.problem != "" {
				t.Fatal(r.problem)
			}
			if r.batches != sum.Batches || len(sum.Tiers) != 1+strings.Count(strings.Join(tc.flags, " "), "-tier") {
				t.Fatalf("received %d batches of %d; summary %+v", r.batches, sum.Batches, sum)
			}
			wantWrite := "through"
			for i, f := range tc.flags {
				if f == "-write" {
					wantWrite = tc.flags[i+1]
				}
			}
			if sum.Write != wantWrite || (sum.Inclusion == "exclusive") != strings.Contains(tc.name, "exclusive") {
				t.Errorf("summary names write %q, %s", sum.Write, sum.Inclusion)
			}
			for _, ts := range sum.Tiers {
				m := string(ts.Medium)
				if len(r.held[m]) != ts.ResidentBlocks || ts.StoredBlocks-ts.RemovedBlocks != int64(ts.ResidentBlocks) ||
					ts.ResidentBlocks > ts.CapacityBlocks || r.most[m] > ts.CapacityBlocks || ts.StoredBlocks == 0 {
					t.Errorf("%s: the events leave %d blocks there, at most %d; summary %+v", m, len(r.held[m]), r.most[m], ts)
				}
			}
			if g := sum.Tiers[0]; g.Medium != "GPU" || g.ResidentBlocks != sum.ResidentBlocks || g.StoredBlocks != sum.StoredBlocks || g.RemovedBlocks != sum.RemovedBlocks {
				t.Errorf("the GPU's row %+v differs from the summary's %d stored, %d removed, %d resident", g, sum.StoredBlocks, sum.RemovedBlocks, sum.ResidentBlocks)
			}
			if sum.Tiers[1].Hits == 0 {
				t.Errorf("no block was loaded from the host tier: the run exercises little (%+v)", sum.Tiers)
			}
		})
	}
}

// mediumReplay applies a subscriber's batches to one set of blocks per
// medium, noting the first way they break the properties TestPublishTiers
// asserts.
type mediumReplay struct {
	mu      sync.Mutex
	held    map[string]map[uint64]bool
	most    map[string]int // the most blocks each medium held at once
	batches int64
	problem string
}

func newMediumReplay() *mediumReplay {
	return &mediumReplay{held: map[string]map[uint64]bool{}, most: map[string]int{}}
}

func (r *mediumReplay) fail(seq int64, format string, args ...any) {
	if r.problem == "" {
		r.problem = fmt.Sprintf("batch %d: ", seq) + fmt.Sprintf(format, args...)
	}
}

// heldAnywhere reports whether some medium holds block h.
func (r *mediumReplay) heldAnywhere(h uint64) bool {
	for _, set := range r.held {
		if set[h] {
			return true
		}
	}
	return false
}

func (r *mediumReplay) apply(msg kvevents.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches++
	if msg.Missed > 0 {
		r.fail(msg.Seq, "%d batches missed", msg.Missed)
	}
	for _, e := range msg.Batch.Events {
		var medium *string
		var hashes []kvevents.Hash
		stored := false
		switch e := e.(type) {
		case *kvevents.BlockStored:
			medium, hashes, stored = e.Medium, e.BlockHashes, true
			if medium != nil && *medium != kvevents.MediumGPU && (len(e.TokenIDs) != 0 || e.ParentBlockHash != nil) {
				r.fail(msg.Seq, "a %s store with %d token ids, parent %v", *medium, len(e.TokenIDs), e.ParentBlockHash)
			}
			if medium != nil && *medium == kvevents.MediumGPU && len(e.TokenIDs) != 4*len(e.BlockHashes) {
				r.fail(msg.Seq, "a GPU store of %d blocks with %d token ids", len(e.BlockHashes), len(e.TokenIDs))
			}
		case *kvevents.BlockRemoved:
			medium, hashes = e.Medium, e.BlockHashes
		default:
			r.fail(msg.Seq, "event %T", e)
			continue
		}
		if medium == nil {
			r.fail(msg.Seq, "an event without a medium")
			continue
		}
		set := r.held[*medium]
		if set == nil {
			set = map[uint64]bool{}
			r.held[*medium] = set
		}
		for _, kh := range hashes {
			h, _ := kh.Uint64()
			switch {
			case stored && *medium != kvevents.MediumGPU && !r.heldAnywhere(h):
				r.fail(msg.Seq, "%s stores block %#x, which no medium holds", *medium, h)
			case stored && set[h]:
				r.fail(msg.Seq, "%s stores block %#x, which it holds", *medium, h)
			case !stored && !set[h]:
				r.fail(msg.Seq, "%s removes block %#x, which it does not hold", *medium, h)
			}
			if stored {
				set[h] = true
			} else {
				delete(set, h)
			}
		}
		r.most[*medium] = max(r.most[*medium], len(set))
	}
}
