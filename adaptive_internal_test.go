package kvevict

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

var adaptiveStrategies = []Strategy{ARC, S3FIFO, SIEVE, Auto}

// checkHistory fails t if p's history breaks an invariant of its strategy or
// tracks more ids than its bound.
func checkHistory(t testing.TB, p Policy, c int) {
	t.Helper()
	h := p.(*policy).history()
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	if n, limit := h.Nodes().Tracked(), 2*c; n > limit {
		t.Fatalf("%d ids tracked, more than 2c = %d", n, limit)
	}
}

// fingerprint describes everything a selection could change in p's history.
func fingerprint(p Policy) string { return fmt.Sprint(p.(*policy).history()) }

// ops drives a policy from a byte stream, so the random-operation test and
// the fuzz target share one checker: every operation is followed by the
// history's invariants and every selection by the contract's.
func ops(t testing.TB, s Strategy, c int, data []byte) {
	p, err := New(s, withGhosts(s, max(1, c), WithCapacity(c))...)
	if err != nil {
		t.Fatal(err)
	}
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	var tick int64
	for len(data) > 0 {
		op := next()
		if op%4 == 1 && op&0x10 != 0 {
			// A request by block hash: heads of the candidates below,
			// shared by several of them at times.
			p.UpdateAccessHashes([]uint64{1000 + uint64(next()%8), 1000 + uint64(next()%8)})
			checkHistory(t, p, c)
			continue
		}
		if op%4 != 0 {
			p.UpdateAccess(uint64(next() % 48))
			checkHistory(t, p, c)
			continue
		}
		n := int(next() % 24)
		cands := make([]Candidate, 0, n)
		used := map[uint64]bool{}
		for range n {
			id := uint64(next() % 48)
			if used[id] {
				continue
			}
			used[id] = true
			f := next()
			tick++
			blocks := idBlocks(id, int(f%4))
			if f&0x4c == 0x4c && len(blocks) > 0 { // one candidate in eight
				blocks[0] = sharedBlock // listed by every candidate so marked
			}
			cand := Candidate{
				ID:           id,
				Blocks:       blocks,
				LastAccess:   tick * int64(next()%3),
				Pinned:       f&0x10 != 0,
				RefCount:     int(f>>5) & 1,
				AllowPartial: f&0x80 != 0,
			}
			if h := next(); h&1 != 0 { // half of them counted by a head hash, not always distinct
				cand.HeadHash = 1000 + uint64(h>>1%8)
			}
			cands = append(cands, cand)
		}
		available := 0
		for i := range cands {
			if cands[i].evictable() {
				available += len(cands[i].Blocks)
			}
		}
		required := int(next()) % (available + 3)
		before := fingerprint(p)
		selections := p.Metrics().Selections
		res, err := p.SelectVictims(cands, required)
		checkHistory(t, p, c)
		if errors.Is(err, ErrInvalidCandidate) {
			// Refused only for a block the victims would free twice: the
			// shared one, which some two evictable candidates list.
			sharing := 0
			for i := range cands {
				if cands[i].evictable() && slices.Contains(cands[i].Blocks, sharedBlock) {
					sharing++
				}
			}
			if sharing < 2 || required > available || p.Metrics().Selections != selections {
				t.Fatalf("need %d of %d: refused (%v) with %d candidates sharing a block, %d selections counted",
					required, available, err, sharing, p.Metrics().Selections-selections)
			}
			continue
		}
		if required > available {
			if !errors.Is(err, ErrInsufficientBlocks) {
				t.Fatalf("need %d of %d: err %v, want ErrInsufficientBlocks", required, available, err)
			}
			if after := fingerprint(p); after != before {
				t.Fatalf("failed selection changed the history:\n%s\nto\n%s", before, after)
			}
			continue
		}
		if err != nil {
			t.Fatalf("need %d of %d: %v", required, available, err)
		}
		if required == 0 {
			if len(res.Victims) != 0 {
				t.Fatalf("required 0: %d victims", len(res.Victims))
			}
			continue
		}
		checkResult(t, cands, required, res)
	}
}

// checkResult fails t unless res is a valid greedy result for cands: distinct
// evictable candidates, blocks their own (a tail only for the last, partial
// one), freeing required or, if the last victim was taken whole, at least
// required with every earlier victim needed.
func checkResult(t testing.TB, cands []Candidate, required int, res Result) {
	t.Helper()
	seen := map[uint64]bool{}
	freed := 0
	for i, v := range res.Victims {
		j := slices.IndexFunc(cands, func(c Candidate) bool { return c.ID == v.ID })
		if j < 0 {
			t.Fatalf("victim %d is not a candidate", v.ID)
		}
		c := &cands[j]
		if !c.evictable() || seen[v.ID] {
			t.Fatalf("victim %d: pinned %v, refs %d, blocks %d, repeated %v", v.ID, c.Pinned, c.RefCount, len(c.Blocks), seen[v.ID])
		}
		seen[v.ID] = true
		if freed >= required {
			t.Fatalf("victim %d of %d taken after %d of %d blocks were freed", i, len(res.Victims), freed, required)
		}
		if len(v.Blocks) < len(c.Blocks) && (!c.AllowPartial || i != len(res.Victims)-1) {
			t.Fatalf("victim %d lost %d of %d blocks", v.ID, len(v.Blocks), len(c.Blocks))
		}
		freed += len(v.Blocks)
	}
	if freed != res.FreedBlocks || freed < required {
		t.Fatalf("freed %d (Result says %d), need %d", freed, res.FreedBlocks, required)
	}
	blocks := map[int]bool{}
	for _, v := range res.Victims {
		for _, b := range v.Blocks {
			if blocks[b] {
				t.Fatalf("block %d freed twice", b)
			}
			blocks[b] = true
		}
	}
}

// sharedBlock is a block that ops lists in several candidates, so that
// some selections would free it twice.
const sharedBlock = -1

// TestAdaptiveRandomOps runs random operations on small caches, where
// candidates outnumber the capacity, ids come back from the ghosts and
// selections fail, checking the invariants after each.
func TestAdaptiveRandomOps(t *testing.T) {
	for _, s := range adaptiveStrategies {
		for _, c := range []int{1, 2, 5, 16, 64} {
			t.Run(fmt.Sprintf("%s/c=%d", s, c), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(c), 11))
				data := make([]byte, 20_000)
				for i := range data {
					data[i] = byte(rng.Uint32())
				}
				ops(t, s, c, data)
			})
		}
	}
}

// TestAdaptiveBoundedMemory: a million distinct ids (a hundred thousand
// under the race detector) through UpdateAccess and selections leave the
// history at its bound.
func TestAdaptiveBoundedMemory(t *testing.T) {
	const c = 100
	ids := uint64(1_000_000)
	if raceEnabled {
		ids /= 10
	}
	for _, s := range adaptiveStrategies {
		t.Run(string(s), func(t *testing.T) {
			p, err := New(s, withGhosts(s, c, WithCapacity(c))...)
			if err != nil {
				t.Fatal(err)
			}
			cands := []Candidate{{ID: 1 << 40, Blocks: []int{1}}}
			for id := range ids {
				p.UpdateAccess(id)
				if id%1000 == 0 {
					cands[0].ID = id
					if _, err := p.SelectVictims(cands, 1); err != nil {
						t.Fatal(err)
					}
				}
			}
			checkHistory(t, p, c)
			h := p.(*policy).history().Nodes()
			if len(h.Slab) > 2*c+1 {
				t.Errorf("slab of %d nodes, bound 2c+1 = %d", len(h.Slab), 2*c+1)
			}
		})
	}
}

// TestAdaptiveDeterministic: the same operations give the same victims.
func TestAdaptiveDeterministic(t *testing.T) {
	for _, s := range adaptiveStrategies {
		run := func() []uint64 {
			p, err := New(s, WithCapacity(20))
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(5, 5))
			var out []uint64
			cands := make([]Candidate, 30)
			for range 200 {
				for i := range cands {
					cands[i] = Candidate{ID: uint64(i), Blocks: []int{i}, LastAccess: rng.Int64N(100)}
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
		if a, b := run(), run(); !slices.Equal(a, b) {
			t.Errorf("%s: victims differ between runs:\n%v\n%v", s, a, b)
		}
	}
}

// TestAdaptiveConcurrent exercises one policy from several goroutines; run
// with -race. The invariants must hold afterwards.
func TestAdaptiveConcurrent(t *testing.T) {
	for _, s := range adaptiveStrategies {
		p, err := New(s, WithCapacity(32))
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
					_ = p.Metrics()
				}
			}()
		}
		for range 4 {
			<-done
		}
		checkHistory(t, p, 32)
		if m := p.Metrics(); m.Selections != 1200 {
			t.Errorf("%s: %d selections counted, want 1200", s, m.Selections)
		}
	}
}

// withGhosts appends WithGhostCap(n) to opts for a strategy that keeps
// ghosts: every adaptive one but SIEVE, which refuses it.
func withGhosts(s Strategy, n int, opts ...Option) []Option {
	if s == SIEVE {
		return opts
	}
	return append(opts, WithGhostCap(n))
}

// idBlocks returns n blocks that no other id's idBlocks returns.
func idBlocks(id uint64, n int) []int {
	b := make([]int, n)
	for i := range b {
		b[i] = int(id)*8 + i
	}
	return b
}
