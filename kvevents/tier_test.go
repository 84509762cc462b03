package kvevents

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/tier"
)

func TestFromTier(t *testing.T) {
	cpu := "CPU"
	if got, want := FromTier(tier.Event{Kind: tier.Stored, Medium: tier.CPU, Hashes: []uint64{7, 3}}, 16),
		(&BlockStored{BlockHashes: IntHashes([]uint64{7, 3}), TokenIDs: []int64{}, BlockSize: 16, Medium: &cpu}); !reflect.DeepEqual(got, want) {
		t.Errorf("stored: got %#v, want %#v", got, want)
	}
	if got, want := FromTier(tier.Event{Kind: tier.Removed, Medium: tier.CPU, Hashes: []uint64{3}}, 16),
		(&BlockRemoved{BlockHashes: IntHashes([]uint64{3}), Medium: &cpu}); !reflect.DeepEqual(got, want) {
		t.Errorf("removed: got %#v, want %#v", got, want)
	}
	if got := FromTier(tier.Event{Medium: tier.CPU, Hashes: []uint64{1}}, 16); got != nil {
		t.Errorf("unknown kind: got %#v, want nil", got)
	}
}

// TestMirrorHoldsEveryTier: a mirror fed a hierarchy's events through
// FromTier, one batch per request, holds on each medium exactly the blocks
// that tier holds, under every write policy.
func TestMirrorHoldsEveryTier(t *testing.T) {
	for _, c := range []struct {
		name      string
		write     tier.Write
		exclusive bool
		host      kvevict.Strategy
	}{
		{"through", tier.WriteThrough, false, kvevict.LRU},
		{"back-exclusive", tier.WriteBack, true, kvevict.S3FIFO},
		{"vllm", tier.WriteVLLM, false, kvevict.ARC},
	} {
		t.Run(c.name, func(t *testing.T) {
			var batch EventBatch
			levels := []tier.Level{{Medium: tier.GPU, Capacity: 20, Strategy: kvevict.LRU}, {Medium: tier.CPU, Capacity: 60, Strategy: c.host}}
			if c.write != tier.WriteVLLM {
				levels = append(levels, tier.Level{Medium: tier.Storage, Capacity: 100, Strategy: kvevict.LRU})
			}
			h, err := tier.New(tier.Config{Levels: levels, Write: c.write, Exclusive: c.exclusive,
				Events: func(e tier.Event) { batch.Events = append(batch.Events, FromTier(e, 16)) }})
			if err != nil {
				t.Fatal(err)
			}
			m, err := NewMirror(1000)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for r := range 2000 {
				hashes := make([]uint64, 1+rng.IntN(8))
				base := uint64(rng.IntN(40)) * 8
				for i := range hashes {
					hashes[i] = base + uint64(i)
				}
				batch.Events = batch.Events[:0]
				if _, err := h.Request(hashes, kvevict.PriorityLow); err != nil {
					t.Fatal(err)
				}
				m.Apply("engine", &batch)
				got := m.Topics()[0].ResidentByMedium
				for i, l := range levels {
					if got[string(l.Medium)] != h.Len(i) {
						t.Fatalf("request %d: the mirror holds %v, the %s tier %d blocks", r, got, l.Medium, h.Len(i))
					}
				}
				for _, id := range slices.Concat(hashes, []uint64{uint64(rng.IntN(320))}) {
					for i, l := range levels {
						if want := h.Contains(i, id); want != m.ResidentOn("engine", string(l.Medium), IntHash(id)) {
							t.Fatalf("request %d: block %d on %s: tier %v, mirror %v", r, id, l.Medium, want, !want)
						}
					}
				}
			}
		})
	}
}
