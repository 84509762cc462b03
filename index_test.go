package kvevict

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

var soak = flag.Bool("soak", false, "run the index soak test for 10M operations instead of a short one")

// checkIndex verifies every invariant of x: the slot map and the slab
// agree, the free slots hold no candidate, available is the evictable
// candidates' block sum, and the order's own invariants hold.
func checkIndex(t testing.TB, x *Index) {
	t.Helper()
	live, available := 0, 0
	listed := map[int]int{}
	for slot := range x.made {
		c := x.cand(slot)
		if got, ok := x.find(c.ID); !ok || got != slot {
			continue // a free slot
		}
		live++
		for _, b := range c.Blocks {
			listed[b]++
		}
		if c.evictable() && (!c.apart || x.apart.Contains(slot)) {
			available += len(c.Blocks)
		}
		checkClass(t, x, slot, c)
	}
	if live != x.held {
		t.Fatalf("%d live slots, index holds %d", live, x.held)
	}
	if live+len(x.free) != int(x.made) {
		t.Fatalf("%d live + %d free slots != %d slots", live, len(x.free), x.made)
	}
	for _, slot := range x.free {
		if c := x.cand(slot); c.Blocks != nil || c.ID != 0 {
			t.Fatalf("free slot %d holds ID %d", slot, c.ID)
		}
	}
	if available != x.available {
		t.Fatalf("evictable blocks %d, index says %d", available, x.available)
	}
	if err := x.listed.Check(listed); err != nil {
		t.Fatal(err)
	}
	if len(x.taken) != 0 {
		t.Fatalf("%d victims taken outside an eviction", len(x.taken))
	}
	if err := checkOrder(x); err != nil {
		t.Fatal(err)
	}
	checkSides(t, x)
}

// checkOrder verifies the invariants of x's order and, in an adaptive
// index, of its marks.
func checkOrder(x *Index) error {
	if x.hist == nil {
		return x.ord.(*keyOrder).check()
	}
	marked, err := x.hist.check()
	if err != nil || x.prep == nil {
		return err
	}
	return x.prep.check(marked)
}

// tableCaps describes the capacities of x's tables: a table that grows
// moves to a larger array, so its capacity changes.
func tableCaps(x *Index) string {
	listed := x.listed.Tables()
	caps := append([]int{slabCap(x)}, listed[:]...)
	if !x.byHistory {
		caps = append(caps, x.ids.Slots())
	}
	if h := x.hist; h != nil {
		caps = append(caps, cap(h.waiting), h.t.Slots(), cap(h.st))
		if h.auto != nil {
			caps = append(caps, cap(h.auto.info))
		}
	}
	return fmt.Sprint(caps)
}

// slabCap returns how many candidates x's slots have room for.
func slabCap(x *Index) int { return cap(x.slots) }

// pending returns the lengths of the lists an adaptive index keeps until
// the next eviction: the slots waiting for admission and Auto's slots to
// file again.
func pending(x *Index) (waiting, refile int) {
	if x.hist == nil {
		return 0, 0
	}
	if x.prep != nil {
		refile = len(x.prep.refile)
	}
	return len(x.hist.waiting), refile
}

// indexConfigs are the strategies and options the differential tests cover:
// every key strategy the index supports, some with non-default options.
func indexConfigs() []struct {
	name string
	s    Strategy
	opts []Option
} {
	type cfg = struct {
		name string
		s    Strategy
		opts []Option
	}
	var out []cfg
	for _, s := range Strategies() {
		out = append(out, cfg{string(s), s, nil})
	}
	out = append(out,
		cfg{"lfu/halflife", LFU, []Option{WithLFUHalfLife(50 * time.Nanosecond)}},
		cfg{"slru/threshold=3", SLRU, []Option{WithSLRUThreshold(3)}},
		cfg{"frequency_cost/alpha=0.5", FrequencyCost, []Option{WithCostAlpha(0.5)}},
		cfg{"predictive/horizon", Predictive, []Option{WithLifetimeHorizon(200 * time.Nanosecond)}},
		// Histories smaller than the pool, so that they evict inside
		// themselves and forget what the index holds.
		cfg{"arc/capacity=6", ARC, []Option{WithCapacity(6), WithGhostCap(4)}},
		cfg{"s3fifo/capacity=6", S3FIFO, []Option{WithCapacity(6), WithGhostCap(3)}},
		cfg{"sieve/capacity=6", SIEVE, []Option{WithCapacity(6)}},
		cfg{"auto/capacity=6", Auto, []Option{WithCapacity(6), WithGhostCap(5)}},
		// Candidates counted by a head hash, few enough to be shared.
		cfg{"auto/heads", Auto, nil},
		cfg{"auto/heads/capacity=6", Auto, []Option{WithCapacity(6), WithGhostCap(5)}},
	)
	return out
}

// model is the reference: the same candidates as a slice, evicted by a
// Policy's SelectVictims.
type model struct {
	cands []Candidate
	p     Policy
}

func (m *model) find(id uint64) int {
	return slices.IndexFunc(m.cands, func(c Candidate) bool { return c.ID == id })
}

// evict runs SelectVictims and applies the result: whole victims leave,
// a trimmed victim keeps the head of its blocks.
func (m *model) evict(required int) (Result, error) {
	res, err := m.p.SelectVictims(m.cands, required)
	if err != nil {
		return res, err
	}
	for _, v := range res.Victims {
		i := m.find(v.ID)
		if keep := len(m.cands[i].Blocks) - len(v.Blocks); keep > 0 {
			m.cands[i].Blocks = m.cands[i].Blocks[:keep:keep]
			continue
		}
		m.cands = slices.Delete(m.cands, i, i+1)
	}
	return res, nil
}

// opRunner applies a stream of operations to an Index and to a model and
// fails on the first disagreement.
type opRunner struct {
	t     testing.TB
	x     *Index
	m     *model
	tick  int64
	maxID uint64
	heads bool // candidates set HeadHash, from a dozen hashes
	hints bool // candidates carry hints, and a clock candidate keeps now
	// nextBlock is the next block a new candidate lists.
	nextBlock int
}

// newOpRunner returns the runner of strategy s and opts; a configuration
// named with "heads" gives its candidates head hashes and its requests by
// hash too.
func newOpRunner(t testing.TB, name string, s Strategy, opts []Option) *opRunner {
	t.Helper()
	x, err := NewIndex(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return &opRunner{t: t, x: x, m: &model{p: p}, heads: strings.Contains(name, "heads")}
}

// clockID is the ID of the hints runner's clock candidate, which no
// operation picks: it holds no block and is touched at every step, so
// that the index's now and the Policy's (the latest LastAccess among the
// candidates) agree.
const clockID = 1 << 62

// newHintsRunner returns the runner of newOpRunner whose candidates carry
// random hints, with the clock candidate added.
func newHintsRunner(t testing.TB, name string, s Strategy, opts []Option) *opRunner {
	r := newOpRunner(t, name, s, opts)
	r.hints = true
	c := Candidate{ID: clockID}
	if err := r.x.Add(c); err != nil {
		t.Fatal(err)
	}
	r.m.cands = append(r.m.cands, c)
	return r
}

// headTaken reports whether another candidate of the model than id is
// counted by the history id c would be: an Index of Auto refuses c then.
func (r *opRunner) headTaken(c *Candidate) bool {
	if !r.heads {
		return false
	}
	return slices.ContainsFunc(r.m.cands, func(o Candidate) bool { return o.ID != c.ID && historyID(&o) == historyID(c) })
}

func (r *opRunner) randomCandidate(id uint64, next func(int) int) Candidate {
	blocks := make([]int, next(6)) // sometimes empty
	for i := range blocks {
		blocks[i] = r.nextBlock // each block listed once: the Index refuses to free a shared one
		r.nextBlock++
	}
	c := Candidate{
		ID:           id,
		Blocks:       blocks,
		LastAccess:   r.tick - int64(next(50)),
		CreatedAt:    r.tick - int64(next(100)),
		AccessCount:  next(5),
		Priority:     Priority(next(3)),
		Pinned:       next(10) == 0,
		SeqLen:       next(100),
		MaxLen:       next(120),
		AllowPartial: next(3) == 0,
	}
	if next(4) == 0 {
		c.RefCount = 1
	}
	if next(2) == 0 {
		c.EstimatedLifetime = time.Duration(next(300))
	}
	if r.heads && next(3) != 0 {
		c.HeadHash = 1000 + uint64(next(12))
	}
	if r.hints && next(2) == 0 {
		c.Hints = randomHints(r.tick, next)
	}
	return c
}

// randomHints returns valid hints around tick: some spent, some live.
func randomHints(tick int64, next func(int) int) Hints {
	var h Hints
	h.Released = next(4) == 0
	if next(2) == 0 {
		h.LeaseUntil = max(tick+int64(next(40))-10, 1)
		h.HardLease = next(4) == 0
	}
	if next(2) == 0 {
		h.Retention = uint8(next(MaxRetention + 1))
		h.RetainUntil = max(tick+int64(next(40))-10, 1)
	}
	return h
}

// step applies one operation chosen by next, a source of bounded integers.
func (r *opRunner) step(next func(int) int) {
	t, x, m := r.t, r.x, r.m
	t.Helper()
	r.tick += int64(next(3))
	if r.hints {
		if err := x.Touch(clockID, r.tick); err != nil {
			t.Fatal(err)
		}
		i := m.find(clockID)
		m.cands[i].LastAccess = r.tick
		m.cands[i].AccessCount++
	}
	pickID := func() uint64 { return uint64(next(int(r.maxID) + 2)) } // sometimes absent
	switch op := next(11); op {
	case 10: // a request, for a held sequence or not
		if r.heads && next(2) == 0 {
			hashes := []uint64{1000 + uint64(next(12)), 1000 + uint64(next(12))}
			x.UpdateAccessHashes(hashes)
			m.p.UpdateAccessHashes(hashes)
			break
		}
		id := pickID()
		x.UpdateAccess(id)
		m.p.UpdateAccess(id)
	case 0, 1: // add
		r.maxID++
		c := r.randomCandidate(r.maxID, next)
		if next(8) == 0 && r.maxID > 1 { // re-add an ID that may be present or evicted
			c.ID = pickID()
		}
		err := x.Add(c)
		if refused := m.find(c.ID) >= 0 || r.headTaken(&c); refused != (err != nil) {
			t.Fatalf("Add(%d): err %v, model refuses it: %v", c.ID, err, refused)
		}
		if err == nil {
			m.cands = append(m.cands, c)
			m.p.UpdateAccess(c.ID)
			x.UpdateAccess(c.ID)
		}
	case 2, 3: // touch
		id := pickID()
		err := x.Touch(id, r.tick)
		i := m.find(id)
		if (i >= 0) != (err == nil) {
			t.Fatalf("Touch(%d): err %v, model index %d", id, err, i)
		}
		if err == nil {
			m.cands[i].LastAccess = r.tick
			m.cands[i].AccessCount++
		} else if !errors.Is(err, ErrUnknownSequence) {
			t.Fatalf("Touch(%d): %v, want ErrUnknownSequence", id, err)
		}
	case 4: // remove
		id := pickID()
		i := m.find(id)
		if got := x.Remove(id); got != (i >= 0) {
			t.Fatalf("Remove(%d) = %v, model index %d", id, got, i)
		}
		if i >= 0 {
			m.cands = slices.Delete(m.cands, i, i+1)
		}
	case 5: // pin or unpin
		id, pinned := pickID(), next(2) == 0
		i := m.find(id)
		if err := x.Pin(id, pinned); (err == nil) != (i >= 0) {
			t.Fatalf("Pin(%d): err %v, model index %d", id, err, i)
		}
		if i >= 0 {
			m.cands[i].Pinned = pinned
		}
	case 6: // acquire or release
		id := pickID()
		i := m.find(id)
		if next(2) == 0 {
			err := x.Lock(id)
			if (err == nil) != (i >= 0) {
				t.Fatalf("Lock(%d): err %v, model index %d", id, err, i)
			}
			if i >= 0 {
				m.cands[i].RefCount++
			}
		} else {
			err := x.Unlock(id)
			if want := i >= 0 && m.cands[i].RefCount > 0; (err == nil) != want {
				t.Fatalf("Release(%d): err %v, want success %v", id, err, want)
			}
			if err == nil {
				m.cands[i].RefCount--
			}
		}
	case 7: // update
		id := pickID()
		c := r.randomCandidate(id, next)
		i := m.find(id)
		taken := r.headTaken(&c)
		if err := x.Update(c); (err == nil) != (i >= 0 && !taken) {
			t.Fatalf("Update(%d): err %v, model index %d, head taken %v", id, err, i, taken)
		}
		if i >= 0 && !taken {
			m.cands[i] = c
		}
	default: // evict
		required := next(12)
		got, gotErr := x.Evict(required)
		want, wantErr := m.evict(required)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("Evict(%d): err %v, SelectVictims err %v", required, gotErr, wantErr)
		}
		if gotErr != nil {
			if errors.Is(gotErr, ErrInvalidCandidate) && errors.Is(wantErr, ErrInvalidCandidate) && gotErr.Error() == wantErr.Error() {
				break // the same blocks listed twice, refused alike
			}
			var g, w *InsufficientBlocksError
			if !errors.As(gotErr, &g) || !errors.As(wantErr, &w) || *g != *w {
				t.Fatalf("Evict(%d): err %v, SelectVictims err %v", required, gotErr, wantErr)
			}
			break
		}
		if !victimsEqual(got.Victims, want.Victims) || got.FreedBlocks != want.FreedBlocks {
			t.Fatalf("Evict(%d) = %v (%d blocks), SelectVictims = %v (%d blocks)",
				required, got.Victims, got.FreedBlocks, want.Victims, want.FreedBlocks)
		}
	}
	if x.Len() != len(m.cands) {
		t.Fatalf("Len() = %d, model holds %d", x.Len(), len(m.cands))
	}
}

func victimsEqual(a, b []Victim) bool {
	return slices.EqualFunc(a, b, func(v, w Victim) bool {
		return v.ID == w.ID && slices.Equal(v.Blocks, w.Blocks)
	})
}

// TestIndexMatchesSelectVictims runs random operation sequences against the
// index and a slice model, for every key strategy: every Evict must return
// exactly the victims SelectVictims picks over the model's candidates, and
// the metrics must agree. Twenty seeds, five under the race detector: the
// test runs on one goroutine, and CI runs all twenty without the detector.
func TestIndexMatchesSelectVictims(t *testing.T) { testMatchesSelectVictims(t, false) }

// testMatchesSelectVictims is TestIndexMatchesSelectVictims, with random
// hints on the candidates when hints is set.
func testMatchesSelectVictims(t *testing.T, hints bool) {
	seeds := uint64(20)
	if raceEnabled {
		seeds = 5
	}
	for _, cfg := range indexConfigs() {
		t.Run(cfg.name, func(t *testing.T) {
			hinted := uint64(0)
			for seed := range seeds {
				r := newOpRunner(t, cfg.name, cfg.s, cfg.opts)
				if hints {
					r = newHintsRunner(t, cfg.name, cfg.s, cfg.opts)
				}
				rng := rand.New(rand.NewPCG(seed, 7))
				for range 400 {
					r.step(rng.IntN)
					checkIndex(t, r.x)
				}
				got, want := r.x.Metrics(), r.m.p.Metrics()
				if got.Selections != want.Selections || got.TotalEvictions != want.TotalEvictions ||
					got.PartialEvictions != want.PartialEvictions || got.EvictedBlocks != want.EvictedBlocks ||
					got.FairnessScore != want.FairnessScore || got.ReleasesEvicted != want.ReleasesEvicted ||
					got.LeasesBroken != want.LeasesBroken {
					t.Fatalf("seed %d: metrics %+v, policy's %+v", seed, got, want)
				}
				if got.Selections == 0 {
					t.Fatalf("seed %d: no eviction happened; the test exercises nothing", seed)
				}
				hinted += got.ReleasesEvicted + got.LeasesBroken
			}
			if hints && hinted == 0 {
				t.Fatal("no victim was released or leased: the test exercises no hint")
			}
		})
	}
}

// FuzzIndex drives the differential test with operations decoded from the
// fuzzer's bytes.
func FuzzIndex(f *testing.F) {
	f.Add(uint8(0), []byte{0, 1, 2, 3, 9, 9, 9, 4, 5, 6, 7, 8, 9})
	f.Add(uint8(8), []byte("an index of sequences evicted by keys"))
	fuzzIndex(f, newOpRunner)
}

// fuzzIndex runs the fuzzer's operations on a runner of newRunner, of the
// configuration the first byte picks, checking the index after each.
func fuzzIndex(f *testing.F, newRunner func(testing.TB, string, Strategy, []Option) *opRunner) {
	configs := indexConfigs()
	f.Fuzz(func(t *testing.T, which uint8, ops []byte) {
		cfg := configs[int(which)%len(configs)]
		r := newRunner(t, cfg.name, cfg.s, cfg.opts)
		r.run(ops, func() { checkIndex(t, r.x) })
	})
}

// run applies the operations ops decode to, one byte a choice, calling
// check after each.
func (r *opRunner) run(ops []byte, check func()) {
	pos := 0
	next := func(n int) int {
		if n <= 0 || pos >= len(ops) {
			return 0
		}
		b := ops[pos]
		pos++
		return int(b) % n
	}
	for pos < len(ops) {
		r.step(next)
		check()
	}
}

// TestNewIndexErrors: NewIndex refuses what IndexRanks refuses, with the
// same error, and what only a Policy serves matches errors.ErrUnsupported,
// which New then serves.
func TestNewIndexErrors(t *testing.T) {
	tests := []struct {
		name        string
		s           Strategy
		opts        []Option
		want        error
		unsupported bool
	}{
		{"unknown", "belady", nil, ErrUnknownStrategy, false},
		{"bad option", LRU, []Option{WithEvictionHistory(-1)}, ErrInvalidArgument, false},
		{"cost decay", FrequencyCost, []Option{WithCostDecay(0.1)}, errors.ErrUnsupported, true},
		{"sampling", LRU, []Option{WithSampling(5)}, ErrInvalidArgument, true},
		{"capacity", LRU, []Option{WithCapacity(5)}, ErrInvalidArgument, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, err := NewIndex(tt.s, tt.opts...)
			if !errors.Is(err, tt.want) || x != nil {
				t.Fatalf("NewIndex(%q) = %v, %v; want error matching %v", tt.s, x, err, tt.want)
			}
			if ranks := IndexRanks(tt.s, tt.opts...); ranks == nil || ranks.Error() != err.Error() {
				t.Fatalf("IndexRanks(%q) = %v; NewIndex's error is %v", tt.s, ranks, err)
			}
			if errors.Is(err, errors.ErrUnsupported) != tt.unsupported {
				t.Fatalf("NewIndex(%q): %v; matches errors.ErrUnsupported: %v, want %v", tt.s, err, !tt.unsupported, tt.unsupported)
			}
			if _, err := New(tt.s, tt.opts...); tt.unsupported && err != nil {
				t.Fatalf("New(%q) of what only a Policy serves: %v", tt.s, err)
			}
		})
	}
	for _, s := range Strategies() {
		if err := IndexRanks(s); err != nil {
			t.Errorf("IndexRanks(%q): %v", s, err)
		}
	}
	if err := IndexRanks(FrequencyCost, WithCostAlpha(1)); err != nil {
		t.Fatalf("IndexRanks(FrequencyCost) without decay: %v", err)
	}
	if _, err := NewIndex(FrequencyCost, WithCostAlpha(1)); err != nil {
		t.Fatalf("FrequencyCost without decay: %v", err)
	}
}

func TestIndexErrors(t *testing.T) {
	x, err := NewIndex(LRU)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Add(Candidate{ID: 1, Blocks: []int{1}}); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name string
		err  error
		want error
	}{
		{"duplicate", x.Add(Candidate{ID: 1}), ErrInvalidCandidate},
		{"negative refcount", x.Add(Candidate{ID: 2, RefCount: -1}), ErrInvalidCandidate},
		{"negative update", x.Update(Candidate{ID: 1, SeqLen: -3}), ErrInvalidCandidate},
		{"touch absent", x.Touch(9, 1), ErrUnknownSequence},
		{"update absent", x.Update(Candidate{ID: 9}), ErrUnknownSequence},
		{"pin absent", x.Pin(9, true), ErrUnknownSequence},
		{"acquire absent", x.Lock(9), ErrUnknownSequence},
		{"release absent", x.Unlock(9), ErrUnknownSequence},
		{"release unreferenced", x.Unlock(1), ErrInvalidArgument},
		{"negative required", second(x.Evict(-1)), ErrInvalidArgument},
		{"insufficient", second(x.Evict(2)), ErrInsufficientBlocks},
	}
	for _, c := range checks {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: err %v, want one matching %v", c.name, c.err, c.want)
		}
	}
	if x.Len() != 1 || x.EvictableBlocks() != 1 {
		t.Fatalf("failed operations changed the index: Len %d, EvictableBlocks %d", x.Len(), x.EvictableBlocks())
	}
	if res, err := x.Evict(0); err != nil || len(res.Victims) != 0 || x.Metrics().Selections != 0 {
		t.Fatalf("Evict(0) = %+v, %v; selections %d", res, err, x.Metrics().Selections)
	}
	checkIndex(t, x)
}

func second[T any](_ T, err error) error { return err }

// TestIndexRePrefill checks which operations count a re-prefill: re-adding
// an evicted ID and touching a trimmed sequence, but not touching one that
// lost nothing.
func TestIndexRePrefill(t *testing.T) {
	x, err := NewIndex(LRU)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		do   func() error
		want uint64
	}{
		{func() error { return x.Add(Candidate{ID: 1, Blocks: []int{1, 2}, LastAccess: 1}) }, 0},
		{func() error { return x.Add(Candidate{ID: 2, Blocks: []int{3, 4}, LastAccess: 2, AllowPartial: true}) }, 0},
		{func() error { return x.Touch(1, 3) }, 0},
		{func() error { return second(x.Evict(3)) }, 0}, // 2 (tick 2) and 1 (tick 3), both whole
		{func() error { return x.Touch(1, 4) }, 0},      // fails: 1 is gone
		{func() error { return x.Add(Candidate{ID: 1, Blocks: []int{1, 2}, LastAccess: 5}) }, 1},
		{func() error { return x.Touch(1, 6) }, 1},
		{func() error { return x.Add(Candidate{ID: 2, Blocks: []int{3, 4}, LastAccess: 7}) }, 2},
	}
	for i, s := range steps {
		if err := s.do(); (err != nil) != (i == 4) {
			t.Fatalf("step %d: err %v", i, err)
		}
		if got := x.Metrics().RePrefills; got != s.want {
			t.Fatalf("step %d: RePrefills = %d, want %d", i, got, s.want)
		}
		checkIndex(t, x)
	}

	// A partial eviction: the trimmed sequence's next Touch is a re-prefill.
	y, _ := NewIndex(LRU)
	_ = y.Add(Candidate{ID: 7, Blocks: []int{1, 2, 3}, AllowPartial: true})
	res, err := y.Evict(1)
	if err != nil || len(res.Victims) != 1 || !slices.Equal(res.Victims[0].Blocks, []int{3}) {
		t.Fatalf("partial Evict(1) = %+v, %v; want ID 7 losing block 3", res, err)
	}
	if c, ok := y.Get(7); !ok || !slices.Equal(c.Blocks, []int{1, 2}) {
		t.Fatalf("after a partial eviction Get(7) = %+v, %v; want blocks [1 2]", c, ok)
	}
	for i, want := range []uint64{1, 1} {
		if err := y.Touch(7, int64(i)); err != nil {
			t.Fatal(err)
		}
		if got := y.Metrics().RePrefills; got != want {
			t.Fatalf("touch %d after a partial eviction: RePrefills = %d, want %d", i, got, want)
		}
	}

	// A refused eviction is no eviction: its trimmed victim's Touch counts
	// nothing. Evict(4) takes 7 whole (blocks 1 2 3) and would trim 8 to
	// block 3 again; with 8's blocks fixed it trims 8 to block 6, whose
	// Touch, and 7's return, are the two re-prefills.
	z, _ := NewIndex(LRU)
	_ = z.Add(Candidate{ID: 7, Blocks: []int{1, 2, 3}, LastAccess: 1})
	_ = z.Add(Candidate{ID: 8, Blocks: []int{4, 5, 3}, LastAccess: 2, AllowPartial: true})
	if _, err := z.Evict(4); !errors.Is(err, ErrInvalidCandidate) {
		t.Fatalf("Evict(4) with block 3 twice: err %v, want ErrInvalidCandidate", err)
	}
	for _, id := range []uint64{8, 7} {
		if err := z.Touch(id, 3); err != nil {
			t.Fatal(err)
		}
	}
	if got := z.Metrics().RePrefills; got != 0 {
		t.Fatalf("after a refused eviction: RePrefills = %d, want 0", got)
	}
	_ = z.Update(Candidate{ID: 8, Blocks: []int{4, 5, 6}, LastAccess: 4, AllowPartial: true})
	if res, err := z.Evict(4); err != nil || len(res.Victims) != 2 || !slices.Equal(res.Victims[1].Blocks, []int{6}) {
		t.Fatalf("Evict(4) = %+v, %v; want 7 whole and 8 losing block 6", res, err)
	}
	_ = z.Touch(8, 5)
	_ = z.Add(Candidate{ID: 7, Blocks: []int{1, 2, 3}, LastAccess: 6})
	if got := z.Metrics().RePrefills; got != 2 {
		t.Fatalf("after a partial eviction's Touch and a whole victim's return: RePrefills = %d, want 2", got)
	}
	checkIndex(t, z)
}

// TestIndexZeroAllocs checks that Touch, EvictAppend with a reused dst, and
// re-adding an evicted sequence allocate nothing in steady state.
func TestIndexZeroAllocs(t *testing.T) {
	t.Run("metrics", func(t *testing.T) { testIndexZeroAllocs(t, WithEvictionHistory(64)) })
	t.Run("lean", func(t *testing.T) { testIndexZeroAllocs(t, WithEvictionHistory(0), WithTiming(false)) })
}

func testIndexZeroAllocs(t *testing.T, opts ...Option) {
	const n = 40_000
	x, err := NewIndex(LRU, opts...)
	if err != nil {
		t.Fatal(err)
	}
	blocks := make([]int, n)
	for i := range n {
		blocks[i] = i
		if err := x.Add(Candidate{ID: uint64(i), Blocks: blocks[i : i+1 : i+1], LastAccess: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	tick := int64(n)
	rng := rand.New(rand.NewPCG(1, 2))
	touch := testing.AllocsPerRun(1000, func() {
		tick++
		if err := x.Touch(uint64(rng.IntN(n)), tick); err != nil {
			t.Fatal(err)
		}
	})
	dst := make([]Victim, 0, 10)
	evictAndReAdd := func() {
		res, err := x.EvictAppend(dst[:0], 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range res.Victims {
			tick++
			if err := x.Add(Candidate{ID: v.ID, Blocks: v.Blocks, LastAccess: tick}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 2 * latencyWindow { // fill the history and latency windows
		evictAndReAdd()
	}
	cycle := testing.AllocsPerRun(1000, evictAndReAdd)
	evict := testing.AllocsPerRun(1000, func() { // 10k of the 40k sequences
		if _, err := x.EvictAppend(dst[:0], 10); err != nil {
			t.Fatal(err)
		}
	})
	if touch != 0 || evict != 0 || cycle != 0 {
		t.Errorf("allocations per call: Touch %v, EvictAppend(10) %v, EvictAppend(10) and 10 Adds %v; want 0", touch, evict, cycle)
	}
	checkIndex(t, x)
}

// TestIndexSoak replays a KV pool with churn: sequences arrive needing
// blocks, evicting when the pool is full, and are touched, referenced,
// pinned and finished at random, for 10M operations with -soak and 200k
// without. Invariants are checked along the way, and memory must stay
// bounded by the peak number of sequences.
func TestIndexSoak(t *testing.T) {
	ops := 200_000
	if *soak {
		ops = 10_000_000
	}
	poolBlocks := 16_384 // at most this many sequences: each holds a block
	if testing.Short() {
		ops, poolBlocks = 20_000, 2048 // a smaller pool still fills and evicts
	}
	x, err := NewIndex(QoSAware, WithEvictionHistory(1024))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(99, 100))
	var tick int64
	var nextID uint64
	used := 0 // blocks held by sequences in the index
	dst := make([]Victim, 0, 64)
	randomID := func() uint64 { return nextID - uint64(rng.IntN(2*poolBlocks/5)) }
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range ops {
		tick++
		switch r := rng.IntN(100); {
		case r < 20: // a new sequence
			need := 1 + rng.IntN(8)
			if free := poolBlocks - used; free < need {
				res, err := x.EvictAppend(dst[:0], need-free)
				if errors.Is(err, ErrInsufficientBlocks) {
					break // everything is referenced or pinned: the request waits
				}
				if err != nil || res.FreedBlocks < need-free {
					t.Fatalf("op %d: Evict(%d) = %+v, %v", i, need-free, res, err)
				}
				used -= res.FreedBlocks
			}
			nextID++
			blocks := make([]int, need)
			for j := range blocks {
				blocks[j] = int(nextID)<<8 | j // each sequence its own blocks
			}
			c := Candidate{ID: nextID, Blocks: blocks, LastAccess: tick,
				Priority: Priority(rng.IntN(3)), AllowPartial: rng.IntN(4) == 0}
			if err := x.Add(c); err != nil {
				t.Fatal(err)
			}
			used += need
		case r < 70:
			_ = x.Touch(randomID(), tick)
		case r < 80: // a sequence finishes
			id := randomID()
			if c, ok := x.Get(id); ok && x.Remove(id) {
				used -= len(c.Blocks)
			}
		case r < 88:
			_ = x.Lock(randomID())
		case r < 98:
			_ = x.Unlock(randomID())
		default:
			_ = x.Pin(randomID(), rng.IntN(4) == 0)
		}
		if i%100_000 == 0 {
			checkIndex(t, x)
		}
		if used > poolBlocks || int(x.made) > poolBlocks {
			t.Fatalf("op %d: %d blocks used, %d slots for a pool of %d blocks",
				i, used, x.made, poolBlocks)
		}
	}
	checkIndex(t, x)
	runtime.GC()
	runtime.ReadMemStats(&after)
	// 16k sequences (about 150 bytes each with their blocks), the ID map and
	// 1024 remembered evictions: a few MiB.
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 16<<20 {
		t.Fatalf("heap grew by %d bytes over %d operations", grown, ops)
	}
	m := x.Metrics()
	// IDs are never reused, so only touches of trimmed sequences re-prefill.
	if m.TotalEvictions == 0 || m.PartialEvictions == 0 || m.RePrefills > m.PartialEvictions {
		t.Fatalf("soak metrics %+v: want evictions, some partial, re-prefills only after partial ones", m)
	}
	t.Logf("%d ops: %d live, %d blocks used, %d selections, %d victims (%d partial)",
		ops, x.Len(), used, m.Selections, m.TotalEvictions, m.PartialEvictions)
}

// TestIndexGrow: after Grow(n), n Adds leave the index's tables where Grow
// put them (no table reallocated), for a key strategy and adaptive ones;
// Grow of zero or less does nothing.
func TestIndexGrow(t *testing.T) {
	for _, s := range []Strategy{LRU, ARC, Auto} {
		x, err := NewIndex(s, WithEvictionHistory(0))
		if err != nil {
			t.Fatal(err)
		}
		x.Grow(-1)
		x.Grow(0)
		if slabCap(x) != 0 {
			t.Fatalf("%s: Grow(<= 0) allocated %d slots", s, slabCap(x))
		}
		const n = 1000
		x.Grow(n)
		// A table that grows moves to a larger array: its capacity changes.
		tables := func() string { return tableCaps(x) }
		before := tables()
		blocks := make([]int, n) // a block each, numbered from 0 as Grow's doc has them
		for i := range blocks {
			blocks[i] = i
		}
		for id := range uint64(n) {
			x.UpdateAccess(id)
			if err := x.Add(Candidate{ID: id, Blocks: blocks[id : id+1], RefCount: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if after := tables(); after != before {
			t.Errorf("%s: %d Adds after Grow(%d) grew the tables from %v to %v", s, n, n, before, after)
		}
		checkIndex(t, x)
	}
}

// TestIndexListsBounded: an allocator may add, request and remove sequences
// for a long time without evicting; the lists an adaptive index keeps
// until the next eviction (candidates to admit, Auto's candidates to file
// again) stay within a constant factor of the index.
func TestIndexListsBounded(t *testing.T) {
	for _, s := range []Strategy{ARC, Auto} {
		x, err := NewIndex(s, WithCapacity(64))
		if err != nil {
			t.Fatal(err)
		}
		for i := range uint64(20_000) {
			id := i % 50
			x.UpdateAccess(id)
			if _, held := x.Get(id); held {
				if err := x.Touch(id, int64(i)); err != nil {
					t.Fatal(err)
				}
			} else if err := x.Add(Candidate{ID: id, Blocks: []int{int(id)}, LastAccess: int64(i)}); err != nil {
				t.Fatal(err)
			}
			if i%7 == 0 {
				x.Remove((i / 7) % 50)
			}
			limit := 2*int(x.made) + 17
			if waiting, refile := pending(x); waiting > limit || refile > limit {
				t.Fatalf("%s after %d requests: %d waiting, %d to file again, for %d slots", s, i, waiting, refile, x.made)
			}
		}
		checkIndex(t, x)
		if _, err := x.Evict(5); err != nil {
			t.Fatal(err)
		}
		checkIndex(t, x)
	}
}
