package kvevict

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestAutoRandomOps runs random operations on small caches (the shared
// driver of the adaptive strategies), checking Auto's invariants and the
// selection contract after each.
func TestAutoRandomOps(t *testing.T) {
	for _, c := range []int{1, 2, 5, 16, 64} {
		t.Run(fmt.Sprintf("c=%d", c), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(c), 12))
			data := make([]byte, 20_000)
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			ops(t, Auto, c, data)
		})
	}
}

// FuzzAuto drives Auto with arbitrary accesses and selections, as
// FuzzAdaptive does the other adaptive strategies.
func FuzzAuto(f *testing.F) {
	f.Add(byte(3), []byte{1, 5, 1, 6, 0, 3, 5, 1, 0, 6, 2, 0, 2})
	f.Add(byte(0), []byte{0, 20, 1, 0x81, 1, 2, 0x93, 1, 3, 3, 0, 4, 0xff, 2, 9})
	f.Fuzz(func(t *testing.T, capacity byte, data []byte) {
		ops(t, Auto, 1+int(capacity%32), data)
	})
}

// TestAutoBoundedMemory: a million distinct ids through UpdateAccess and
// selections leave at most c resident and historyCap ghost ids.
func TestAutoBoundedMemory(t *testing.T) {
	const c, ghosts = 100, 300
	p, err := New(Auto, WithCapacity(c), WithHistoryCap(ghosts))
	if err != nil {
		t.Fatal(err)
	}
	cands := make([]Candidate, 2*c)
	for id := range uint64(1_000_000) {
		p.UpdateAccess(id)
		if id%1000 == 0 {
			for i := range cands {
				cands[i] = Candidate{ID: id - uint64(i), Blocks: []int{i}, LastAccess: int64(id) - int64(i)}
			}
			if _, err := p.SelectVictims(cands, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	h := p.(*policy).hist
	if err := h.check(); err != nil {
		t.Fatal(err)
	}
	if n := h.nodes().index.len(); n > c+ghosts {
		t.Errorf("%d ids tracked, bound c + history cap = %d", n, c+ghosts)
	}
	if n := len(h.nodes().slab); n > c+ghosts+1 {
		t.Errorf("slab of %d nodes, bound %d", n, c+ghosts+1)
	}
}

// TestAutoDeterministic: the same operations give the same victims.
func TestAutoDeterministic(t *testing.T) {
	run := func() []uint64 {
		p, err := New(Auto, WithCapacity(20))
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(5, 5))
		var out []uint64
		cands := make([]Candidate, 30)
		for step := range 300 {
			for i := range cands {
				cands[i] = Candidate{ID: uint64(i), Blocks: []int{i}, LastAccess: int64(step) + rng.Int64N(100), LastBlockPartial: rng.IntN(8) == 0}
			}
			p.UpdateAccess(uint64(rng.IntN(40)))
			res, err := p.SelectVictims(cands, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range res.Victims {
				out = append(out, v.ID)
			}
		}
		return out
	}
	a, b := run(), run()
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("victims differ between runs:\n%v\n%v", a, b)
	}
}

// TestAutoConcurrent exercises one policy from several goroutines; run
// with -race. The invariants must hold afterwards.
func TestAutoConcurrent(t *testing.T) {
	p, err := New(Auto, WithCapacity(32))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			cands := make([]Candidate, 40)
			for range 300 {
				p.UpdateAccess(rng.Uint64N(64))
				for i := range cands {
					cands[i] = Candidate{ID: uint64(i), Blocks: []int{i}, LastAccess: rng.Int64N(1000)}
				}
				if _, err := p.SelectVictims(cands, 1+rng.IntN(3)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
	checkHistory(t, p, 32)
}
