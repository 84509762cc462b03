package tier

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sagellm/kvevict"
)

func newHierarchy(t *testing.T, cfg Config) *Hierarchy {
	t.Helper()
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func lru(m Medium, capacity int) Level {
	return Level{Medium: m, Capacity: capacity, Strategy: kvevict.LRU}
}

// step is one request of a script and where its blocks were found.
type step struct {
	hashes []uint64
	runs   []int
	misses int
}

// residents returns tier i's blocks, sorted.
func residents(h *Hierarchy, i int) []uint64 {
	ids := h.levels[i].Residents()
	slices.Sort(ids)
	return ids
}

func run(t *testing.T, h *Hierarchy, steps []step) {
	t.Helper()
	for k, s := range steps {
		m, err := h.Request(s.hashes, kvevict.PriorityLow)
		if err != nil {
			t.Fatalf("request %d %v: %v", k, s.hashes, err)
		}
		if !slices.Equal(m.Runs, s.runs) || m.Misses != s.misses {
			t.Fatalf("request %d %v: runs %v, misses %d; want %v, %d", k, s.hashes, m.Runs, m.Misses, s.runs, s.misses)
		}
		for i, c := range h.levels {
			if err := c.Check(); err != nil {
				t.Fatalf("request %d, tier %d: %v", k, i, err)
			}
		}
	}
}

func wantStats(t *testing.T, h *Hierarchy, want []Stats) {
	t.Helper()
	got := h.Stats()
	for i := range want {
		g, w := got[i], want[i]
		if g.Hits != w.Hits || g.Stored != w.Stored || g.Evicted != w.Evicted || g.Failed != w.Failed {
			t.Errorf("tier %d (%s): hits %d, stored %d, evicted %d, failed %d; want %d, %d, %d, %d",
				i, g.Medium, g.Hits, g.Stored, g.Evicted, g.Failed, w.Hits, w.Stored, w.Evicted, w.Failed)
		}
	}
}

// TestWriteThrough steps an inclusive write-through hierarchy of LRU tiers
// (GPU 2 blocks, host 4) through a hand-worked script. A request touches
// its blocks last first, so its first block ends the most recent, on every
// tier.
func TestWriteThrough(t *testing.T) {
	h := newHierarchy(t, Config{Levels: []Level{lru(GPU, 2), lru(CPU, 4)}})
	run(t, h, []step{
		{[]uint64{1, 2}, []int{0, 0}, 2}, // GPU {1,2}; host {1,2}
		{[]uint64{3, 4}, []int{0, 0}, 2}, // GPU evicts 2 then 1; host {1,2,3,4}
		{[]uint64{1, 2}, []int{0, 2}, 0}, // loaded from the host; GPU evicts 4, 3; the host touches 1, 2
		// The GPU keeps the first 2 of 3 blocks and evicts 2, 1. The host,
		// least recent first 4, 3, 2, 1, evicts 4, 3, 2 for 5, 6, 7.
		{[]uint64{5, 6, 7}, []int{0, 0}, 3},
		{[]uint64{1, 9}, []int{0, 1}, 1}, // 1 from the host; 9 computed
	})
	// 5, 6, 7 entered the host last first, and the load touched 1: 9
	// replaces 7, the host's least recent.
	if got := residents(h, 1); !slices.Equal(got, []uint64{1, 5, 6, 9}) {
		t.Fatalf("host holds %v, want [1 5 6 9]", got)
	}
	wantStats(t, h, []Stats{
		{Hits: 0, Stored: 10, Evicted: 8},
		{Hits: 3, Stored: 8, Evicted: 4},
	})
}

// TestWriteBackExclusive steps an exclusive write-back hierarchy of LRU
// tiers of 2 blocks each through a hand-worked script: victims go down one
// tier, the last tier's are dropped, and a load moves its blocks up.
func TestWriteBackExclusive(t *testing.T) {
	var events []Event
	h := newHierarchy(t, Config{
		Levels: []Level{lru(GPU, 2), lru(CPU, 2), lru(Storage, 2)},
		Write:  WriteBack, Exclusive: true,
		Events: func(e Event) { events = append(events, e) },
	})
	run(t, h, []step{
		{[]uint64{1, 2}, []int{0, 0, 0}, 2}, // GPU {1,2}
		{[]uint64{3, 4}, []int{0, 0, 0}, 2}, // GPU evicts 2, 1 to the host
		// GPU evicts 4, 3 to the host, which evicts 1, 2 (1 is its least
		// recent: the demotion touched 1 then 2) to storage.
		{[]uint64{5, 6}, []int{0, 0, 0}, 2},
		// Loaded from storage, which lets them go. GPU evicts 6, 5 to the
		// host, which evicts 3, 4 to storage.
		{[]uint64{1, 2}, []int{0, 0, 2}, 0},
	})
	for i, want := range [][]uint64{{1, 2}, {5, 6}, {3, 4}} {
		if got := residents(h, i); !slices.Equal(got, want) {
			t.Fatalf("tier %d holds %v, want %v", i, got, want)
		}
	}
	wantStats(t, h, []Stats{
		{Hits: 0, Stored: 8, Evicted: 6},
		{Hits: 0, Stored: 6, Evicted: 4},
		{Hits: 2, Stored: 4, Evicted: 0},
	})
	want := []Event{
		// A tier's victims leave before the blocks that need their room
		// enter, and are stored below before they leave.
		{Stored, GPU, []uint64{1, 2}},
		{Stored, CPU, []uint64{2, 1}}, {Removed, GPU, []uint64{2, 1}}, {Stored, GPU, []uint64{3, 4}},
		{Stored, Storage, []uint64{1, 2}}, {Removed, CPU, []uint64{1, 2}}, {Stored, CPU, []uint64{4, 3}},
		{Removed, GPU, []uint64{4, 3}}, {Stored, GPU, []uint64{5, 6}},
		{Removed, Storage, []uint64{1, 2}}, // the load takes them up
		{Stored, Storage, []uint64{3, 4}}, {Removed, CPU, []uint64{3, 4}}, {Stored, CPU, []uint64{6, 5}},
		{Removed, GPU, []uint64{6, 5}}, {Stored, GPU, []uint64{1, 2}},
	}
	if !slices.EqualFunc(events, want, func(a, b Event) bool {
		return a.Kind == b.Kind && a.Medium == b.Medium && slices.Equal(a.Hashes, b.Hashes)
	}) {
		t.Fatalf("events\n%v\nwant\n%v", events, want)
	}
}

// TestWriteSelective: a block goes down only from its second request.
func TestWriteSelective(t *testing.T) {
	h := newHierarchy(t, Config{Levels: []Level{lru(GPU, 1), lru(CPU, 4)}, Write: WriteSelective, Threshold: 2})
	run(t, h, []step{
		{[]uint64{1}, []int{0, 0}, 1}, // first request of 1: not stored
		{[]uint64{2}, []int{0, 0}, 1}, // GPU evicts 1, which the host lacks
		{[]uint64{1}, []int{0, 0}, 1}, // second request of 1: stored
		{[]uint64{2}, []int{0, 0}, 1}, // and 2 now
		{[]uint64{1}, []int{0, 1}, 0},
	})
	wantStats(t, h, []Stats{{Hits: 0, Stored: 5, Evicted: 4}, {Hits: 1, Stored: 2}})
}

// TestStoreLargerThanTier: the blocks past a lower tier's capacity are
// counted as failed stores; the head of the request is kept.
func TestStoreLargerThanTier(t *testing.T) {
	h := newHierarchy(t, Config{Levels: []Level{lru(GPU, 8), lru(CPU, 3)}})
	run(t, h, []step{{[]uint64{1, 2, 3, 4, 5}, []int{0, 0}, 5}})
	wantStats(t, h, []Stats{{Stored: 5}, {Stored: 3, Failed: 2}})
	if got := residents(h, 1); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("host holds %v, want the head [1 2 3]", got)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"no tiers", Config{}},
		{"no GPU first", Config{Levels: []Level{lru(CPU, 4)}}},
		{"two GPUs", Config{Levels: []Level{lru(GPU, 4), lru(GPU, 4)}}},
		{"out of order", Config{Levels: []Level{lru(GPU, 4), lru(Storage, 4), lru(CPU, 4)}}},
		{"unknown medium", Config{Levels: []Level{lru(GPU, 4), lru("NVME", 4)}}},
		{"capacity 0", Config{Levels: []Level{lru(GPU, 4), lru(CPU, 0)}}},
		{"unknown strategy", Config{Levels: []Level{{Medium: GPU, Capacity: 4, Strategy: "nope"}}}},
		{"selective without threshold", Config{Levels: []Level{lru(GPU, 4)}, Write: WriteSelective}},
		{"threshold without selective", Config{Levels: []Level{lru(GPU, 4)}, Threshold: 2}},
		{"exclusive write-through", Config{Levels: []Level{lru(GPU, 4), lru(CPU, 4)}, Exclusive: true}},
		{"unknown write", Config{Levels: []Level{lru(GPU, 4)}, Write: 9}},
	} {
		if _, err := New(c.cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: error %v, want one matching ErrConfig", c.name, err)
		}
	}
}

func TestParseWrite(t *testing.T) {
	for _, c := range []struct {
		in        string
		w         Write
		threshold int
	}{{"through", WriteThrough, 0}, {"back", WriteBack, 0}, {"selective=3", WriteSelective, 3}} {
		w, n, err := ParseWrite(c.in)
		if err != nil || w != c.w || n != c.threshold {
			t.Errorf("ParseWrite(%q) = %v, %d, %v; want %v, %d", c.in, w, n, err, c.w, c.threshold)
		}
	}
	for _, bad := range []string{"", "thru", "selective", "selective=0", "selective=x", "back=2"} {
		if _, _, err := ParseWrite(bad); err == nil {
			t.Errorf("ParseWrite(%q): no error", bad)
		}
	}
}

// writeModes are the ways of writing to the tiers below that the tests
// run each scenario under.
var writeModes = []struct {
	name      string
	write     Write
	threshold int
	exclusive bool
}{
	{"through", WriteThrough, 0, false},
	{"selective=2", WriteSelective, 2, false},
	{"back", WriteBack, 0, false},
	{"back-exclusive", WriteBack, 0, true},
}

// TestHierarchyInvariants drives random prompts with shared prefixes
// through every write policy and inclusion, every tier's strategy drawn
// from the key and list strategies, and checks after each request: every
// tier within its capacity and its cache consistent; a tier's residents
// are what its stores left after its evictions and removals; the runs and
// misses partition the request; an exclusive hierarchy holds no block
// twice; and every block of the request ends on the GPU (the GPU's
// capacity exceeds every request).
func TestHierarchyInvariants(t *testing.T) {
	strategies := []kvevict.Strategy{kvevict.LRU, kvevict.LFU, kvevict.FIFO, kvevict.ARC, kvevict.S3FIFO, kvevict.SIEVE, kvevict.Auto}
	for _, mode := range writeModes {
		t.Run(mode.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, uint64(mode.write)))
			var removed [3]int64
			cfg := Config{
				Levels: []Level{
					{GPU, 24, strategies[rng.IntN(len(strategies))], nil},
					{CPU, 48, strategies[rng.IntN(len(strategies))], nil},
					{Storage, 96, strategies[rng.IntN(len(strategies))], nil},
				},
				Write: mode.write, Threshold: mode.threshold, Exclusive: mode.exclusive,
				Events: func(e Event) {
					if e.Kind == Removed {
						removed[e.Medium.rank()] += int64(len(e.Hashes))
					}
				},
			}
			h := newHierarchy(t, cfg)
			requests := 4000
			if raceEnabled {
				requests = 800 // single-threaded: the detector finds nothing more in a longer run
			}
			for r := range requests {
				hashes := make([]uint64, 1+rng.IntN(12))
				base := uint64(rng.IntN(60)) * 16
				for i := range hashes {
					hashes[i] = base + uint64(i)
				}
				m, err := h.Request(hashes, kvevict.PriorityLow)
				if err != nil {
					t.Fatalf("request %d: %v", r, err)
				}
				if m.Hits()+m.Misses != len(hashes) {
					t.Fatalf("request %d: runs %v and %d misses for %d blocks", r, m.Runs, m.Misses, len(hashes))
				}
				for _, id := range hashes {
					if !h.Contains(0, id) {
						t.Fatalf("request %d: block %d not on the GPU after its request", r, id)
					}
				}
				st := h.Stats()
				for i := range h.levels {
					if err := h.levels[i].Check(); err != nil {
						t.Fatalf("request %d, tier %d: %v", r, i, err)
					}
					if n := int64(h.Len(i)); n != st[i].Stored-removed[i] || n > int64(st[i].Capacity) {
						t.Fatalf("request %d, tier %d: %d blocks, stored %d, removed %d, capacity %d",
							r, i, n, st[i].Stored, removed[i], st[i].Capacity)
					}
				}
				if mode.exclusive {
					seen := map[uint64]int{}
					for i := range h.levels {
						for _, id := range h.levels[i].Residents() {
							if j, ok := seen[id]; ok {
								t.Fatalf("request %d: block %d on tiers %d and %d", r, id, j, i)
							}
							seen[id] = i
						}
					}
				}
			}
			st := h.Stats()
			if st[1].Hits == 0 || st[2].Evicted == 0 {
				t.Fatalf("the script exercises little: %+v", st)
			}
		})
	}
}

// TestExclusiveKeepsWhatTheGPUCannot: a request larger than the GPU keeps
// its head there; an exclusive hierarchy drops the copies below of that
// head only, and the tail it could not keep stays on the host.
func TestExclusiveKeepsWhatTheGPUCannot(t *testing.T) {
	h := newHierarchy(t, Config{Levels: []Level{lru(GPU, 2), lru(CPU, 8)}, Write: WriteBack, Exclusive: true})
	run(t, h, []step{
		{[]uint64{1, 2, 3, 4}, []int{0, 0}, 4}, // GPU keeps 1, 2
		{[]uint64{5, 6}, []int{0, 0}, 2},       // 2, 1 go down
		{[]uint64{7, 8}, []int{0, 0}, 2},       // 6, 5 go down
		{[]uint64{5, 6, 1, 2}, []int{0, 4}, 0}, // the GPU keeps 5, 6; 1, 2 stay below
	})
	if got := residents(h, 1); !slices.Equal(got, []uint64{1, 2, 7, 8}) {
		t.Fatalf("host holds %v, want [1 2 7 8]", got)
	}
}

// TestRequestIsItsSteps: Request is Lookup, Load, Admit and Offer; an
// engine that makes the four calls itself gets the same tiers and counts.
func TestRequestIsItsSteps(t *testing.T) {
	for _, write := range []Write{WriteThrough, WriteBack, WriteVLLM} {
		cfg := Config{Levels: []Level{lru(GPU, 8), {Medium: CPU, Capacity: 16, Strategy: kvevict.ARC}}, Write: write}
		whole, steps := newHierarchy(t, cfg), newHierarchy(t, cfg)
		rng := rand.New(rand.NewPCG(7, uint64(write)))
		for r := range 500 {
			hashes := make([]uint64, 1+rng.IntN(6))
			base := uint64(rng.IntN(20)) * 8
			for i := range hashes {
				hashes[i] = base + uint64(i)
			}
			if _, err := whole.Request(hashes, kvevict.PriorityLow); err != nil {
				t.Fatal(err)
			}
			m := steps.Lookup(hashes)
			if err := steps.Load(hashes, m); err != nil {
				t.Fatal(err)
			}
			if err := steps.Admit(hashes, kvevict.PriorityLow); err != nil {
				t.Fatal(err)
			}
			if err := steps.Offer(hashes); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(whole.Stats(), steps.Stats()) || !slices.Equal(whole.Victims(0), steps.Victims(0)) {
				t.Fatalf("%s, request %d: Request %+v, the four calls %+v", write, r, whole.Stats(), steps.Stats())
			}
		}
		if whole.Stats()[0].Hits == 0 || whole.Stats()[1].Hits == 0 {
			t.Fatalf("%s: the script exercises little: %+v", write, whole.Stats())
		}
	}
}

// TestExternalGPUIsTheHierarchys: a hierarchy whose GPU is the caller's
// (ExternalGPU), driven with a Cache of the same strategy and capacity as
// that GPU (its run found by the caller, its victims demoted), serves every
// request as a hierarchy that keeps the GPU itself: the same runs, the same
// victims, the same counts below the GPU, under every write policy but
// vLLM's, inclusive and exclusive. Only the GPU's stored blocks, which the
// caller's pool counts, are not the hierarchy's.
func TestExternalGPUIsTheHierarchys(t *testing.T) {
	for _, mode := range []struct {
		write     Write
		threshold int
		exclusive bool
	}{{WriteThrough, 0, false}, {WriteSelective, 2, false}, {WriteBack, 0, false}, {WriteBack, 0, true}} {
		levels := []Level{lru(GPU, 8), {Medium: CPU, Capacity: 16, Strategy: kvevict.ARC}, lru(Storage, 40)}
		own := newHierarchy(t, Config{Levels: levels, Write: mode.write, Threshold: mode.threshold, Exclusive: mode.exclusive})
		ext := newHierarchy(t, Config{Levels: levels, Write: mode.write, Threshold: mode.threshold, Exclusive: mode.exclusive, ExternalGPU: true})
		gpu, err := NewCache(kvevict.LRU, 8, kvevict.WithEvictionHistory(0))
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(11, uint64(mode.write)))
		var victims []uint64
		for r := range 800 {
			hashes := make([]uint64, 1+rng.IntN(6))
			base := uint64(rng.IntN(30)) * 8
			for i := range hashes {
				hashes[i] = base + uint64(i)
			}
			want, err := own.Request(hashes, kvevict.PriorityLow)
			if err != nil {
				t.Fatal(err)
			}
			run := 0
			for run < len(hashes) && gpu.Contains(hashes[run]) {
				run++
			}
			m := ext.LookupBelow(hashes, run)
			if !slices.Equal(m.Runs, want.Runs) || m.Misses != want.Misses {
				t.Fatalf("%v, request %d: runs %v, misses %d; want %v, %d", mode, r, m.Runs, m.Misses, want.Runs, want.Misses)
			}
			if err := ext.Load(hashes, m); err != nil {
				t.Fatal(err)
			}
			out, err := gpu.Request(hashes, kvevict.PriorityLow)
			if err != nil {
				t.Fatal(err)
			}
			victims = victims[:0]
			for _, v := range out.Victims {
				victims = append(victims, v.ID)
			}
			if err := ext.Demote(victims); err != nil {
				t.Fatal(err)
			}
			if err := ext.Offer(hashes); err != nil {
				t.Fatal(err)
			}
			got, wantStats := ext.Stats(), own.Stats()
			got[0].Stored = wantStats[0].Stored
			if !slices.Equal(got, wantStats) || !slices.Equal(ext.Victims(0), own.Victims(0)) || !slices.Equal(ext.Victims(1), own.Victims(1)) {
				t.Fatalf("%v, request %d: external %+v, own %+v", mode, r, got, wantStats)
			}
		}
		if st := own.Stats(); st[1].Hits == 0 || st[2].Hits == 0 {
			t.Fatalf("%v: the script exercises little: %+v", mode, st)
		}
	}
	ext := newHierarchy(t, Config{Levels: []Level{lru(GPU, 8), lru(CPU, 16)}, ExternalGPU: true})
	if err := ext.Admit([]uint64{1}, kvevict.PriorityLow); err == nil {
		t.Error("Admit on an external GPU: no error")
	}
	if _, err := ext.Request([]uint64{1}, kvevict.PriorityLow); err == nil {
		t.Error("Request on an external GPU: no error")
	}
	if err := newHierarchy(t, Config{Levels: []Level{lru(GPU, 8), lru(CPU, 16)}}).Demote([]uint64{1}); err == nil {
		t.Error("Demote on the hierarchy's own GPU: no error")
	}
	if _, err := New(Config{Levels: []Level{lru(GPU, 8), lru(CPU, 16)}, Write: WriteVLLM, ExternalGPU: true}); !errors.Is(err, ErrConfig) {
		t.Errorf("vLLM's mode on an external GPU: %v", err)
	}
}

// recordingStore records the ids its strategy is told of while on.
type recordingStore struct {
	store
	on  *bool
	got *[]uint64
}

func (r recordingStore) access(id uint64) {
	if *r.on {
		*r.got = append(*r.got, id)
	}
	r.store.access(id)
}

// recordBelow has the strategy of each tier below h's GPU record what it is
// told while *on is true, in got[i] for tier i.
func recordBelow(h *Hierarchy) (on *bool, got [][]uint64) {
	on = new(bool)
	got = make([][]uint64, len(h.levels))
	for i := 1; i < len(h.levels); i++ {
		h.levels[i].store = recordingStore{store: h.levels[i].store, on: on, got: &got[i]}
	}
	return on, got
}

// scriptRequest returns a request of 1 to 6 blocks from the start of one
// of 12 prefixes of 8, so that requests share and repeat blocks.
func scriptRequest(rng *rand.Rand) []uint64 {
	hashes := make([]uint64, 1+rng.IntN(6))
	base := uint64(rng.IntN(12)) * 8
	for i := range hashes {
		hashes[i] = base + uint64(i)
	}
	return hashes
}

// TestTiersBelowLearnEveryRequest: under write-back, inclusive or
// exclusive, Load tells each tier below the GPU of every block of the
// request, once and in order, whichever tier holds it; under write-through
// it tells them nothing (Offer stores every block), and under selective
// write-through only of the run it loads from each.
func TestTiersBelowLearnEveryRequest(t *testing.T) {
	for _, tc := range []struct {
		name      string
		write     Write
		exclusive bool
		threshold int
		told      bool
	}{
		{"back", WriteBack, false, 0, true},
		{"back exclusive", WriteBack, true, 0, true},
		{"through", WriteThrough, false, 0, false},
		{"selective", WriteSelective, false, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHierarchy(t, Config{
				Levels: []Level{lru(GPU, 4), {Medium: CPU, Capacity: 8, Strategy: kvevict.ARC}, lru(Storage, 16)},
				Write:  tc.write, Threshold: tc.threshold, Exclusive: tc.exclusive,
			})
			on, got := recordBelow(h)
			rng := rand.New(rand.NewPCG(3, 5))
			below := 0
			for r := range 300 {
				hashes := scriptRequest(rng)
				m := h.Lookup(hashes)
				for i := range got {
					got[i] = got[i][:0]
				}
				*on = true
				if err := h.Load(hashes, m); err != nil {
					t.Fatal(err)
				}
				*on = false
				at := m.Runs[0]
				for i := 1; i < len(h.levels); i++ {
					run := hashes[at : at+m.Runs[i]]
					at += m.Runs[i]
					below += len(run)
					var want []uint64
					switch {
					case tc.told:
						want = hashes
					case tc.write == WriteSelective && len(run) > 0:
						want = run // the load is a request of the run
					}
					if !slices.Equal(got[i], want) {
						t.Fatalf("request %d %v (runs %v): tier %d told of %v, want %v", r, hashes, m.Runs, i, got[i], want)
					}
				}
				if err := h.Admit(hashes, kvevict.PriorityLow); err != nil {
					t.Fatal(err)
				}
				if err := h.Offer(hashes); err != nil {
					t.Fatal(err)
				}
			}
			if below == 0 {
				t.Fatal("no request found a block below the GPU: the script exercises little")
			}
		})
	}
}

// TestDemotionIsNoRequestToAuto: under write-back a tier below the GPU
// takes the victims of the tier above. Load told it of the request
// already, so a tier of Auto, which counts requests, is told nothing more
// of the blocks it takes (counted again, every block would gain a request
// each time it went down); a tier of ARC, whose history takes a block in
// on an access, is told of exactly the blocks it takes, in order.
func TestDemotionIsNoRequestToAuto(t *testing.T) {
	for _, exclusive := range []bool{false, true} {
		t.Run(fmt.Sprintf("exclusive=%v", exclusive), func(t *testing.T) {
			h := newHierarchy(t, Config{
				Levels: []Level{
					lru(GPU, 4),
					{Medium: CPU, Capacity: 8, Strategy: kvevict.Auto},
					{Medium: Storage, Capacity: 16, Strategy: kvevict.ARC},
				},
				Write: WriteBack, Exclusive: exclusive,
			})
			on, got := recordBelow(h)
			rng := rand.New(rand.NewPCG(5, 8))
			demoted := make([]int, len(h.levels))
			for r := range 300 {
				hashes := scriptRequest(rng)
				if err := h.Load(hashes, h.Lookup(hashes)); err != nil {
					t.Fatal(err)
				}
				for i := range got {
					got[i] = got[i][:0]
				}
				*on = true
				if err := h.Admit(hashes, kvevict.PriorityLow); err != nil {
					t.Fatal(err)
				}
				*on = false
				if len(got[1]) != 0 {
					t.Fatalf("request %d %v: the tier of Auto told of %v, demoted %v", r, hashes, got[1], h.Victims(0))
				}
				if !slices.Equal(got[2], h.Victims(1)) {
					t.Fatalf("request %d %v: the tier of ARC told of %v, demoted %v", r, hashes, got[2], h.Victims(1))
				}
				demoted[1] += len(h.Victims(0))
				demoted[2] += len(h.Victims(1))
			}
			if demoted[1] == 0 || demoted[2] == 0 {
				t.Fatalf("blocks demoted into each tier below: %v; the script exercises little", demoted[1:])
			}
		})
	}
}

// TestInclusiveDemotionOfAHeldBlock follows a block that an inclusive
// host still holds when the GPU lets it go again, worked by hand (GPU of 2
// blocks, host of 4, both LRU, write-back):
//
//	[1], [2]  the GPU holds 1 and 2
//	[3]       the GPU evicts 1: the host stores it
//	[1]       a load from the host, which keeps its copy: the host's one
//	          hit, and 1's second use; the GPU evicts 2: the host stores it
//	[4]       the GPU evicts 3: the host stores it
//	[5]       the GPU evicts 1, which the host holds: a touch there (1 is
//	          now the host's newest), but no hit and no use, since no
//	          request asked the host for it
//	[6]       the GPU evicts 4: the host stores it, and is full
//	[7]       the GPU evicts 5: the host evicts its least recent, 2
//
// Before, the demotion of [5] was a hit on the host, and each demotion
// that stored a block a miss: 2 hits, 5 misses, and 1 had 3 uses, a count
// LFU-like strategies rank by.
func TestInclusiveDemotionOfAHeldBlock(t *testing.T) {
	h := newHierarchy(t, Config{Levels: []Level{lru(GPU, 2), lru(CPU, 4)}, Write: WriteBack})
	for _, id := range []uint64{1, 2, 3, 1, 4, 5, 6, 7} {
		hashes := []uint64{id}
		if err := h.Load(hashes, h.Lookup(hashes)); err != nil {
			t.Fatal(err)
		}
		if err := h.Admit(hashes, kvevict.PriorityLow); err != nil {
			t.Fatal(err)
		}
		if id == 5 {
			if got := h.levels[1].Uses(1); got != 2 {
				t.Errorf("block 1 has %d uses on the host after its second demotion, want 2", got)
			}
		}
	}
	if got := h.Victims(1); !slices.Equal(got, []uint64{2}) {
		t.Errorf("the host's last victims %v, want [2]: the demotion of the block it held touches it", got)
	}
	host := h.levels[1]
	if host.Hits() != 1 || host.Misses() != 0 {
		t.Errorf("the host counts %d hits and %d misses, want 1 and 0: a demotion is no request", host.Hits(), host.Misses())
	}
	if st := h.Stats()[1]; st.Stored != 5 || st.Hits != 1 || st.Evicted != 1 {
		t.Errorf("host stats: %d stored, %d hits, %d evicted; want 5, 1, 1", st.Stored, st.Hits, st.Evicted)
	}
}

// TestRequestHashes: any uint64 is a hash, 0 included, and a hash that
// stands twice in a request is one block, counted at each place in the
// Match, as the Request doc says.
func TestRequestHashes(t *testing.T) {
	h := newHierarchy(t, Config{Levels: []Level{lru(GPU, 8), lru(CPU, 16)}, Write: WriteThrough})
	if m, err := h.Request([]uint64{5, 5, 5}, kvevict.PriorityNormal); err != nil || m.Misses != 3 || h.Len(0) != 1 || h.Len(1) != 1 {
		t.Fatalf("Request([5 5 5]) = %+v, %v, %d and %d blocks held; want 3 misses, one block on each tier", m, err, h.Len(0), h.Len(1))
	}
	if m, err := h.Request([]uint64{5, 5, 5}, kvevict.PriorityNormal); err != nil || m.Runs[0] != 3 || h.Len(0) != 1 {
		t.Fatalf("Request([5 5 5]) again = %+v, %v; want a GPU run of 3 over one block", m, err)
	}
	if _, err := h.Request([]uint64{0, 1}, kvevict.PriorityNormal); err != nil {
		t.Fatalf("Request([0 1]): %v", err)
	}
	if m, err := h.Request([]uint64{0, 1, 2}, kvevict.PriorityNormal); err != nil || m.Runs[0] != 2 || m.Misses != 1 {
		t.Fatalf("Request([0 1 2]) after [0 1] = %+v, %v; want a GPU run of 2 and 1 miss", m, err)
	}
}

// TestStrategySpellings: a tier's strategy is named as a person writes it,
// and every spelling ParseStrategy accepts builds the same tier: Auto on
// the GPU of an exclusive hierarchy, sized for the GPU and told of the
// tier below, and Auto on the host, told of no demotion. The tiers' matches
// and counts over one script are the lowercase name's, and Stats names the
// strategy as ParseStrategy does.
func TestStrategySpellings(t *testing.T) {
	build := func(spelling kvevict.Strategy) *Hierarchy {
		return newHierarchy(t, Config{
			Levels: []Level{
				{Medium: GPU, Capacity: 6, Strategy: spelling},
				{Medium: CPU, Capacity: 12, Strategy: spelling},
				{Medium: Storage, Capacity: 24, Strategy: kvevict.LRU},
			},
			Write: WriteBack, Exclusive: true,
		})
	}
	script := func(h *Hierarchy) (matches []string) {
		rng := rand.New(rand.NewPCG(49, 2))
		for r := range 400 {
			hashes := scriptRequest(rng)
			m, err := h.Request(hashes, kvevict.PriorityLow)
			if err != nil {
				t.Fatalf("request %d %v: %v", r, hashes, err)
			}
			matches = append(matches, fmt.Sprint(m.Runs, m.Misses))
		}
		return matches
	}
	want := script(build(kvevict.Auto))
	for _, spelling := range []kvevict.Strategy{"Auto", "AUTO", " auto "} {
		h := build(spelling)
		got := script(h)
		for r := range want {
			if got[r] != want[r] {
				t.Fatalf("%q: request %d found %s; %q found %s", spelling, r, got[r], kvevict.Auto, want[r])
			}
		}
		for i, st := range h.Stats() {
			if i < 2 && st.Strategy != kvevict.Auto {
				t.Errorf("%q: tier %d's Stats name %q, want %q", spelling, i, st.Strategy, kvevict.Auto)
			}
		}
	}
}
