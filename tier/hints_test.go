package tier

import (
	"errors"
	"math"
	"testing"

	"github.com/sagellm/kvevict"
)

// TestCacheHints: a cache of two blocks holds A (at tick 0) and B (at
// 100); C at 200 needs a slot and A is requested again at 300. LRU alone
// evicts A, the older, so the last request misses; with A leased until
// 1,000, or B released, the cache evicts B and it hits. A lease that ends
// at 200, C's time, changes nothing: the cache tells the structure the
// time before it evicts, where the residents' latest touch is B's, 101. Every structure alike: an Index (LRU), a Policy (LRU) and
// Auto, which no Index serves.
func TestCacheHints(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b kvevict.Hints
		hit  bool
	}{
		{"none", kvevict.Hints{}, kvevict.Hints{}, false},
		{"A leased", kvevict.Hints{LeaseUntil: 1000}, kvevict.Hints{}, true},
		{"A's lease spent", kvevict.Hints{LeaseUntil: 200}, kvevict.Hints{}, false},
		{"B released", kvevict.Hints{}, kvevict.Hints{Released: true}, true},
		{"B at a low priority", kvevict.Hints{}, kvevict.Hints{Retention: 10, RetainUntil: 1000}, true},
	} {
		caches := map[string]func() (*Cache, error){
			"index": func() (*Cache, error) { return NewCache(kvevict.LRU, 2) },
			"policy": func() (*Cache, error) {
				p, err := kvevict.New(kvevict.LRU)
				if err != nil {
					return nil, err
				}
				return NewPolicyCache(p, 2)
			},
			"auto": func() (*Cache, error) { return NewCache(kvevict.Auto, 2) },
		}
		for name, make := range caches {
			cache, err := make()
			if err != nil {
				t.Fatal(err)
			}
			steps := []struct {
				id uint64
				h  kvevict.Hints
			}{{1, c.a}, {2, c.b}, {3, kvevict.Hints{}}, {1, kvevict.Hints{}}}
			var out Outcome
			for now, st := range steps {
				if out, err = cache.RequestHints([]uint64{st.id}, kvevict.PriorityLow, st.h, int64(100*now)); err != nil {
					t.Fatalf("%s, %s, request %d: %v", c.name, name, now, err)
				}
			}
			if hit := out.Loaded == 0; hit != c.hit {
				t.Errorf("%s, %s: the last request hit %v, want %v", c.name, name, hit, c.hit)
			}
			if err := cache.Check(); err != nil || cache.Len() != 2 {
				t.Errorf("%s, %s: %d residents, check %v", c.name, name, cache.Len(), err)
			}
		}
	}
}

// TestCacheHintsRefused: a negative time or hint end, hints no class holds
// and the clock's own id are refused before any work.
func TestCacheHintsRefused(t *testing.T) {
	cache, err := NewCache(kvevict.LRU, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		ids  []uint64
		h    kvevict.Hints
		now  int64
		want error
	}{
		{"negative time", []uint64{1}, kvevict.Hints{}, -1, kvevict.ErrInvalidArgument},
		{"negative lease end", []uint64{1}, kvevict.Hints{LeaseUntil: -5}, 0, kvevict.ErrInvalidArgument},
		{"priority above 100", []uint64{1}, kvevict.Hints{Retention: 101, RetainUntil: 5}, 0, kvevict.ErrInvalidCandidate},
		{"hard without a lease", []uint64{1}, kvevict.Hints{HardLease: true}, 0, kvevict.ErrInvalidCandidate},
		{"the clock's id", []uint64{1, math.MaxUint64}, kvevict.Hints{}, 0, kvevict.ErrInvalidArgument},
	} {
		if _, err := cache.RequestHints(c.ids, kvevict.PriorityLow, c.h, c.now); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if cache.Len() != 0 || cache.Misses() != 0 {
			t.Errorf("%s: the cache changed: %d residents, %d misses", c.name, cache.Len(), cache.Misses())
		}
	}
}

// TestHierarchyHints: a GPU of one block over a host tier of two, write
// back, LRU on both. A (leased until 10,000), B, C and D come at ticks 0,
// 100, 200 and 300, each demoting the one before; at 300 the host tier is
// full and LRU would let A go, the least recently demoted, but A took its
// lease down with it, so B goes, and A, asked again at 400, is found
// below. Without the lease, or with one that ended at 250, A is gone.
func TestHierarchyHints(t *testing.T) {
	for _, c := range []struct {
		name  string
		lease int64
		below int // A's blocks found on the host tier at 400
	}{
		{"leased", 10000, 1},
		{"none", 0, 0},
		{"spent", 250, 0},
	} {
		h, err := New(Config{Levels: []Level{{Medium: GPU, Capacity: 1, Strategy: kvevict.LRU}, {Medium: CPU, Capacity: 2, Strategy: kvevict.LRU}}, Write: WriteBack})
		if err != nil {
			t.Fatal(err)
		}
		var m *Match
		for i, id := range []uint64{1, 2, 3, 4, 1} {
			var hints kvevict.Hints
			if i == 0 {
				hints.LeaseUntil = c.lease
			}
			if m, err = h.RequestHints([]uint64{id}, kvevict.PriorityLow, hints, int64(100*i)); err != nil {
				t.Fatalf("%s, request %d: %v", c.name, i, err)
			}
		}
		if m.Runs[1] != c.below {
			t.Errorf("%s: A's runs %v, want %d found below", c.name, m.Runs, c.below)
		}
	}
	vllm, err := New(Config{Levels: []Level{{Medium: GPU, Capacity: 4, Strategy: kvevict.LRU}, {Medium: CPU, Capacity: 4, Strategy: kvevict.LRU}}, Write: WriteVLLM})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vllm.RequestHints([]uint64{1}, kvevict.PriorityLow, kvevict.Hints{}, 0); !errors.Is(err, kvevict.ErrInvalidArgument) {
		t.Errorf("hints under WriteVLLM: %v, want refused", err)
	}
}
