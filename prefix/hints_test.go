package prefix

import (
	"errors"
	"testing"

	"github.com/sagellm/kvevict"
)

// The fuzz model with hints: each path keeps the hints of the latest
// request through it (model.hints), a request with a live hard lease
// protects its path until the lease ends (model.hard), and eviction takes
// unprotected leaves in the order of the classes of kvevict.Hints, as
// written here from their documentation (no code shared with Tree):
// released first, then by retention priority (the default one being the
// plain order), then soft leases by their end; recency within a class.

func (m *model) observe(tick int64) { m.now = max(m.now, tick) }

// access records hints h on the paths of hashes[:k], and its hard lease
// on the path's end.
func (m *model) access(hashes []uint64, k int, h kvevict.Hints) {
	for i := range k {
		m.hints[pathKey(hashes[:i+1])] = h
	}
	if k > 0 && h.HardLease && m.now < h.LeaseUntil {
		key := pathKey(hashes[:k])
		m.hard[key] = max(m.hard[key], h.LeaseUntil)
	}
}

// rank is p's place in eviction order: its class, then recency (negated
// under mru) or its lease's end.
func (m *model) rank(p *modelPath) [2]int64 {
	recency := p.lastAccess
	if m.mru {
		recency = -recency
	}
	h := m.hints[pathKey(p.hashes)]
	leased := h.LeaseUntil != 0 && m.now < h.LeaseUntil
	switch {
	case h.Released:
		return [2]int64{0, p.lastAccess}
	case leased:
		return [2]int64{kvevict.MaxRetention + 2, h.LeaseUntil}
	case h.RetainUntil != 0 && m.now < h.RetainUntil && h.Retention != kvevict.DefaultRetention:
		return [2]int64{1 + int64(h.Retention), p.lastAccess}
	}
	return [2]int64{1 + kvevict.DefaultRetention, recency}
}

// hintOf decodes a request's hints from b, around tick: released, a lease
// (hard or soft) and a retention priority, each ending within a few ticks
// (some at once).
func hintOf(b byte, tick int64) kvevict.Hints {
	var h kvevict.Hints
	h.Released = b&1 != 0
	if b&2 != 0 {
		h.LeaseUntil = max(tick+int64(b>>4&3), 1)
		h.HardLease = b&4 != 0
	}
	if b&8 != 0 {
		h.Retention = []uint8{0, 30, 50, 90}[b>>6]
		h.RetainUntil = max(tick+int64(b>>5&3), 1)
	}
	return h
}

// FuzzTreeHints drives an LRU Tree and the model with requests that carry
// hints, as FuzzTree does without: every operation takes four bytes, the
// fourth the request's hints.
func FuzzTreeHints(f *testing.F) {
	f.Add([]byte{0, 3, 5, 1, 0, 2, 7, 2, 1, 3, 5, 10, 4, 2, 0, 0, 0, 4, 2, 6, 4, 5, 0, 0})
	f.Add([]byte{6, 3, 5, 6, 0, 2, 7, 0, 4, 1, 0, 0, 4, 1, 0, 0, 0, 4, 2, 1, 4, 6, 0, 0, 3, 3, 5, 0, 4, 6, 0, 0})
	f.Add([]byte{0, 4, 80, 200, 1, 3, 80, 9, 0, 2, 26, 3, 4, 6, 0, 0, 1, 4, 80, 0, 4, 6, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		m := &model{paths: make(map[string]*modelPath), hints: map[string]kvevict.Hints{}, hard: map[string]int64{}}
		tr := newTree(t, kvevict.LRU, roomy)
		for step := 0; step+3 < len(ops) && step < 4*200; step += 4 {
			tick := int64(step / 16)
			h := make([]uint64, 1+ops[step+1]%4)
			seed := ops[step+2]
			for i := range h {
				h[i] = uint64(seed % 3)
				seed /= 3
			}
			a := Access{Tick: tick, Hints: hintOf(ops[step+3], tick)}
			switch ops[step] % 7 {
			case 0, 6:
				m.observe(tick)
				k := m.matched(h)
				lock := ops[step]%7 == 6
				var got int
				var err error
				if lock {
					got, err = tr.InsertLocked(h, a)
				} else {
					got, err = tr.Insert(h, a)
				}
				want := m.insert(h, tick)
				if lock {
					m.paths[pathKey(h)].locks++
				}
				m.access(h, len(h), a.Hints)
				if err != nil || got != want || k+want != len(h) {
					t.Fatalf("Insert(%v) = %d, %v; model adds %d", h, got, err, want)
				}
			case 1, 5:
				m.observe(tick)
				lock := ops[step]%7 == 5
				var got int
				var err error
				if lock {
					got, err = tr.MatchLocked(h, a)
				} else {
					got, err = tr.Match(h, a)
				}
				want := m.matched(h)
				m.touch(h[:want], tick)
				m.access(h, want, a.Hints)
				if lock && want > 0 {
					m.paths[pathKey(h[:want])].locks++
				}
				if err != nil || got != want {
					t.Fatalf("Match(%v) = %d, %v; model matches %d", h, got, err, want)
				}
			case 2, 3:
				if m.matched(h) < len(h) || m.paths[pathKey(h)].locks == 0 {
					break
				}
				if err := tr.Unlock(h); err != nil {
					t.Fatalf("Unlock(%v): %v", h, err)
				}
				m.paths[pathKey(h)].locks--
			case 4:
				m.checkEvict(t, tr, int(ops[step+1]%7), false)
			}
			check(t, tr)
			if got, want := tr.EvictableBlocks(), m.evictable(); got != want {
				t.Fatalf("EvictableBlocks() = %d, model says %d", got, want)
			}
		}
	})
}

// TestTreeHintsErrors: hints no class can hold are refused by every
// access, before any change.
func TestTreeHintsErrors(t *testing.T) {
	tr := newTree(t, kvevict.LRU, roomy)
	bad := Access{Tick: 1, Hints: kvevict.Hints{Retention: kvevict.MaxRetention + 1, RetainUntil: 5}}
	for name, f := range map[string]func() error{
		"Insert":       func() error { _, err := tr.Insert([]uint64{1}, bad); return err },
		"InsertLocked": func() error { _, err := tr.InsertLocked([]uint64{1}, bad); return err },
		"Match":        func() error { _, err := tr.Match([]uint64{1}, bad); return err },
		"MatchLocked":  func() error { _, err := tr.MatchLocked([]uint64{1}, bad); return err },
		"Admit":        func() error { _, err := tr.Admit([]uint64{1}, bad); return err },
	} {
		if err := f(); !errors.Is(err, kvevict.ErrInvalidArgument) {
			t.Errorf("%s with a retention priority of 101: err %v, want ErrInvalidArgument", name, err)
		}
	}
	if tr.Len() != 0 {
		t.Errorf("the refused accesses left %d blocks", tr.Len())
	}
}
