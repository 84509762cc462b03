package llmd

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llm-d/llm-d-kv-cache/pkg/kvcache"
	"github.com/llm-d/llm-d-kv-cache/pkg/kvcache/kvblock"
	"k8s.io/apimachinery/pkg/util/sets"
)

// tierBlockSize is llm-d's token block size and publish's -block-size in
// the runs with tiers: llm-d's default.
const tierBlockSize = 16

// TestPublishTiersFeedLLMD publishes the excerpt through a pool of 300
// blocks (more than its longest request) with tiers below it: a host
// tier of 4x written through, as vLLM's offloading writes, and a host tier
// of 2x over a storage tier of 4x written back, exclusive, where every
// block the GPU evicts goes down and a load moves it up. llm-d's index
// must end holding, for the pod, exactly the blocks publish holds on each
// medium: a GPU entry for each block on publish's GPU, a cpu entry for
// each on its host tier, a storage entry for each in storage, and no
// other. Then llm-d's scorer weighs a prompt on two tiers (scoreTiers).
func TestPublishTiersFeedLLMD(t *testing.T) {
	bin := kvevictBinary(t)
	const excerpt = "../../sim/testdata/mooncake_conversation_excerpt.jsonl"
	for _, c := range []struct {
		name  string
		flags []string
	}{
		{"WriteThrough", []string{"-tier", "cpu:4x:lru"}},
		{"WriteBackExclusive", []string{"-tier", "cpu:2x:lru", "-tier", "storage:4x:lru", "-write", "back", "-exclusive"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			args := append([]string{"-trace", excerpt, "-capacity", "300", "-block-size", "16"}, c.flags...)
			p, sum := publishInto(t, bin, tierBlockSize, 30*time.Second, args...)
			p.checkTiers(t, sum.Tiers)
			if !t.Failed() {
				t.Logf("llm-d holds every tier's blocks as publish does, in %v", time.Since(start).Round(time.Millisecond))
			}
		})
	}
	t.Run("Score", func(t *testing.T) { scoreTiers(t, bin) })
}

// scoreTiers publishes two requests through a GPU of 4 blocks
// over a host tier of 8 written through, and scores the first request's
// prompt with llm-d's own scorer (LongestPrefixScorer, its default
// configuration) over llm-d's index. By hand: the first request, blocks
// a1 a2 a3 a4, fills the GPU and is written through to the host; the
// second, b1 b2, needs 2 blocks, and the tree evicts leaves first, a4 then
// a3, which the host keeps. So a1 a2 are on the GPU (and the host), a3 a4
// on the host only, and llm-d's documented weights, gpu 1.0 and cpu 0.8,
// each block counting its best tier's, score the prompt 1.0 + 1.0 + 0.8 +
// 0.8 = 3.6.
func scoreTiers(t *testing.T, bin string) {
	trace := filepath.Join(t.TempDir(), "two.jsonl")
	lines := `{"timestamp": 0, "input_length": 2048, "output_length": 1, "hash_ids": [1, 2, 3, 4]}
{"timestamp": 1, "input_length": 1024, "output_length": 1, "hash_ids": [5, 6]}
`
	if err := os.WriteFile(trace, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	p, sum := publishInto(t, bin, tierBlockSize, 30*time.Second,
		"-trace", trace, "-capacity", "4", "-block-size", "16", "-tier", "cpu:8:lru")
	if want := []tierSummary{{"GPU", 4}, {"CPU", 6}}; !slices.Equal(sum.Tiers, want) {
		t.Fatalf("publish holds %+v, want %+v", sum.Tiers, want)
	}
	p.checkTiers(t, sum.Tiers)

	// The first request's prompt: the chain of 4 blocks the events stored
	// (the other chain has 2), from its root, as a router hashes a prompt.
	a := p.adapter
	a.mu.Lock()
	var tokens []uint32
	var gpu, cpuOnly int
	for leaf := range a.blocks {
		chain := a.chain(leaf)
		if len(chain) != 4 {
			continue
		}
		for _, h := range chain {
			tokens = append(tokens, a.blocks[h].tokens...)
			if a.on[gpuTier][h] {
				gpu++
			} else if a.on["cpu"][h] {
				cpuOnly++
			}
		}
	}
	a.mu.Unlock()
	if gpu != 2 || cpuOnly != 2 {
		t.Fatalf("the 4-block prompt has %d blocks on the GPU and %d on the host only, want 2 and 2 (tokens %d)", gpu, cpuOnly, len(tokens))
	}
	ctx := context.Background()
	keys, err := p.tp.TokensToKVBlockKeys(kvblock.EmptyBlockHash, tokens, model, nil)
	if err != nil || len(keys) != 4 {
		t.Fatalf("%d keys (err %v) for the 4-block prompt", len(keys), err)
	}
	keyToPods, err := p.index.Lookup(ctx, keys, sets.New[string]())
	if err != nil {
		t.Fatal(err)
	}
	scorer, err := kvcache.NewKVBlockScorer(kvcache.DefaultKVBlockScorerConfig())
	if err != nil {
		t.Fatal(err)
	}
	scores, err := scorer.Score(ctx, keys, keyToPods)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := scores[pod], 1.0+1.0+0.8+0.8; math.Abs(got-want) > 1e-9 || len(scores) != 1 {
		t.Errorf("llm-d's scorer gives %v, want %s %v", scores, pod, want)
	}
}

// chain returns the engine blocks from the root to h, following each
// block's parent, or nil if one is not known.
func (a *observingAdapter) chain(h uint64) []uint64 {
	var out []uint64
	for x := h; x != 0; {
		b, ok := a.blocks[x]
		if !ok {
			return nil
		}
		out = append(out, x)
		x = b.parent
	}
	slices.Reverse(out)
	return out
}

// checkTiers: llm-d's index holds, for the pod, exactly the blocks publish
// holds on each medium: for each tier of publish's summary, the request
// keys whose pod entry has that device tier are as many as the blocks the
// tier holds, and are the keys of the blocks the events left there; and
// no key has an entry of another device tier.
func (p *pipeline) checkTiers(t *testing.T, tiers []tierSummary) {
	t.Helper()
	if len(tiers) < 2 {
		t.Fatalf("publish's summary has tiers %+v, want the GPU and at least one below it", tiers)
	}
	onPod := sets.New(pod)
	held := map[string]map[kvblock.BlockHash]bool{} // device tier -> keys with an entry of it for the pod
	p.index.mu.Lock()
	for k := range p.index.added {
		got, err := p.index.Lookup(p.ctx, []kvblock.BlockHash{k}, onPod)
		if err != nil {
			p.index.mu.Unlock()
			t.Fatalf("llm-d index lookup: %v", err)
		}
		for _, e := range got[k] {
			if held[e.DeviceTier] == nil {
				held[e.DeviceTier] = map[kvblock.BlockHash]bool{}
			}
			held[e.DeviceTier][k] = true
		}
	}
	p.index.mu.Unlock()

	a := p.adapter
	a.mu.Lock()
	defer a.mu.Unlock()
	var counts []string
	for _, ts := range tiers {
		dt := deviceTier(ts.Medium)
		want := map[kvblock.BlockHash]bool{}
		for h := range a.on[dt] {
			want[a.blocks[h].key] = true
		}
		got := held[dt]
		delete(held, dt)
		if len(got) != ts.ResidentBlocks || len(a.on[dt]) != ts.ResidentBlocks {
			t.Errorf("%s: llm-d's index holds %d blocks for %s and the events leave %d there; publish holds %d",
				ts.Medium, len(got), pod, len(a.on[dt]), ts.ResidentBlocks)
		}
		missing, extra := 0, 0
		for k := range want {
			if !got[k] {
				missing++
			}
		}
		for k := range got {
			if !want[k] {
				extra++
			}
		}
		if missing > 0 || extra > 0 {
			t.Errorf("%s: llm-d's index lacks %d of the %d keys of the blocks the events leave there and holds %d others",
				ts.Medium, missing, len(want), extra)
		}
		counts = append(counts, fmt.Sprintf("%d blocks on %s", len(got), dt))
	}
	for dt, keys := range held {
		t.Errorf("llm-d's index holds %d blocks for %s on device tier %q, where publish holds none", len(keys), pod, dt)
	}
	t.Logf("llm-d's index holds, for %s: %s", pod, strings.Join(counts, ", "))
}
