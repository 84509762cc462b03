package tier

import (
	"errors"
	"math"
	"testing"

	"github.com/sagellm/kvevict"
)

// TestCacheHints: a cache of two blocks holds A (at time 0) and B (at 1);
// C at time 2 needs a slot and A is requested again at 3. LRU alone evicts
// A, the older, so the last request misses; with A leased until 10, or B
// released, the cache evicts B and it hits. A lease that ends at 2, at
// C's time, changes nothing: the cache tells the structure the time before
// it evicts. Every structure alike: an Index (LRU), a Policy (LRU) and
// Auto, which no Index serves.
func TestCacheHints(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b kvevict.Hints
		hit  bool
	}{
		{"none", kvevict.Hints{}, kvevict.Hints{}, false},
		{"A leased", kvevict.Hints{LeaseUntil: 10}, kvevict.Hints{}, true},
		{"A's lease spent", kvevict.Hints{LeaseUntil: 2}, kvevict.Hints{}, false},
		{"B released", kvevict.Hints{}, kvevict.Hints{Released: true}, true},
		{"B at a low priority", kvevict.Hints{}, kvevict.Hints{Retention: 10, RetainUntil: 10}, true},
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
				if out, err = cache.RequestHints([]uint64{st.id}, kvevict.PriorityLow, st.h, int64(now)); err != nil {
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

// TestCacheHintsRefused: a time or a hint's end outside the clock, hints
// no class holds and the clock's own id are refused before any work.
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
		{"time past the clock", []uint64{1}, kvevict.Hints{}, math.MaxInt64 / 2, kvevict.ErrInvalidArgument},
		{"lease past the clock", []uint64{1}, kvevict.Hints{LeaseUntil: math.MaxInt64}, 0, kvevict.ErrInvalidArgument},
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
