package prefix

import (
	"errors"
	"slices"
	"testing"

	"github.com/sagellm/kvevict"
)

// model is a simple reference for an LRU tree: the set of resident paths,
// each with its own access time, creation order and locks, and eviction by
// scanning every path. It shares no code with Tree.
type model struct {
	paths  map[string]*modelPath
	nextID uint64
	mru    bool // evict the most recently used leaf instead of the least
	// With hints (hints_test.go), each path's latest request's hints, the
	// end of the hard lease a request's path ends with, and the clock.
	hints map[string]kvevict.Hints
	hard  map[string]int64
	now   int64
}

type modelPath struct {
	hashes     []uint64
	lastAccess int64
	id         uint64
	locks      int // locks ending here
}

func pathKey(h []uint64) string {
	b := make([]byte, 0, 8*len(h))
	for _, x := range h {
		for i := range 8 {
			b = append(b, byte(x>>(8*i)))
		}
	}
	return string(b)
}

func (m *model) matched(h []uint64) int {
	i := 0
	for i < len(h) && m.paths[pathKey(h[:i+1])] != nil {
		i++
	}
	return i
}

func (m *model) touch(h []uint64, tick int64) {
	for i := range h {
		m.paths[pathKey(h[:i+1])].lastAccess = tick
	}
}

func (m *model) insert(h []uint64, tick int64) int {
	k := m.matched(h)
	m.touch(h[:k], tick)
	for i := k; i < len(h); i++ {
		m.nextID++
		m.paths[pathKey(h[:i+1])] = &modelPath{hashes: slices.Clone(h[:i+1]), lastAccess: tick, id: m.nextID}
	}
	return len(h) - k
}

// protected reports whether some lock, or live hard lease, ends at p or
// below it.
func (m *model) protected(p *modelPath) bool {
	for _, q := range m.paths {
		below := len(q.hashes) >= len(p.hashes) && slices.Equal(q.hashes[:len(p.hashes)], p.hashes)
		if below && (q.locks > 0 || m.hard[pathKey(q.hashes)] > m.now) {
			return true
		}
	}
	return false
}

func (m *model) hasChild(p *modelPath) bool {
	for _, q := range m.paths {
		if len(q.hashes) == len(p.hashes)+1 && slices.Equal(q.hashes[:len(p.hashes)], p.hashes) {
			return true
		}
	}
	return false
}

func (m *model) evictable() int {
	n := 0
	for _, p := range m.paths {
		if !m.protected(p) {
			n++
		}
	}
	return n
}

// evict removes k unprotected leaves, least (or with mru, most) recently
// used first, in the order of the hints' classes (rank), ties by creation
// order, and returns their last hashes.
func (m *model) evict(k int) []uint64 {
	var out []uint64
	for range k {
		var best *modelPath
		for _, p := range m.paths {
			if m.protected(p) || m.hasChild(p) {
				continue
			}
			if best == nil {
				best = p
				continue
			}
			a, b := m.rank(p), m.rank(best)
			if a[0] < b[0] || a[0] == b[0] && (a[1] < b[1] || a[1] == b[1] && p.id < best.id) {
				best = p
			}
		}
		delete(m.paths, pathKey(best.hashes))
		delete(m.hard, pathKey(best.hashes))
		out = append(out, best.hashes[len(best.hashes)-1])
	}
	return out
}

// evictedBy checks an eviction whose order the model does not compute
// (Auto's, which depends on the history's measurements) and applies it:
// the paths the tree no longer holds must be k unprotected paths, closed
// under descent (a path goes only with everything below it: leaves
// first), whose last hashes are the hashes the tree returned.
func (m *model) evictedBy(tb testing.TB, tr *Tree, got []uint64) {
	tb.Helper()
	var gone []*modelPath
	for _, p := range m.paths {
		if tr.Peek(p.hashes) < len(p.hashes) {
			gone = append(gone, p)
		}
	}
	var last []uint64
	for _, p := range gone {
		if m.protected(p) {
			tb.Fatalf("Evict freed the locked path %v", p.hashes)
		}
		for _, q := range m.paths {
			if len(q.hashes) > len(p.hashes) && slices.Equal(q.hashes[:len(p.hashes)], p.hashes) && tr.Peek(q.hashes) == len(q.hashes) {
				tb.Fatalf("Evict freed %v before %v below it", p.hashes, q.hashes)
			}
		}
		last = append(last, p.hashes[len(p.hashes)-1])
	}
	got = slices.Clone(got)
	slices.Sort(got)
	slices.Sort(last)
	if !slices.Equal(got, last) {
		tb.Fatalf("Evict returned %v; the paths gone end in %v", got, last)
	}
	for _, p := range gone {
		delete(m.paths, pathKey(p.hashes))
	}
}

// checkEvict evicts k blocks from tr and checks the outcome against the
// model, which it applies: the model's victims, or with auto (whose order
// the model does not compute) victims the model accepts as leaves.
func (m *model) checkEvict(t *testing.T, tr *Tree, k int, auto bool) {
	t.Helper()
	got, err := tr.Evict(k)
	if avail := m.evictable(); k > avail {
		if !errors.Is(err, kvevict.ErrInsufficientBlocks) {
			t.Fatalf("Evict(%d) of %d evictable: %v, want ErrInsufficientBlocks", k, avail, err)
		}
		return
	}
	if err != nil || len(got) != k {
		t.Fatalf("Evict(%d) = %v, %v", k, got, err)
	}
	if auto {
		m.evictedBy(t, tr, got)
	} else if want := m.evict(k); !slices.Equal(got, want) {
		t.Fatalf("Evict(%d) = %v; model evicts %v", k, got, want)
	}
}

// FuzzTree drives a Tree and the model with the same operations and
// compares every result, checking the tree's invariants after each. The
// first byte chooses LRU, MRU (whose keys decrease as blocks are used) or
// Auto, whose victims the model checks by evictedBy rather than computes.
// Each operation takes three bytes: the operation, a path length and the
// seed of the path's hashes, drawn from {0, 1, 2} so that paths share
// prefixes. The clock advances every four operations, so that equal keys
// test the tie break.
func FuzzTree(f *testing.F) {
	f.Add([]byte{0, 0, 3, 5, 0, 2, 7, 1, 3, 5, 2, 2, 0, 4, 2, 0, 3, 2, 0, 4, 5, 0})
	f.Add([]byte{1, 0, 4, 1, 2, 4, 1, 4, 3, 0, 3, 4, 1, 4, 9, 0, 0, 1, 2})
	f.Add([]byte{0, 6, 3, 5, 5, 4, 5, 4, 6, 0, 3, 3, 5, 4, 6, 0, 3, 3, 8})
	f.Add([]byte{2, 0, 3, 5, 0, 2, 7, 1, 3, 5, 2, 2, 0, 4, 2, 0, 3, 2, 0, 4, 5, 0, 0, 3, 5, 1, 3, 5, 4, 3, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) == 0 {
			return
		}
		m := &model{paths: make(map[string]*modelPath)}
		strategy := []kvevict.Strategy{kvevict.LRU, kvevict.MRU, kvevict.Auto}[ops[0]%3]
		m.mru = strategy == kvevict.MRU
		// Auto remembers few evicted blocks, so that it forgets as well,
		// and its miniature caches are small, so that they evict too.
		capacity, opts := roomy, []Option(nil)
		if strategy == kvevict.Auto {
			capacity, opts = 3, append(opts, WithStrategyOptions(kvevict.WithGhostCap(4)))
		}
		tr := newTree(t, strategy, capacity, opts...)
		ops = ops[1:]
		for step := 0; step+2 < len(ops) && step < 3*200; step += 3 {
			tick := int64(step / 12) // four operations per tick, so keys tie
			h := make([]uint64, ops[step+1]%5)
			seed := ops[step+2]
			for i := range h {
				h[i] = uint64(seed % 3)
				seed /= 3
			}
			empty := len(h) == 0
			switch ops[step] % 7 {
			case 0:
				got, err := tr.Insert(h, at(tick))
				if empty {
					if !errors.Is(err, ErrEmptyPath) {
						t.Fatalf("Insert(%v): %v, want ErrEmptyPath", h, err)
					}
					break
				}
				if want := m.insert(h, tick); err != nil || got != want {
					t.Fatalf("Insert(%v) = %d, %v; model adds %d", h, got, err, want)
				}
			case 1:
				got, err := tr.Match(h, at(tick))
				if empty {
					if !errors.Is(err, ErrEmptyPath) {
						t.Fatalf("Match(%v): %v, want ErrEmptyPath", h, err)
					}
					break
				}
				want := m.matched(h)
				m.touch(h[:want], tick)
				if err != nil || got != want {
					t.Fatalf("Match(%v) = %d, %v; model matches %d", h, got, err, want)
				}
			case 2:
				err := tr.Lock(h)
				switch {
				case empty:
					if !errors.Is(err, ErrEmptyPath) {
						t.Fatalf("Lock(%v): %v, want ErrEmptyPath", h, err)
					}
				case m.matched(h) < len(h):
					if !errors.Is(err, ErrNotFound) {
						t.Fatalf("Lock(%v) of a missing path: %v, want ErrNotFound", h, err)
					}
				default:
					if err != nil {
						t.Fatalf("Lock(%v): %v", h, err)
					}
					m.paths[pathKey(h)].locks++
				}
			case 3:
				err := tr.Unlock(h)
				switch {
				case empty:
					if !errors.Is(err, ErrEmptyPath) {
						t.Fatalf("Unlock(%v): %v, want ErrEmptyPath", h, err)
					}
				case m.matched(h) < len(h):
					if !errors.Is(err, ErrNotFound) {
						t.Fatalf("Unlock(%v) of a missing path: %v, want ErrNotFound", h, err)
					}
				case m.paths[pathKey(h)].locks == 0:
					if !errors.Is(err, ErrNotLocked) {
						t.Fatalf("Unlock(%v) of an unlocked path: %v, want ErrNotLocked", h, err)
					}
				default:
					if err != nil {
						t.Fatalf("Unlock(%v): %v", h, err)
					}
					m.paths[pathKey(h)].locks--
				}
			case 4:
				m.checkEvict(t, tr, int(ops[step+1]%7), strategy == kvevict.Auto)
			case 5:
				got, err := tr.MatchLocked(h, at(tick))
				if empty {
					if !errors.Is(err, ErrEmptyPath) {
						t.Fatalf("MatchLocked(%v): %v, want ErrEmptyPath", h, err)
					}
					break
				}
				want := m.matched(h)
				m.touch(h[:want], tick)
				if want > 0 {
					m.paths[pathKey(h[:want])].locks++
				}
				if err != nil || got != want {
					t.Fatalf("MatchLocked(%v) = %d, %v; model matches %d", h, got, err, want)
				}
			case 6:
				got, err := tr.InsertLocked(h, at(tick))
				if empty {
					if !errors.Is(err, ErrEmptyPath) {
						t.Fatalf("InsertLocked(%v): %v, want ErrEmptyPath", h, err)
					}
					break
				}
				want := m.insert(h, tick)
				m.paths[pathKey(h)].locks++
				if err != nil || got != want {
					t.Fatalf("InsertLocked(%v) = %d, %v; model adds %d", h, got, err, want)
				}
			}
			check(t, tr)
			if got, want := tr.Len(), len(m.paths); got != want {
				t.Fatalf("Len() = %d, model holds %d", got, want)
			}
			if got, want := tr.EvictableBlocks(), m.evictable(); got != want {
				t.Fatalf("EvictableBlocks() = %d, model says %d", got, want)
			}
			for _, p := range m.paths {
				if got := tr.Peek(p.hashes); got != len(p.hashes) {
					t.Fatalf("model path %v: Peek = %d", p.hashes, got)
				}
			}
		}
	})
}
