package prefix

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/internal/rank"
)

// roomy is the capacity of a tree that a test drives with Insert and
// Evict, which do not read it; under Auto it sizes the miniature caches.
const roomy = 4096

func newTree(tb testing.TB, s kvevict.Strategy, capacity int, opts ...Option) *Tree {
	tb.Helper()
	t, err := New(s, capacity, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

func at(tick int64) Access { return Access{Tick: tick} }

func mustInsert(tb testing.TB, t *Tree, hashes []uint64, a Access) {
	tb.Helper()
	if _, err := t.Insert(hashes, a); err != nil {
		tb.Fatalf("Insert(%v): %v", hashes, err)
	}
	check(tb, t)
}

func mustEvict(tb testing.TB, t *Tree, k int) []uint64 {
	tb.Helper()
	got, err := t.Evict(k)
	if err != nil {
		tb.Fatalf("Evict(%d): %v", k, err)
	}
	check(tb, t)
	return got
}

func TestNewRejects(t *testing.T) {
	if _, err := New("nope", roomy); !errors.Is(err, kvevict.ErrUnknownStrategy) {
		t.Errorf(`New("nope") error %v, want ErrUnknownStrategy`, err)
	}
	if _, err := New(kvevict.LRU, roomy, WithStrategyOptions(kvevict.WithSampling(5))); !errors.Is(err, kvevict.ErrInvalidArgument) {
		t.Errorf("New(LRU, WithSampling) error %v, want ErrInvalidArgument", err)
	}
	if _, err := New(kvevict.LRU, roomy, WithStrategyOptions(kvevict.WithLFUHalfLife(time.Second))); !errors.Is(err, kvevict.ErrInvalidArgument) {
		t.Errorf("New(LRU, WithLFUHalfLife) error %v, want ErrInvalidArgument", err)
	}
	if _, err := New(kvevict.Auto, roomy, WithStrategyOptions(kvevict.WithGhostCap(16), kvevict.WithTickDuration(time.Second))); err != nil {
		t.Errorf("New(Auto, WithGhostCap, WithTickDuration): %v", err)
	}
	for name, opt := range map[string]kvevict.Option{
		"kvevict.WithCapacity": kvevict.WithCapacity(8),
		"WithSampling":         kvevict.WithSampling(5),
		"WithGhostCap":         kvevict.WithGhostCap(0),
		"WithTierBelow":        kvevict.WithTierBelow(100),
		"WithSLRUThreshold":    kvevict.WithSLRUThreshold(3),
	} {
		if _, err := New(kvevict.Auto, roomy, WithStrategyOptions(opt)); !errors.Is(err, kvevict.ErrInvalidArgument) {
			t.Errorf("New(Auto, %s) error %v, want ErrInvalidArgument", name, err)
		}
	}
}

// TestStrategiesRanked: New ranks a tree by exactly the strategies Ranks
// accepts (every one that is not adaptive, and Auto), in any spelling,
// and refuses the others with errors.ErrUnsupported, as Ranks does.
func TestStrategiesRanked(t *testing.T) {
	for _, s := range kvevict.Strategies() {
		for _, spelling := range []kvevict.Strategy{s, kvevict.Strategy(strings.ToUpper(string(s)))} {
			_, err := New(spelling, roomy)
			ranks := Ranks(spelling)
			if (ranks == nil) != (err == nil) {
				t.Errorf("New(%s): %v; Ranks says %v", spelling, err, ranks)
			}
			if want := !s.Adaptive() || s == kvevict.Auto; want != (ranks == nil) {
				t.Errorf("Ranks(%s) = %v; want nil: %v", spelling, ranks, want)
			}
			if err != nil && (!errors.Is(err, errors.ErrUnsupported) || !errors.Is(ranks, errors.ErrUnsupported)) {
				t.Errorf("New(%s) error %v, Ranks %v; want both errors.ErrUnsupported", spelling, err, ranks)
			}
		}
	}
	for _, s := range []kvevict.Strategy{kvevict.ARC, kvevict.S3FIFO, kvevict.SIEVE} {
		if _, err := New(s, roomy); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("New(%s) error %v, want errors.ErrUnsupported", s, err)
		}
	}
	if err := Ranks("belady"); !errors.Is(err, kvevict.ErrUnknownStrategy) {
		t.Errorf("Ranks(belady) = %v, want kvevict.ErrUnknownStrategy", err)
	}
}

// TestCapacity: a tree's capacity is New's, in blocks, for every strategy a
// tree ranks by, and one below 1 is refused; kvevict.WithCapacity, which
// counts sequences, is refused by every tree with an error that names
// New's capacity instead; a refused strategy stays unsupported whatever the
// capacity.
func TestCapacity(t *testing.T) {
	for _, s := range append([]kvevict.Strategy{kvevict.Auto}, keyStrategies...) {
		for _, c := range []int{1, 100, 1 << 20} {
			if _, err := New(s, c); err != nil {
				t.Errorf("New(%s, %d): %v", s, c, err)
			}
		}
		for _, c := range []int{0, -1} {
			if _, err := New(s, c); !errors.Is(err, kvevict.ErrInvalidArgument) || !strings.Contains(err.Error(), "capacity") {
				t.Errorf("New(%s, %d) error %v, want ErrInvalidArgument naming the capacity", s, c, err)
			}
		}
		_, err := New(s, 100, WithStrategyOptions(kvevict.WithCapacity(100)))
		if !errors.Is(err, kvevict.ErrInvalidArgument) || !strings.Contains(err.Error(), "prefix.New's capacity") {
			t.Errorf("New(%s, kvevict.WithCapacity) error %v, want ErrInvalidArgument naming prefix.New's capacity", s, err)
		}
	}
	for _, s := range []kvevict.Strategy{kvevict.ARC, kvevict.S3FIFO, kvevict.SIEVE} {
		if _, err := New(s, 100); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("New(%s, 100) error %v, want errors.ErrUnsupported", s, err)
		}
	}
}

// TestLeafFirstOrder is a step script: each step's Evict must free the
// given hashes, in order.
func TestLeafFirstOrder(t *testing.T) {
	tests := []struct {
		strategy kvevict.Strategy
		setup    func(*Tree)
		want     []uint64
	}{
		{
			// Older leaf 3 goes first; then its parent 2, now a leaf; 1
			// waits for its last child, 4.
			strategy: kvevict.LRU,
			setup: func(tr *Tree) {
				mustInsert(t, tr, []uint64{1, 2, 3}, at(1))
				mustInsert(t, tr, []uint64{1, 4}, at(2))
			},
			want: []uint64{3, 2, 4, 1},
		},
		{
			// A Match refreshes the whole matched path: 3's branch is now
			// the most recent, 4 goes first.
			strategy: kvevict.LRU,
			setup: func(tr *Tree) {
				mustInsert(t, tr, []uint64{1, 2, 3}, at(1))
				mustInsert(t, tr, []uint64{1, 4}, at(2))
				if _, err := tr.Match([]uint64{1, 2, 3, 9}, at(3)); err != nil {
					t.Fatal(err)
				}
			},
			want: []uint64{4, 3, 2, 1},
		},
		{
			// MRU: the Match makes leaf 3 the most recent, a key that
			// decreases: it must move to the front.
			strategy: kvevict.MRU,
			setup: func(tr *Tree) {
				mustInsert(t, tr, []uint64{1, 2, 3}, at(1))
				mustInsert(t, tr, []uint64{1, 4}, at(2))
				if _, err := tr.Match([]uint64{1, 2, 3}, at(3)); err != nil {
					t.Fatal(err)
				}
			},
			want: []uint64{3, 2, 4, 1},
		},
		{
			// FIFO ignores reuse: 3 entered first.
			strategy: kvevict.FIFO,
			setup: func(tr *Tree) {
				mustInsert(t, tr, []uint64{1, 2, 3}, at(1))
				mustInsert(t, tr, []uint64{1, 4}, at(2))
				if _, err := tr.Match([]uint64{1, 2, 3}, at(3)); err != nil {
					t.Fatal(err)
				}
			},
			want: []uint64{3, 2, 4, 1},
		},
		{
			// LFU: 3's branch was hit twice, 4 never.
			strategy: kvevict.LFU,
			setup: func(tr *Tree) {
				mustInsert(t, tr, []uint64{1, 2, 3}, at(1))
				mustInsert(t, tr, []uint64{1, 4}, at(2))
				for tick := int64(3); tick <= 4; tick++ {
					if _, err := tr.Match([]uint64{1, 2, 3}, at(tick)); err != nil {
						t.Fatal(err)
					}
				}
			},
			want: []uint64{4, 3, 2, 1},
		},
		{
			// QoSAware: a block's priority is the highest of the requests
			// that inserted it. The low-priority branch goes first though it
			// is more recent; 1 is high because a high request inserted it.
			strategy: kvevict.QoSAware,
			setup: func(tr *Tree) {
				mustInsert(t, tr, []uint64{1, 2}, Access{Tick: 1, Priority: kvevict.PriorityHigh})
				mustInsert(t, tr, []uint64{1, 3, 4}, Access{Tick: 2, Priority: kvevict.PriorityLow})
			},
			want: []uint64{4, 3, 2, 1},
		},
		{
			// SLRU: 2 was hit twice (protected segment), 3 once.
			strategy: kvevict.SLRU,
			setup: func(tr *Tree) {
				mustInsert(t, tr, []uint64{1, 2}, at(1))
				mustInsert(t, tr, []uint64{1, 3}, at(2))
				for tick, path := range [][]uint64{{1, 2}, {1, 2}, {1, 3}} {
					if _, err := tr.Match(path, at(int64(3+tick))); err != nil {
						t.Fatal(err)
					}
				}
			},
			want: []uint64{3, 2, 1},
		},
		{
			// FrequencyCost with one block per node orders by hits.
			strategy: kvevict.FrequencyCost,
			setup: func(tr *Tree) {
				mustInsert(t, tr, []uint64{1, 2}, at(1))
				mustInsert(t, tr, []uint64{1, 3}, at(2))
				mustInsert(t, tr, []uint64{5}, at(3))
				for tick, path := range [][]uint64{{1, 2}, {1, 2}, {1, 3}} {
					if _, err := tr.Match(path, at(int64(4+tick))); err != nil {
						t.Fatal(err)
					}
				}
			},
			want: []uint64{5, 3, 2, 1},
		},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%d/%s", i, tt.strategy), func(t *testing.T) {
			tr := newTree(t, tt.strategy, roomy)
			tt.setup(tr)
			check(t, tr)
			var got []uint64
			for range tt.want {
				got = append(got, mustEvict(t, tr, 1)...)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("evicted %v, want %v", got, tt.want)
			}
			if tr.Len() != 0 {
				t.Errorf("Len() = %d after evicting everything", tr.Len())
			}
		})
	}
}

func TestLockProtectsPath(t *testing.T) {
	tr := newTree(t, kvevict.LRU, roomy)
	mustInsert(t, tr, []uint64{1, 2, 3}, at(1))
	mustInsert(t, tr, []uint64{1, 4, 5}, at(2))
	if err := tr.Lock([]uint64{1, 2}); err != nil {
		t.Fatal(err)
	}
	check(t, tr)
	if got, want := tr.Protected(), 2; got != want {
		t.Errorf("Protected() = %d, want %d", got, want)
	}
	if got, want := tr.EvictableBlocks(), 3; got != want {
		t.Errorf("EvictableBlocks() = %d, want %d", got, want)
	}
	// 3 hangs below the locked path but is not on it.
	if got, want := mustEvict(t, tr, 3), []uint64{3, 5, 4}; !slices.Equal(got, want) {
		t.Errorf("Evict(3) = %v, want %v", got, want)
	}
	_, err := tr.Evict(1)
	var ie *kvevict.InsufficientBlocksError
	if !errors.As(err, &ie) || ie.Required != 1 || ie.Available != 0 {
		t.Fatalf("Evict(1) with all blocks locked: %v, want InsufficientBlocksError{1, 0}", err)
	}
	if got := tr.Peek([]uint64{1, 2}); got != 2 {
		t.Errorf("locked path: Peek = %d, want 2", got)
	}
	if err := tr.Unlock([]uint64{1, 2}); err != nil {
		t.Fatal(err)
	}
	check(t, tr)
	if got, want := mustEvict(t, tr, 2), []uint64{2, 1}; !slices.Equal(got, want) {
		t.Errorf("after Unlock: Evict(2) = %v, want %v", got, want)
	}
}

func TestNestedLocks(t *testing.T) {
	tr := newTree(t, kvevict.LRU, roomy)
	mustInsert(t, tr, []uint64{1, 2, 3}, at(1))
	for _, p := range [][]uint64{{1, 2, 3}, {1}, {1, 2, 3}} {
		if err := tr.Lock(p); err != nil {
			t.Fatal(err)
		}
		check(t, tr)
	}
	if err := tr.Unlock([]uint64{1, 2}); !errors.Is(err, ErrNotLocked) {
		t.Errorf("Unlock of a prefix of a locked path: %v, want ErrNotLocked", err)
	}
	for _, p := range [][]uint64{{1, 2, 3}, {1}} {
		if err := tr.Unlock(p); err != nil {
			t.Fatal(err)
		}
		check(t, tr)
	}
	if got := tr.EvictableBlocks(); got != 0 {
		t.Errorf("one lock of [1 2 3] left: EvictableBlocks() = %d, want 0", got)
	}
	if err := tr.Unlock([]uint64{1}); !errors.Is(err, ErrNotLocked) {
		t.Errorf("second Unlock([1]): %v, want ErrNotLocked", err)
	}
	if err := tr.Unlock([]uint64{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	check(t, tr)
	if err := tr.Unlock([]uint64{1, 2, 3}); !errors.Is(err, ErrNotLocked) {
		t.Errorf("Unlock of an unlocked path: %v, want ErrNotLocked", err)
	}
	if got := tr.EvictableBlocks(); got != 3 {
		t.Errorf("all unlocked: EvictableBlocks() = %d, want 3", got)
	}
}

func TestErrors(t *testing.T) {
	tr := newTree(t, kvevict.LRU, roomy)
	mustInsert(t, tr, []uint64{1, 2}, at(1))
	for name, err := range map[string]error{
		"Insert": func() error { _, err := tr.Insert(nil, at(2)); return err }(),
		"Match":  func() error { _, err := tr.Match([]uint64{}, at(2)); return err }(),
		"Lock":   tr.Lock(nil),
		"Unlock": tr.Unlock(nil),
	} {
		if !errors.Is(err, ErrEmptyPath) {
			t.Errorf("%s of no hashes: %v, want ErrEmptyPath", name, err)
		}
	}
	if err := tr.Lock([]uint64{1, 3}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Lock of a missing path: %v, want ErrNotFound", err)
	}
	if err := tr.Unlock([]uint64{1, 2, 3}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Unlock of a missing path: %v, want ErrNotFound", err)
	}
	if _, err := tr.Evict(-1); !errors.Is(err, kvevict.ErrInvalidArgument) {
		t.Errorf("Evict(-1): %v, want ErrInvalidArgument", err)
	}
	if got, err := tr.Evict(0); err != nil || got != nil {
		t.Errorf("Evict(0) = %v, %v; want nothing", got, err)
	}
	_, err := tr.Evict(3)
	if !errors.Is(err, kvevict.ErrInsufficientBlocks) {
		t.Errorf("Evict(3) of 2 blocks: %v, want ErrInsufficientBlocks", err)
	}
	check(t, tr)
	if tr.Len() != 2 {
		t.Errorf("a failed Evict removed blocks: Len() = %d, want 2", tr.Len())
	}
}

func TestEvents(t *testing.T) {
	var got []Event
	var tr *Tree
	tr = newTree(t, kvevict.LRU, roomy, WithEvents(func(e Event) {
		got = append(got, e)
		tr.Len() // calling the tree from the callback must not deadlock
		tr.Peek(e.Hashes)
	}))
	mustInsert(t, tr, []uint64{1, 2}, at(1))
	mustInsert(t, tr, []uint64{1, 2}, at(2)) // nothing new: no event
	mustInsert(t, tr, []uint64{1, 3, 4}, at(3))
	mustEvict(t, tr, 3)
	want := []Event{
		{Kind: Stored, Hashes: []uint64{1, 2}},
		{Kind: Stored, Hashes: []uint64{3, 4}, Parent: 1, HasParent: true, PrefixLen: 1},
		{Kind: Removed, Hashes: []uint64{2, 4, 3}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events %+v, want %+v", len(got), got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Kind != w.Kind || !slices.Equal(g.Hashes, w.Hashes) || g.Parent != w.Parent ||
			g.HasParent != w.HasParent || g.PrefixLen != w.PrefixLen {
			t.Errorf("event %d = %+v, want %+v", i, g, w)
		}
	}
	if s := Removed.String(); s != "removed" {
		t.Errorf("Removed.String() = %q", s)
	}
}

// TestDecayRekeys checks FrequencyCost with decay, whose keys depend on the
// current tick: the heap is re-keyed when the clock moved, and the order
// follows the decayed retention at the latest tick.
func TestDecayRekeys(t *testing.T) {
	tr, err := New(kvevict.FrequencyCost, roomy, WithStrategyOptions(kvevict.WithCostDecay(1), kvevict.WithTickDuration(time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	mustInsert(t, tr, []uint64{1}, at(0))
	mustInsert(t, tr, []uint64{2}, at(0))
	// 1: 3 hits long ago; 2: 1 hit now. At tick 100, 1's retention is
	// 3/(1+100) < 1/(1+0): 1 goes first, though it has more hits.
	for range 3 {
		if _, err := tr.Match([]uint64{1}, at(0)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tr.Match([]uint64{2}, at(100)); err != nil {
		t.Fatal(err)
	}
	if got := mustEvict(t, tr, 1); !slices.Equal(got, []uint64{1}) {
		t.Errorf("Evict(1) = %v, want [1]", got)
	}
}

// keyStrategies are the strategies that rank by a key.
var keyStrategies = []kvevict.Strategy{
	kvevict.LRU, kvevict.MRU, kvevict.FIFO, kvevict.FILO, kvevict.LFU,
	kvevict.SLRU, kvevict.QoSAware, kvevict.Predictive, kvevict.FrequencyCost,
}

// TestRandomOperations runs random operations on a small hash alphabet, so
// that paths share prefixes, and checks every invariant after each; before
// each Evict it computes the expected victim by brute force over all nodes.
func TestRandomOperations(t *testing.T) {
	steps := 3000
	if testing.Short() {
		steps = 500
	}
	type config struct {
		name     string
		strategy kvevict.Strategy
		capacity int // 0: roomy
		opts     []Option
	}
	configs := []config{
		// Keys that read the current tick: the heap is re-keyed by Evict.
		{"frequency_cost+decay", kvevict.FrequencyCost, 0, []Option{WithStrategyOptions(kvevict.WithCostDecay(0.5), kvevict.WithTickDuration(time.Second))}},
		{"lfu+half-life", kvevict.LFU, 0, []Option{WithStrategyOptions(kvevict.WithLFUHalfLife(10*time.Second), kvevict.WithTickDuration(time.Second))}},
	}
	for _, s := range keyStrategies {
		configs = append(configs, config{name: string(s), strategy: s})
	}
	// Auto with a memory smaller than the alphabet's paths, so that it
	// forgets as well as restores, and miniature caches smaller than the
	// tree, so that they evict.
	configs = append(configs, config{"auto", kvevict.Auto, 4, []Option{WithStrategyOptions(kvevict.WithGhostCap(6))}})
	for ci, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			tr, err := New(cfg.strategy, cmp.Or(cfg.capacity, roomy), cfg.opts...)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(7, uint64(ci)))
			var locked [][]uint64
			for step := range steps {
				path := make([]uint64, 1+rng.IntN(6))
				for i := range path {
					path[i] = uint64(rng.IntN(4))
				}
				a := Access{Tick: int64(step), Priority: kvevict.Priority(rng.IntN(3))}
				switch op := rng.IntN(10); {
				case op < 3:
					if _, err := tr.Insert(path, a); err != nil {
						t.Fatal(err)
					}
				case op < 5:
					if _, err := tr.Match(path, a); err != nil {
						t.Fatal(err)
					}
				case op < 6:
					if m := tr.Peek(path); m > 0 {
						if err := tr.Lock(path[:m]); err != nil {
							t.Fatal(err)
						}
						locked = append(locked, path[:m])
					}
				case op < 7:
					if len(locked) > 0 {
						i := rng.IntN(len(locked))
						if err := tr.Unlock(locked[i]); err != nil {
							t.Fatal(err)
						}
						locked = slices.Delete(locked, i, i+1)
					}
				default:
					k := min(1+rng.IntN(4), tr.EvictableBlocks())
					want := bruteForceVictim(tr)
					got := mustEvict(t, tr, k)
					if k > 0 && got[0] != want {
						t.Fatalf("step %d: first victim %d, brute force says %d", step, got[0], want)
					}
				}
				check(t, tr)
				for _, p := range locked {
					if tr.Peek(p) != len(p) {
						t.Fatalf("step %d: locked path %v was evicted", step, p)
					}
				}
			}
		})
	}
}

// keyNow is n's key at the tree's latest tick, from the strategy's keys
// and the node's fields as the package documentation presents them. Under Auto it
// is the key that the heap of the weight chosen holds for leaf n: Auto keys
// a leaf when it is touched, and checkAutoKey verifies those keys' form.
func keyNow(tr *Tree, n *node) rank.Key {
	if tr.meas != nil {
		_, chosen := tr.meas.Horizons(tr.now, tr.evictable+tr.protected)
		return tr.heaps[chosen].At(n.slot).Key
	}
	return tr.params.Key(&rank.Fields{
		LastAccess:  n.lastAccess,
		CreatedAt:   n.createdAt,
		AccessCount: n.accessCount,
		Priority:    int8(n.priority),
		Blocks:      1,
	}, tr.now)
}

// bruteForceVictim returns the hash of the unreferenced leaf with the
// smallest (key at the latest tick, id) over all nodes, or 0 when there is
// none.
func bruteForceVictim(tr *Tree) uint64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var best *node
	for _, n := range tr.children {
		if n.ref != 0 || n.children != 0 {
			continue
		}
		if best == nil {
			best = n
			continue
		}
		if c := keyNow(tr, n).Compare(keyNow(tr, best)); c < 0 || c == 0 && n.id < best.id {
			best = n
		}
	}
	if best == nil {
		return 0
	}
	return best.hash
}

// TestConcurrent runs operations from several goroutines (under -race) and
// checks the invariants and the event stream at the end: replaying the
// events gives the tree's size.
func TestConcurrent(t *testing.T) {
	for _, s := range []kvevict.Strategy{kvevict.LRU, kvevict.Auto} {
		t.Run(string(s), func(t *testing.T) { testConcurrent(t, s) })
	}
}

func testConcurrent(t *testing.T, s kvevict.Strategy) {
	var mu sync.Mutex
	stored, removed := 0, 0
	tr := newTree(t, s, roomy, WithEvents(func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Kind == Stored {
			stored += len(e.Hashes)
		} else {
			removed += len(e.Hashes)
		}
	}))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for i := range 500 {
				path := []uint64{uint64(g), uint64(rng.IntN(8)), uint64(rng.IntN(8))}
				a := at(int64(i))
				m, err := tr.MatchLocked(path, a)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := tr.InsertLocked(path, a); err != nil {
					t.Error(err)
					return
				}
				if m > 0 {
					if err := tr.Unlock(path[:m]); err != nil {
						t.Error(err)
						return
					}
				}
				if n := tr.EvictableBlocks(); n > 20 {
					if _, err := tr.Evict(1); err != nil && !errors.Is(err, kvevict.ErrInsufficientBlocks) {
						t.Error(err)
						return
					}
				}
				if err := tr.Unlock(path); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	check(t, tr)
	mu.Lock()
	defer mu.Unlock()
	if stored-removed != tr.Len() {
		t.Errorf("events: %d stored - %d removed != Len() %d", stored, removed, tr.Len())
	}
}

// TestEvictAllocatesOnlyItsResult: an eviction allocates the slice of
// hashes it returns and nothing per block, whatever the strategy's key.
func TestEvictAllocatesOnlyItsResult(t *testing.T) {
	if raceEnabled {
		t.Skip("one goroutine; run without -race")
	}
	for _, s := range []kvevict.Strategy{kvevict.LRU, kvevict.LFU, kvevict.Predictive} {
		tr := newTree(t, s, roomy)
		next := uint64(1)
		fill := func() {
			for tr.Len() < 4000 {
				path := []uint64{next, next + 1, next + 2, next + 3}
				next += 4
				mustInsert(t, tr, path, at(int64(next)))
			}
		}
		fill()
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := tr.Evict(16); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 1 {
			t.Errorf("%s: Evict(16) allocates %v times, want 1 (its result)", s, allocs)
		}
	}
}

// TestEventsReadTheTree has an event callback read the tree, as WithEvents
// allows, while 8 goroutines insert and evict: a call that changed the
// tree must not wait for the callback's turn while it holds the lock the
// callback needs. Every event must still arrive, in order per goroutine's
// call, one at a time.
func TestEventsReadTheTree(t *testing.T) {
	var inCallback atomic.Int32
	var stored, removed atomic.Int64
	var tree *Tree
	tree, err := New(kvevict.LRU, roomy, WithEvents(func(e Event) {
		if inCallback.Add(1) != 1 {
			t.Error("two event calls at once")
		}
		_ = tree.Len()
		_ = tree.Peek(e.Hashes)
		switch e.Kind {
		case Stored:
			stored.Add(int64(len(e.Hashes)))
		case Removed:
			removed.Add(int64(len(e.Hashes)))
		}
		inCallback.Add(-1)
	}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				path := []uint64{uint64(g), uint64(g)<<32 | uint64(i)}
				if _, err := tree.Insert(path, Access{Tick: int64(i)}); err != nil {
					t.Error(err)
					return
				}
				if over := tree.Len() - 100; over > 0 {
					if _, err := tree.Evict(min(over, tree.EvictableBlocks())); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("deadlock: the goroutines did not finish in 30 s")
	}
	if got := stored.Load() - removed.Load(); got != int64(tree.Len()) {
		t.Errorf("events say %d blocks resident, the tree holds %d", got, tree.Len())
	}
}

// TestNewIgnoresCase: a tree takes a strategy's name in any case, as
// kvevict.New and ParseStrategy do.
func TestNewIgnoresCase(t *testing.T) {
	for _, s := range []kvevict.Strategy{"LRU", " Auto "} {
		if _, err := New(s, roomy); err != nil {
			t.Errorf("New(%q): %v", s, err)
		}
	}
}
