package kvevict_test

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/internal/rank"
)

// blocks returns n distinct block ids starting at first.
func blocks(first, n int) []int {
	b := make([]int, n)
	for i := range b {
		b[i] = first + i
	}
	return b
}

func victimIDs(res kvevict.Result) []uint64 {
	ids := make([]uint64, len(res.Victims))
	for i, v := range res.Victims {
		ids[i] = v.ID
	}
	return ids
}

func mustNew(t testing.TB, s kvevict.Strategy, opts ...kvevict.Option) kvevict.Policy {
	t.Helper()
	p, err := kvevict.New(s, opts...)
	if err != nil {
		t.Fatalf("New(%q): %v", s, err)
	}
	return p
}

// referenceSelect is the selection rule written as plainly as possible: rank
// the evictable candidates by (key, ID) with a full sort, take them in order
// until they cover required, trim the last to what is still needed if it
// allows partial eviction. Keys come from package rank's one dispatch at
// the call's now, the largest LastAccess.
func referenceSelect(t testing.TB, s kvevict.Strategy, opts []kvevict.Option, cands []kvevict.Candidate, required int) ([]kvevict.Victim, error) {
	t.Helper()
	kind, cfg, err := kvevict.ResolveForPolicy(s, opts)
	if err != nil || kind.Adaptive() {
		t.Fatalf("keys of %q: %v", s, err)
	}
	params := rank.NewParams(kind, &cfg)
	keyAt := func(c kvevict.Candidate, now int64) rank.Key {
		f := rank.Fields{
			LastAccess: c.LastAccess, CreatedAt: c.CreatedAt, AccessCount: c.AccessCount,
			Priority: int8(c.Priority), Blocks: len(c.Blocks), EstimatedLifetime: c.EstimatedLifetime,
			SeqLen: c.SeqLen, MaxLen: c.MaxLen,
		}
		return params.Key(&f, now)
	}
	var now int64
	for i, c := range cands {
		if i == 0 || c.LastAccess > now {
			now = c.LastAccess
		}
	}
	var order []kvevict.Candidate
	available := 0
	for _, c := range cands {
		if !c.Pinned && c.RefCount == 0 && len(c.Blocks) > 0 {
			order = append(order, c)
			available += len(c.Blocks)
		}
	}
	if available < required {
		return nil, kvevict.ErrInsufficientBlocks
	}
	slices.SortFunc(order, func(a, b kvevict.Candidate) int {
		if c := keyAt(a, now).Compare(keyAt(b, now)); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	var victims []kvevict.Victim
	freed := 0
	for _, c := range order {
		if freed >= required {
			break
		}
		b := c.Blocks
		if need := required - freed; c.AllowPartial && len(b) > need {
			b = b[len(b)-need:]
		}
		victims = append(victims, kvevict.Victim{ID: c.ID, Blocks: b})
		freed += len(b)
	}
	return victims, nil
}

// checkResult verifies the invariants of every successful selection.
func checkResult(t testing.TB, cands []kvevict.Candidate, required int, res kvevict.Result) {
	t.Helper()
	byID := make(map[uint64]kvevict.Candidate, len(cands))
	for _, c := range cands {
		byID[c.ID] = c
	}
	seen := make(map[uint64]bool)
	freed := 0
	for i, v := range res.Victims {
		c, ok := byID[v.ID]
		if !ok {
			t.Fatalf("victim %d: ID %d is not a candidate", i, v.ID)
		}
		if c.Pinned || c.RefCount > 0 {
			t.Fatalf("victim %d: ID %d is pinned or referenced (pinned=%v refs=%d)", i, v.ID, c.Pinned, c.RefCount)
		}
		if seen[v.ID] {
			t.Fatalf("victim %d: ID %d chosen twice", i, v.ID)
		}
		seen[v.ID] = true
		if len(v.Blocks) == 0 || len(v.Blocks) > len(c.Blocks) {
			t.Fatalf("victim %d: frees %d of %d blocks", i, len(v.Blocks), len(c.Blocks))
		}
		if !slices.Equal(v.Blocks, c.Blocks[len(c.Blocks)-len(v.Blocks):]) {
			t.Fatalf("victim %d: blocks %v are not a tail of %v", i, v.Blocks, c.Blocks)
		}
		if len(v.Blocks) < len(c.Blocks) && (!c.AllowPartial || i != len(res.Victims)-1) {
			t.Fatalf("victim %d: partial eviction of a candidate that does not allow it, or not the last", i)
		}
		freed += len(v.Blocks)
	}
	if freed != res.FreedBlocks {
		t.Fatalf("FreedBlocks = %d, victims hold %d", res.FreedBlocks, freed)
	}
	if freed < required {
		t.Fatalf("freed %d < required %d", freed, required)
	}
	if n := len(res.Victims); n > 0 && freed-len(res.Victims[n-1].Blocks) >= required {
		t.Fatalf("greedy overshoot: without the last victim %d blocks still cover %d", freed-len(res.Victims[n-1].Blocks), required)
	}
}

func TestOrderPerStrategy(t *testing.T) {
	// Each case: candidates, the blocks required, and the victims in order,
	// computed by hand from the strategy's key.
	tests := []struct {
		strategy kvevict.Strategy
		opts     []kvevict.Option
		cands    []kvevict.Candidate
		required int
		want     []uint64
	}{
		{kvevict.LRU, nil, []kvevict.Candidate{
			{ID: 1, Blocks: blocks(0, 1), LastAccess: 30},
			{ID: 2, Blocks: blocks(1, 1), LastAccess: 10},
			{ID: 3, Blocks: blocks(2, 1), LastAccess: 20},
		}, 2, []uint64{2, 3}},
		{kvevict.MRU, nil, []kvevict.Candidate{
			{ID: 1, Blocks: blocks(0, 1), LastAccess: 30},
			{ID: 2, Blocks: blocks(1, 1), LastAccess: 10},
			{ID: 3, Blocks: blocks(2, 1), LastAccess: 20},
		}, 2, []uint64{1, 3}},
		{kvevict.FIFO, nil, []kvevict.Candidate{
			{ID: 1, Blocks: blocks(0, 1), CreatedAt: 5, LastAccess: 1},
			{ID: 2, Blocks: blocks(1, 1), CreatedAt: 3, LastAccess: 9},
			{ID: 3, Blocks: blocks(2, 1), CreatedAt: 4, LastAccess: 2},
		}, 2, []uint64{2, 3}},
		{kvevict.FILO, nil, []kvevict.Candidate{
			{ID: 1, Blocks: blocks(0, 1), CreatedAt: 5},
			{ID: 2, Blocks: blocks(1, 1), CreatedAt: 3},
			{ID: 3, Blocks: blocks(2, 1), CreatedAt: 4},
		}, 2, []uint64{1, 3}},
		// LFU: fewest accesses first; equal counts by LastAccess.
		{kvevict.LFU, nil, []kvevict.Candidate{
			{ID: 1, Blocks: blocks(0, 1), AccessCount: 5, LastAccess: 1},
			{ID: 2, Blocks: blocks(1, 1), AccessCount: 2, LastAccess: 9},
			{ID: 3, Blocks: blocks(2, 1), AccessCount: 2, LastAccess: 4},
			{ID: 4, Blocks: blocks(3, 1), AccessCount: 7, LastAccess: 0},
		}, 3, []uint64{3, 2, 1}},
		// LFU with a 10s half-life (tick = 1s): ID 1's 8 accesses are 40s
		// (4 half-lives) older than ID 2's one, worth 8/16 = 0.5 access by
		// then, so ID 1 goes first. Scores log2(count) + LastAccess/10:
		// 1: 3+0 = 3, 2: 0+4 = 4, 3: 1+4 = 5.
		{kvevict.LFU, []kvevict.Option{kvevict.WithTickDuration(time.Second), kvevict.WithLFUHalfLife(10 * time.Second)}, []kvevict.Candidate{
			{ID: 1, Blocks: blocks(0, 1), AccessCount: 8, LastAccess: 0},
			{ID: 2, Blocks: blocks(1, 1), AccessCount: 1, LastAccess: 40},
			{ID: 3, Blocks: blocks(2, 1), AccessCount: 2, LastAccess: 40},
		}, 2, []uint64{1, 2}},
		// SLRU: probationary (count < 2) first, LRU within a segment.
		{kvevict.SLRU, nil, []kvevict.Candidate{
			{ID: 1, Blocks: blocks(0, 1), AccessCount: 5, LastAccess: 1},
			{ID: 2, Blocks: blocks(1, 1), AccessCount: 1, LastAccess: 9},
			{ID: 3, Blocks: blocks(2, 1), AccessCount: 0, LastAccess: 7},
			{ID: 4, Blocks: blocks(3, 1), AccessCount: 2, LastAccess: 0},
		}, 3, []uint64{3, 2, 4}},
		{kvevict.SLRU, []kvevict.Option{kvevict.WithSLRUThreshold(6)}, []kvevict.Candidate{
			{ID: 1, Blocks: blocks(0, 1), AccessCount: 5, LastAccess: 1},
			{ID: 2, Blocks: blocks(1, 1), AccessCount: 1, LastAccess: 9},
		}, 1, []uint64{1}},
		// QoS: low priority first, then LRU.
		{kvevict.QoSAware, nil, []kvevict.Candidate{
			{ID: 1, Blocks: blocks(0, 1), Priority: kvevict.PriorityHigh, LastAccess: 1},
			{ID: 2, Blocks: blocks(1, 1), Priority: kvevict.PriorityLow, LastAccess: 9},
			{ID: 3, Blocks: blocks(2, 1), Priority: kvevict.PriorityNormal, LastAccess: 0},
			{ID: 4, Blocks: blocks(3, 1), Priority: kvevict.PriorityLow, LastAccess: 5},
		}, 3, []uint64{4, 2, 3}},
		// Predictive, tick = 1s, horizon 30s: expiries are
		// 1: 100+5 = 105 (known lifetime), 2: 90+30 = 120 (unknown),
		// 3: 100 + (1-0.9)*30 = 103 (90% complete), 4: 100+(1-0.5)*30 = 115.
		{kvevict.Predictive, []kvevict.Option{kvevict.WithTickDuration(time.Second)}, []kvevict.Candidate{
			{ID: 1, Blocks: blocks(0, 1), LastAccess: 100, EstimatedLifetime: 5 * time.Second},
			{ID: 2, Blocks: blocks(1, 1), LastAccess: 90},
			{ID: 3, Blocks: blocks(2, 1), LastAccess: 100, SeqLen: 900, MaxLen: 1000},
			{ID: 4, Blocks: blocks(3, 1), LastAccess: 100, SeqLen: 500, MaxLen: 1000},
		}, 4, []uint64{3, 1, 4, 2}},
		// FrequencyCost, alpha 2: retention 1: 1*3^2 = 9, 2: 4*1 = 4,
		// 3: 0 (never reused), 4: 1*2^2 = 4 (ties 2, older LastAccess first).
		{kvevict.FrequencyCost, nil, []kvevict.Candidate{
			{ID: 1, Blocks: blocks(0, 3), AccessCount: 1, LastAccess: 1},
			{ID: 2, Blocks: blocks(3, 1), AccessCount: 4, LastAccess: 5},
			{ID: 3, Blocks: blocks(4, 2), AccessCount: 0, LastAccess: 9},
			{ID: 4, Blocks: blocks(6, 2), AccessCount: 1, LastAccess: 2},
		}, 6, []uint64{3, 4, 2, 1}},
		// FrequencyCost with decay 1/s, tick = 1s, now = 10: retention
		// 1: 10*1/(1+10) = 0.91, 2: 2*1/(1+0) = 2, 3: 1*1/(1+1) = 0.5.
		{kvevict.FrequencyCost, []kvevict.Option{kvevict.WithTickDuration(time.Second), kvevict.WithCostDecay(1)}, []kvevict.Candidate{
			{ID: 1, Blocks: blocks(0, 1), AccessCount: 10, LastAccess: 0},
			{ID: 2, Blocks: blocks(1, 1), AccessCount: 2, LastAccess: 10},
			{ID: 3, Blocks: blocks(2, 1), AccessCount: 1, LastAccess: 9},
		}, 3, []uint64{3, 1, 2}},
		// Ties break by ID ascending whatever the input order.
		{kvevict.LRU, nil, []kvevict.Candidate{
			{ID: 9, Blocks: blocks(0, 1), LastAccess: 1},
			{ID: 3, Blocks: blocks(1, 1), LastAccess: 1},
			{ID: 5, Blocks: blocks(2, 1), LastAccess: 1},
		}, 2, []uint64{3, 5}},
		// Pinned, referenced and empty candidates are skipped.
		{kvevict.LRU, nil, []kvevict.Candidate{
			{ID: 1, Blocks: blocks(0, 1), LastAccess: 1, Pinned: true},
			{ID: 2, Blocks: blocks(1, 1), LastAccess: 2, RefCount: 1},
			{ID: 3, LastAccess: 0},
			{ID: 4, Blocks: blocks(2, 1), LastAccess: 3},
		}, 1, []uint64{4}},
		// Greedy by blocks: the first victim's four blocks cover three.
		{kvevict.LRU, nil, []kvevict.Candidate{
			{ID: 1, Blocks: blocks(0, 4), LastAccess: 1},
			{ID: 2, Blocks: blocks(4, 1), LastAccess: 2},
		}, 3, []uint64{1}},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%d/%s", i, tt.strategy), func(t *testing.T) {
			p := mustNew(t, tt.strategy, tt.opts...)
			res, err := p.SelectVictims(tt.cands, tt.required)
			if err != nil {
				t.Fatalf("SelectVictims: %v", err)
			}
			if got := victimIDs(res); !slices.Equal(got, tt.want) {
				t.Errorf("victims = %v, want %v", got, tt.want)
			}
			if res.Strategy != tt.strategy {
				t.Errorf("Result.Strategy = %q, want %q", res.Strategy, tt.strategy)
			}
			checkResult(t, tt.cands, tt.required, res)
		})
	}
}

func TestInsufficientIsAtomic(t *testing.T) {
	cands := []kvevict.Candidate{
		{ID: 1, Blocks: blocks(0, 3)},
		{ID: 2, Blocks: blocks(3, 5), RefCount: 1},
		{ID: 3, Blocks: blocks(8, 2), Pinned: true},
	}
	for _, s := range kvevict.Strategies() {
		p := mustNew(t, s)
		_, err := p.SelectVictims(cands, 4)
		if !errors.Is(err, kvevict.ErrInsufficientBlocks) {
			t.Fatalf("%s: err = %v, want ErrInsufficientBlocks", s, err)
		}
		var ie *kvevict.InsufficientBlocksError
		if !errors.As(err, &ie) || ie.Required != 4 || ie.Available != 3 {
			t.Fatalf("%s: err = %#v, want Required 4 Available 3", s, err)
		}
		if !strings.Contains(err.Error(), "need 4, 3 available") {
			t.Errorf("%s: message %q does not say the numbers", s, err)
		}
		if m := p.Metrics(); m.Selections != 0 || m.TotalEvictions != 0 || m.EvictedBlocks != 0 {
			t.Errorf("%s: a failed selection was counted: %+v", s, m)
		}
	}
}

func TestZeroRequired(t *testing.T) {
	p := mustNew(t, kvevict.LRU)
	res, err := p.SelectVictims([]kvevict.Candidate{{ID: 1, Blocks: blocks(0, 2)}}, 0)
	if err != nil || len(res.Victims) != 0 || res.FreedBlocks != 0 {
		t.Fatalf("SelectVictims(_, 0) = %+v, %v; want an empty result", res, err)
	}
	if res, err := p.SelectVictims(nil, 0); err != nil || len(res.Victims) != 0 {
		t.Fatalf("SelectVictims(nil, 0) = %+v, %v", res, err)
	}
	if m := p.Metrics(); m.Selections != 0 {
		t.Errorf("an empty selection was counted: %+v", m)
	}
}

func TestInvalidInput(t *testing.T) {
	ok := kvevict.Candidate{ID: 1, Blocks: blocks(0, 2)}
	tests := []struct {
		name     string
		cands    []kvevict.Candidate
		required int
		target   error
		mention  string
	}{
		{"negative required", []kvevict.Candidate{ok}, -1, kvevict.ErrInvalidArgument, "-1"},
		{"duplicate id", []kvevict.Candidate{ok, {ID: 2, Blocks: blocks(2, 1)}, {ID: 1, Blocks: blocks(3, 1)}}, 1, kvevict.ErrInvalidCandidate, "candidates 0 and 2 share ID 1"},
		{"duplicate max id", []kvevict.Candidate{{ID: 1<<64 - 1}, {ID: 1<<64 - 1}}, 0, kvevict.ErrInvalidCandidate, "share ID"},
		// IDs in increasing order skip the duplicate table: an equal
		// neighbour, or any step back, must still be caught.
		{"duplicate neighbours in order", []kvevict.Candidate{{ID: 0}, {ID: 3}, {ID: 3}, {ID: 4}}, 0, kvevict.ErrInvalidCandidate, "candidates 1 and 2 share ID 3"},
		{"duplicate zero ids", []kvevict.Candidate{{ID: 0}, {ID: 0}}, 0, kvevict.ErrInvalidCandidate, "candidates 0 and 1 share ID 0"},
		{"duplicate after a step back", []kvevict.Candidate{{ID: 5}, {ID: 6}, {ID: 2}, {ID: 7}, {ID: 6}}, 1, kvevict.ErrInvalidCandidate, "candidates 1 and 4 share ID 6"},
		{"negative refcount", []kvevict.Candidate{ok, {ID: 2, RefCount: -1}}, 1, kvevict.ErrInvalidCandidate, "candidate 1 (ID 2) has negative RefCount -1"},
		{"negative refcount, nothing required", []kvevict.Candidate{ok, {ID: 2, RefCount: -1}}, 0, kvevict.ErrInvalidCandidate, "candidate 1 (ID 2) has negative RefCount -1"},
		{"negative access count", []kvevict.Candidate{{ID: 2, AccessCount: -3}}, 0, kvevict.ErrInvalidCandidate, "AccessCount"},
		{"negative lifetime", []kvevict.Candidate{{ID: 2, EstimatedLifetime: -time.Second}}, 0, kvevict.ErrInvalidCandidate, "EstimatedLifetime"},
		{"negative seqlen", []kvevict.Candidate{{ID: 2, SeqLen: -1}}, 0, kvevict.ErrInvalidCandidate, "SeqLen"},
		{"negative maxlen", []kvevict.Candidate{{ID: 2, MaxLen: -1}}, 0, kvevict.ErrInvalidCandidate, "MaxLen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, s := range kvevict.Strategies() {
				policies := map[string]kvevict.Policy{string(s): mustNew(t, s)}
				if !s.Adaptive() && tt.required <= 0 {
					// A sampled selection validates only the candidates
					// it draws, but with nothing to take it draws none:
					// it validates the whole call, as the exact one does.
					policies[string(s)+" sampled"] = mustNew(t, s, kvevict.WithSampling(1))
				}
				for name, p := range policies {
					_, err := p.SelectVictims(tt.cands, tt.required)
					if !errors.Is(err, tt.target) {
						t.Fatalf("%s: err = %v, want %v", name, err, tt.target)
					}
					if !strings.Contains(err.Error(), tt.mention) {
						t.Errorf("%s: %q does not mention %q", name, err, tt.mention)
					}
					if m := p.Metrics(); m.Selections != 0 {
						t.Errorf("%s: invalid input was counted: %+v", name, m)
					}
				}
			}
		})
	}
}

// TestUniqueIDsInAnyOrder checks that distinct IDs pass in increasing,
// decreasing and shuffled order, and the same victims come out.
func TestUniqueIDsInAnyOrder(t *testing.T) {
	cands := seedScenario(300, 3, 11)
	for _, s := range kvevict.Strategies() {
		want, err := mustNew(t, s).SelectVictims(cands, 40)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		reversed := slices.Clone(cands)
		slices.Reverse(reversed)
		shuffled := slices.Clone(cands)
		rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		for name, order := range map[string][]kvevict.Candidate{"reversed": reversed, "shuffled": shuffled} {
			got, err := mustNew(t, s).SelectVictims(order, 40)
			if err != nil {
				t.Fatalf("%s, %s: %v", s, name, err)
			}
			if !slices.Equal(victimIDs(got), victimIDs(want)) {
				t.Errorf("%s, %s: victims %v, want %v", s, name, victimIDs(got), victimIDs(want))
			}
		}
	}
}

func TestCallerSliceUntouched(t *testing.T) {
	cands := seedScenario(200, 4, 7)
	for i := range cands {
		cands[i].AllowPartial = i%3 == 0
	}
	before := make([]kvevict.Candidate, len(cands))
	for i, c := range cands {
		before[i] = c
		before[i].Blocks = slices.Clone(c.Blocks)
	}
	for _, s := range kvevict.Strategies() {
		p := mustNew(t, s)
		if _, err := p.SelectVictims(cands, 77); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if !reflect.DeepEqual(cands, before) {
			t.Fatalf("%s: SelectVictims modified its input", s)
		}
	}
}

func TestPartialEviction(t *testing.T) {
	cands := []kvevict.Candidate{
		{ID: 1, Blocks: []int{10, 11}, LastAccess: 1},
		{ID: 2, Blocks: []int{20, 21, 22, 23, 24}, LastAccess: 2, AllowPartial: true},
		{ID: 3, Blocks: []int{30}, LastAccess: 3},
	}
	p := mustNew(t, kvevict.LRU)
	res, err := p.SelectVictims(cands, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []kvevict.Victim{{ID: 1, Blocks: []int{10, 11}}, {ID: 2, Blocks: []int{23, 24}}}
	if !reflect.DeepEqual(res.Victims, want) || res.FreedBlocks != 4 {
		t.Fatalf("got %+v freed %d, want %+v freed 4", res.Victims, res.FreedBlocks, want)
	}
	checkResult(t, cands, 4, res)
	if m := p.Metrics(); m.PartialEvictions != 1 || m.TotalEvictions != 2 || m.EvictedBlocks != 4 {
		t.Errorf("metrics %+v, want 1 partial of 2 evictions, 4 blocks", m)
	}
	// A candidate that does not allow it is taken whole: the greedy rule
	// overshoots rather than splitting it.
	cands[1].AllowPartial = false
	res, err = p.SelectVictims(cands, 4)
	if err != nil || res.FreedBlocks != 7 {
		t.Fatalf("got %+v, %v; want 7 blocks freed", res, err)
	}
}

func TestMetrics(t *testing.T) {
	p := mustNew(t, kvevict.LRU)
	m := p.Metrics()
	if m.Strategy != kvevict.LRU || m.FairnessScore != 1 || m.RePrefillRate != 0 {
		t.Fatalf("fresh metrics %+v", m)
	}
	cands := []kvevict.Candidate{
		{ID: 1, Blocks: blocks(0, 1), LastAccess: 1},
		{ID: 2, Blocks: blocks(1, 2), LastAccess: 2},
		{ID: 3, Blocks: blocks(3, 1), LastAccess: 3},
	}
	// Evict 1, then 1 and 2, then 1 again: counts 1:3, 2:1.
	for _, need := range []int{1, 3, 1} {
		if _, err := p.SelectVictims(cands, need); err != nil {
			t.Fatal(err)
		}
	}
	p.UpdateAccess(1)  // re-prefill of 1
	p.UpdateAccess(1)  // not again: no eviction in between
	p.UpdateAccess(2)  // re-prefill of 2
	p.UpdateAccess(99) // never evicted
	m = p.Metrics()
	if m.Selections != 3 || m.TotalEvictions != 4 || m.EvictedBlocks != 5 || m.RePrefills != 2 {
		t.Fatalf("counters %+v", m)
	}
	if m.RePrefillRate != 0.5 {
		t.Errorf("RePrefillRate = %v, want 2/4", m.RePrefillRate)
	}
	// Jain over {3, 1}: 16 / (2 * 10) = 0.8.
	if m.FairnessScore != 0.8 {
		t.Errorf("FairnessScore = %v, want 0.8", m.FairnessScore)
	}
	if m.AvgEvictionTime <= 0 || m.P99EvictionTime < m.AvgEvictionTime/1000 {
		t.Errorf("latencies avg %v p99 %v", m.AvgEvictionTime, m.P99EvictionTime)
	}
}

func TestHistoryCapBoundsMetrics(t *testing.T) {
	// With room for two remembered evictions, the oldest is forgotten: its
	// re-prefill is no longer detected and it leaves the fairness index.
	p := mustNew(t, kvevict.LRU, kvevict.WithEvictionHistory(2))
	for id := uint64(1); id <= 3; id++ {
		c := []kvevict.Candidate{{ID: id, Blocks: blocks(0, 1)}}
		if _, err := p.SelectVictims(c, 1); err != nil {
			t.Fatal(err)
		}
	}
	p.UpdateAccess(1)
	p.UpdateAccess(3)
	if m := p.Metrics(); m.RePrefills != 1 || m.FairnessScore != 1 {
		t.Fatalf("metrics %+v, want 1 re-prefill (of 3) and fairness 1", m)
	}
	// Evicting 3 again: window {3, 3}, one sequence: Jain = 1.
	c := []kvevict.Candidate{{ID: 3, Blocks: blocks(0, 1)}}
	if _, err := p.SelectVictims(c, 1); err != nil {
		t.Fatal(err)
	}
	if m := p.Metrics(); m.FairnessScore != 1 {
		t.Fatalf("fairness %v, want 1 for one sequence", m.FairnessScore)
	}
}

// TestMetricsOptOut: WithEvictionHistory(0) and WithTiming(false) leave
// re-prefills, fairness and latencies at their zero values, on a Policy and
// on an Index, while the counters still count.
func TestMetricsOptOut(t *testing.T) {
	off := []kvevict.Option{kvevict.WithEvictionHistory(0), kvevict.WithTiming(false)}
	check := func(name string, res kvevict.Result, m kvevict.Metrics) {
		t.Helper()
		if res.Elapsed != 0 || m.AvgEvictionTime != 0 || m.P99EvictionTime != 0 {
			t.Errorf("%s: Elapsed %v, avg %v, p99 %v; want 0 without timing", name, res.Elapsed, m.AvgEvictionTime, m.P99EvictionTime)
		}
		if m.RePrefills != 0 || m.RePrefillRate != 0 || m.FairnessScore != 1 {
			t.Errorf("%s: re-prefills %d (rate %v), fairness %v; want 0, 0, 1 without history", name, m.RePrefills, m.RePrefillRate, m.FairnessScore)
		}
		if m.Selections != 2 || m.TotalEvictions != 2 || m.EvictedBlocks != 3 {
			t.Errorf("%s: %d selections, %d evictions, %d blocks; want 2, 2, 3", name, m.Selections, m.TotalEvictions, m.EvictedBlocks)
		}
	}

	p := mustNew(t, kvevict.LRU, off...)
	var res kvevict.Result
	for _, c := range []kvevict.Candidate{{ID: 1, Blocks: blocks(0, 1)}, {ID: 1, Blocks: blocks(0, 2)}} {
		var err error
		if res, err = p.SelectVictims([]kvevict.Candidate{c}, len(c.Blocks)); err != nil {
			t.Fatal(err)
		}
		p.UpdateAccess(1) // would be a re-prefill with history
	}
	check("Policy", res, p.Metrics())

	x, err := kvevict.NewIndex(kvevict.LRU, off...)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []kvevict.Candidate{{ID: 1, Blocks: blocks(0, 1)}, {ID: 1, Blocks: blocks(0, 2)}} {
		if err := x.Add(c); err != nil { // the second Add would be a re-prefill with history
			t.Fatal(err)
		}
		if res, err = x.Evict(len(c.Blocks)); err != nil {
			t.Fatal(err)
		}
	}
	check("Index", res, x.Metrics())
}

func TestFairnessFallsWhenOneSequenceIsEvictedRepeatedly(t *testing.T) {
	p := mustNew(t, kvevict.LRU)
	victim := []kvevict.Candidate{{ID: 1, Blocks: blocks(0, 1)}}
	for i := 0; i < 9; i++ {
		if _, err := p.SelectVictims(victim, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.SelectVictims([]kvevict.Candidate{{ID: 2, Blocks: blocks(0, 1)}}, 1); err != nil {
		t.Fatal(err)
	}
	// x = {9, 1}: 100 / (2 * 82).
	if got, want := p.Metrics().FairnessScore, 100.0/164; got != want {
		t.Fatalf("FairnessScore = %v, want %v", got, want)
	}
}

func TestParseStrategy(t *testing.T) {
	for _, s := range kvevict.Strategies() {
		for _, name := range []string{string(s), strings.ToUpper(string(s)), " " + string(s) + "\t"} {
			got, err := kvevict.ParseStrategy(name)
			if err != nil || got != s {
				t.Errorf("ParseStrategy(%q) = %q, %v; want %q", name, got, err, s)
			}
		}
	}
	_, err := kvevict.ParseStrategy("lruu")
	if !errors.Is(err, kvevict.ErrUnknownStrategy) || !strings.Contains(err.Error(), "lru, mru") {
		t.Errorf("ParseStrategy(lruu) err = %v, want ErrUnknownStrategy listing the known names", err)
	}
}

// TestStrategiesAreTheConstants: the table of strategies names each
// exported constant, in the order of their declaration.
func TestStrategiesAreTheConstants(t *testing.T) {
	want := []kvevict.Strategy{kvevict.LRU, kvevict.MRU, kvevict.FIFO, kvevict.FILO, kvevict.LFU, kvevict.SLRU,
		kvevict.QoSAware, kvevict.Predictive, kvevict.FrequencyCost, kvevict.ARC, kvevict.S3FIFO, kvevict.SIEVE, kvevict.Auto}
	if got := kvevict.Strategies(); !slices.Equal(got, want) {
		t.Fatalf("Strategies() = %v, want %v", got, want)
	}
}

func TestStrategiesAreDistinct(t *testing.T) {
	ss := kvevict.Strategies()
	if len(ss) < 9 {
		t.Fatalf("Strategies() = %v, want at least the nine key strategies", ss)
	}
	seen := map[kvevict.Strategy]bool{}
	for _, s := range ss {
		if seen[s] {
			t.Fatalf("%q registered twice", s)
		}
		seen[s] = true
	}
	ss[0] = "mutated"
	if kvevict.Strategies()[0] == "mutated" {
		t.Fatal("Strategies returns the registry itself")
	}
}

func TestNewRejectsBadConfiguration(t *testing.T) {
	if _, err := kvevict.New("nope"); !errors.Is(err, kvevict.ErrUnknownStrategy) {
		t.Errorf("New(nope) err = %v", err)
	}
	bad := []kvevict.Option{
		kvevict.WithTickDuration(0),
		kvevict.WithLFUHalfLife(-time.Second),
		kvevict.WithSLRUThreshold(0),
		kvevict.WithCostAlpha(-1),
		kvevict.WithCostDecay(-0.5),
		kvevict.WithLifetimeHorizon(0),
		kvevict.WithEvictionHistory(-1),
		kvevict.WithTierBelow(-1),
	}
	for i, opt := range bad {
		if _, err := kvevict.New(kvevict.LRU, opt); !errors.Is(err, kvevict.ErrInvalidArgument) {
			t.Errorf("option %d: err = %v, want ErrInvalidArgument", i, err)
		}
	}
	if _, err := kvevict.New(kvevict.LRU, nil, kvevict.WithLogger(nil)); err != nil {
		t.Errorf("nil option and nil logger: %v", err)
	}
}

// TestMatchesReference compares every strategy's selection with the plain
// sort-based reference on random inputs, with ties, partial candidates,
// pinned and referenced ones.
// tuning returns options that tune strategy s away from its defaults, and
// none for a strategy without options of its own.
func tuning(s kvevict.Strategy) []kvevict.Option {
	switch s {
	case kvevict.LFU:
		return []kvevict.Option{kvevict.WithLFUHalfLife(50 * time.Millisecond)}
	case kvevict.SLRU:
		return []kvevict.Option{kvevict.WithSLRUThreshold(3)}
	case kvevict.FrequencyCost:
		return []kvevict.Option{kvevict.WithCostDecay(3), kvevict.WithCostAlpha(1.5)}
	case kvevict.Predictive:
		return []kvevict.Option{kvevict.WithLifetimeHorizon(40 * time.Millisecond)}
	}
	return nil
}

// TestStrictOptions: a strategy-specific option is refused, naming itself
// and the strategy, by every strategy and constructor it does not tune, and
// accepted by those it does.
func TestStrictOptions(t *testing.T) {
	options := []struct {
		name   string
		opt    kvevict.Option
		tunes  func(kvevict.Strategy) bool
		policy bool // applies to New only, not NewIndex
	}{
		{"WithCapacity", kvevict.WithCapacity(10), kvevict.Strategy.Adaptive, false},
		{"WithSampling", kvevict.WithSampling(5), func(s kvevict.Strategy) bool { return !s.Adaptive() }, true},
		{"WithLFUHalfLife", kvevict.WithLFUHalfLife(time.Second), isStrategy(kvevict.LFU), false},
		{"WithSLRUThreshold", kvevict.WithSLRUThreshold(3), isStrategy(kvevict.SLRU), false},
		{"WithCostAlpha", kvevict.WithCostAlpha(1), isStrategy(kvevict.FrequencyCost), false},
		{"WithCostDecay", kvevict.WithCostDecay(0), isStrategy(kvevict.FrequencyCost), false},
		{"WithLifetimeHorizon", kvevict.WithLifetimeHorizon(time.Second), isStrategy(kvevict.Predictive), false},
		{"WithTierBelow", kvevict.WithTierBelow(40), isStrategy(kvevict.Auto), false},
	}
	general := []kvevict.Option{
		kvevict.WithTickDuration(time.Millisecond), kvevict.WithEvictionHistory(8), kvevict.WithLogger(nil),
		kvevict.WithTiming(false), kvevict.WithEvictionHistory(0),
	}
	for _, s := range kvevict.Strategies() {
		if _, err := kvevict.New(s, general...); err != nil {
			t.Errorf("New(%q, general options): %v", s, err)
		}
		for _, o := range options {
			_, err := kvevict.New(s, o.opt)
			if o.tunes(s) {
				if err != nil {
					t.Errorf("New(%q, %s): %v", s, o.name, err)
				}
			} else if !errors.Is(err, kvevict.ErrInvalidArgument) || !strings.Contains(err.Error(), o.name) || !strings.Contains(err.Error(), string(s)) {
				t.Errorf("New(%q, %s) error = %v; want ErrInvalidArgument naming both", s, o.name, err)
			}
			if s.Adaptive() {
				continue
			}
			_, err = kvevict.NewIndex(s, o.opt)
			if o.tunes(s) && !o.policy {
				if err != nil {
					t.Errorf("NewIndex(%q, %s): %v", s, o.name, err)
				}
			} else if !errors.Is(err, kvevict.ErrInvalidArgument) || !strings.Contains(err.Error(), o.name) {
				t.Errorf("NewIndex(%q, %s) error = %v; want ErrInvalidArgument naming it", s, o.name, err)
			}
		}
	}
}

func isStrategy(want kvevict.Strategy) func(kvevict.Strategy) bool {
	return func(s kvevict.Strategy) bool { return s == want }
}

func TestMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	optSets := []func(kvevict.Strategy) []kvevict.Option{
		func(kvevict.Strategy) []kvevict.Option { return nil },
		func(s kvevict.Strategy) []kvevict.Option {
			return append([]kvevict.Option{kvevict.WithTickDuration(time.Millisecond)}, tuning(s)...)
		},
	}
	iters := 300
	if kvevict.RaceEnabled {
		iters = 60
	}
	for iter := 0; iter < iters; iter++ {
		n := 1 + rng.IntN(60)
		cands := make([]kvevict.Candidate, n)
		total := 0
		for i := range cands {
			maxLen := rng.IntN(100)
			cands[i] = kvevict.Candidate{
				ID:                uint64(rng.IntN(4 * n)),
				Blocks:            blocks(i*10, rng.IntN(6)),
				LastAccess:        rng.Int64N(20),
				CreatedAt:         rng.Int64N(20),
				AccessCount:       rng.IntN(5),
				Priority:          kvevict.Priority(rng.IntN(3)),
				Pinned:            rng.IntN(8) == 0,
				EstimatedLifetime: time.Duration(rng.IntN(3)) * 10 * time.Millisecond,
				MaxLen:            maxLen,
				SeqLen:            rng.IntN(maxLen + 1),
				AllowPartial:      rng.IntN(3) == 0,
			}
			if rng.IntN(6) == 0 {
				cands[i].RefCount = 1
			}
			total += len(cands[i].Blocks)
		}
		// Make IDs unique while keeping their order random.
		seen := map[uint64]bool{}
		for i := range cands {
			for seen[cands[i].ID] {
				cands[i].ID++
			}
			seen[cands[i].ID] = true
		}
		required := rng.IntN(total + 2)
		for _, optsFor := range optSets {
			for _, s := range kvevict.Strategies() {
				if s.Adaptive() {
					continue // not a key strategy
				}
				opts := optsFor(s)
				p := mustNew(t, s, opts...)
				res, err := p.SelectVictims(cands, required)
				want, wantErr := referenceSelect(t, s, opts, cands, required)
				if (err != nil) != (wantErr != nil) || (err != nil && !errors.Is(err, wantErr)) {
					t.Fatalf("iter %d %s: err = %v, reference %v", iter, s, err, wantErr)
				}
				if err != nil {
					continue
				}
				checkResult(t, cands, required, res)
				if !reflect.DeepEqual(res.Victims, want) && !(len(res.Victims) == 0 && len(want) == 0) {
					t.Fatalf("iter %d %s required %d:\n got %+v\nwant %+v", iter, s, required, res.Victims, want)
				}
			}
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	for _, s := range kvevict.Strategies() {
		p := mustNew(t, s, kvevict.WithEvictionHistory(64))
		cands := seedScenario(100, 2, 3)
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 100; i++ {
					res, err := p.SelectVictims(cands, 1+i%20)
					if err != nil {
						t.Error(err)
						return
					}
					for _, v := range res.Victims {
						p.UpdateAccess(v.ID)
					}
					_ = p.Metrics()
				}
			}()
		}
		wg.Wait()
		if m := p.Metrics(); m.Selections != 400 {
			t.Errorf("%s: %d selections counted, want 400", s, m.Selections)
		}
	}
}

func TestLoggerRecordsEvictions(t *testing.T) {
	var buf strings.Builder
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p := mustNew(t, kvevict.MRU, kvevict.WithLogger(logger))
	cands := []kvevict.Candidate{{ID: 4, Blocks: blocks(0, 2), LastAccess: 1}, {ID: 5, Blocks: blocks(2, 1)}}
	if _, err := p.SelectVictims(cands, 2); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"kvevict: evicted", "strategy=mru", "victims=[4]", "freed_blocks=2"} {
		if !strings.Contains(out, want) {
			t.Errorf("log %q lacks %q", out, want)
		}
	}
	// A failed selection logs nothing.
	buf.Reset()
	if _, err := p.SelectVictims(cands, 9); err == nil || buf.Len() != 0 {
		t.Errorf("failed selection: err %v, log %q", err, buf.String())
	}
}

// TestSelectionInAnyOrder: the same candidates listed oldest-first,
// newest-first and shuffled give the victims of the sort-based reference,
// for needs from one block to all of them. Newest-first under LRU makes
// every candidate enter the selection's buffer, so its heap phase runs out
// of budget and the unordered buffer with its compactions takes over.
func TestSelectionInAnyOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	base := make([]kvevict.Candidate, 3000)
	total := 0
	for i := range base {
		base[i] = kvevict.Candidate{
			ID:           uint64(i) + 1,
			Blocks:       blocks(i*8, 1+rng.IntN(8)),
			LastAccess:   rng.Int64N(1 << 20),
			AccessCount:  rng.IntN(4),
			AllowPartial: rng.IntN(2) == 0,
			Pinned:       rng.IntN(20) == 0,
		}
		if !base[i].Pinned {
			total += len(base[i].Blocks)
		}
	}
	orders := map[string]func([]kvevict.Candidate){
		"oldest-first": func(c []kvevict.Candidate) {
			slices.SortFunc(c, func(a, b kvevict.Candidate) int { return cmp.Compare(a.LastAccess, b.LastAccess) })
		},
		"newest-first": func(c []kvevict.Candidate) {
			slices.SortFunc(c, func(a, b kvevict.Candidate) int { return cmp.Compare(b.LastAccess, a.LastAccess) })
		},
		"shuffled": func(c []kvevict.Candidate) { rng.Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] }) },
	}
	for name, order := range orders {
		cands := slices.Clone(base)
		order(cands)
		for _, s := range []kvevict.Strategy{kvevict.LRU, kvevict.LFU, kvevict.MRU} {
			p := mustNew(t, s)
			for _, required := range []int{1, 7, 100, 1000, total / 2, total} {
				res, err := p.SelectVictims(cands, required)
				if err != nil {
					t.Fatalf("%s %s required %d: %v", name, s, required, err)
				}
				checkResult(t, cands, required, res)
				want, _ := referenceSelect(t, s, nil, cands, required)
				if !reflect.DeepEqual(res.Victims, want) {
					t.Fatalf("%s %s required %d: %d victims, reference %d", name, s, required, len(res.Victims), len(want))
				}
			}
		}
	}
}

// TestStrategyNamesIgnoreCase: New, NewIndex and a prefix tree's strategy
// take a name in any case with spaces around, as ParseStrategy and the
// command do, and report it by its registered name.
func TestStrategyNamesIgnoreCase(t *testing.T) {
	p, err := kvevict.New("LRU")
	if err != nil {
		t.Fatalf("New(%q): %v", "LRU", err)
	}
	res, err := p.SelectVictims([]kvevict.Candidate{{ID: 1, Blocks: []int{1}}}, 1)
	if err != nil || res.Strategy != kvevict.LRU || p.Metrics().Strategy != kvevict.LRU {
		t.Fatalf("New(%q): result strategy %q, metrics %q, %v", "LRU", res.Strategy, p.Metrics().Strategy, err)
	}
	x, err := kvevict.NewIndex(" Arc ")
	if err != nil {
		t.Fatalf("NewIndex(%q): %v", " Arc ", err)
	}
	if m := x.Metrics(); m.Strategy != kvevict.ARC {
		t.Fatalf("NewIndex(%q) reports %q", " Arc ", m.Strategy)
	}
	if !kvevict.Strategy("AUTO").Adaptive() {
		t.Fatal(`Strategy("AUTO").Adaptive() = false`)
	}
	if _, err := kvevict.New("lru2"); !errors.Is(err, kvevict.ErrUnknownStrategy) {
		t.Fatalf("New(%q): %v, want ErrUnknownStrategy", "lru2", err)
	}
}

// TestSelectionAllocatesOnlyItsResult: once a policy's scratch has grown, a
// selection allocates its Result's victims and nothing else, whichever
// source the transaction takes them from: the exact selection, the lists
// of an adaptive strategy, Auto's key, or sampling, whose result grows as
// its victims come (it cannot count them ahead): twice for these ten.
func TestSelectionAllocatesOnlyItsResult(t *testing.T) {
	if kvevict.RaceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	cands := seedScenario(1000, 10, 7)
	for _, tc := range []struct {
		s      kvevict.Strategy
		opts   []kvevict.Option
		allocs float64
	}{
		{kvevict.LRU, nil, 1},
		{kvevict.LFU, nil, 1},
		{kvevict.ARC, nil, 1},
		{kvevict.SIEVE, nil, 1},
		{kvevict.Auto, nil, 1},
		{kvevict.LRU, []kvevict.Option{kvevict.WithSampling(5)}, 2},
	} {
		p := mustNew(t, tc.s, tc.opts...)
		for range 3 { // grow the scratch
			if _, err := p.SelectVictims(cands, 100); err != nil {
				t.Fatal(err)
			}
		}
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := p.SelectVictims(cands, 100); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > tc.allocs {
			t.Errorf("%s %d options: %v allocations per selection, want %v (the result)", tc.s, len(tc.opts), allocs, tc.allocs)
		}
	}
}
