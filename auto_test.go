package kvevict_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sagellm/kvevict"
)

// TestAutoOrder steps Auto by hand through its definition: score =
// LastAccess + W x log2(requests), W = weight x the ticks in which the
// pool evicts as many blocks as its evictable candidates hold (at the rate
// since the first selection), weight = that of the miniature cache with the most hits, the
// smallest among equals; a lone partial block first; ties by LastAccess
// then ID.
func TestAutoOrder(t *testing.T) {
	p := mustNew(t, kvevict.Auto, kvevict.WithCapacity(8))
	for _, id := range []uint64{1, 2, 3, 4} {
		p.UpdateAccess(id)
	}
	// First selection: no rate measured yet (W = 0), so the partial block
	// 4 goes before the least recent full one. It becomes a ghost that keeps
	// its one request. The rate's origin is tick 40.
	res, err := p.SelectVictims([]kvevict.Candidate{
		{ID: 1, Blocks: blocks(0, 1), LastAccess: 10},
		{ID: 2, Blocks: blocks(1, 1), LastAccess: 20},
		{ID: 3, Blocks: blocks(2, 1), LastAccess: 30},
		{ID: 4, Blocks: blocks(3, 1), LastAccess: 40, LastBlockPartial: true},
	}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := victimIDs(res); !slices.Equal(got, []uint64{4}) {
		t.Fatalf("first selection: victims %v, want [4]", got)
	}
	// Requests now: 1: 4, 2: 2, 3: 1, 4: 2 (one before its eviction).
	// The miniature caches hold 8 ids, so each held all four and found
	// every repeat: equal hits, weight 0, W = 0, and every score is the
	// recency: 1: 10, 2: 20, 3: 30, 6: 30, 4: 50, 5: 60. 3 and 6 tie; ID 3
	// goes first. The partial 4 came back, but no full block was evicted
	// to compare it with: partial blocks still go first, and there is none.
	for _, id := range []uint64{1, 1, 1, 2, 4} {
		p.UpdateAccess(id)
	}
	res, err = p.SelectVictims([]kvevict.Candidate{
		{ID: 1, Blocks: blocks(0, 1), LastAccess: 10},
		{ID: 2, Blocks: blocks(1, 1), LastAccess: 20},
		{ID: 3, Blocks: blocks(2, 1), LastAccess: 30},
		{ID: 4, Blocks: blocks(3, 1), LastAccess: 50},
		{ID: 5, Blocks: blocks(4, 1), LastAccess: 60},
		{ID: 6, Blocks: blocks(5, 1), LastAccess: 30},
	}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := victimIDs(res), []uint64{1, 2, 3, 6, 4}; !slices.Equal(got, want) {
		t.Fatalf("second selection: victims %v, want %v", got, want)
	}
}

// TestAutoIsLRUWithoutRepeats: when no id is requested twice and no block
// is partial, every score is LastAccess, so Auto's victims are LRU's.
func TestAutoIsLRUWithoutRepeats(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	auto := mustNew(t, kvevict.Auto)
	lru := mustNew(t, kvevict.LRU)
	next := uint64(0)
	var pool []kvevict.Candidate
	for tick := int64(1); tick <= 2000; tick++ {
		next++
		auto.UpdateAccess(next)
		pool = append(pool, kvevict.Candidate{ID: next, Blocks: blocks(3*int(next), 1+rng.IntN(3)), LastAccess: tick, AllowPartial: rng.IntN(2) == 0})
		if len(pool) < 50 {
			continue
		}
		need := 1 + rng.IntN(5)
		a, err := auto.SelectVictims(pool, need)
		if err != nil {
			t.Fatal(err)
		}
		l, err := lru.SelectVictims(pool, need)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(a.Victims) != fmt.Sprint(l.Victims) {
			t.Fatalf("tick %d: auto %v, lru %v", tick, a.Victims, l.Victims)
		}
		// The pool frees the victims; a partly evicted one keeps its head.
		for _, v := range a.Victims {
			i := slices.IndexFunc(pool, func(c kvevict.Candidate) bool { return c.ID == v.ID })
			if keep := len(pool[i].Blocks) - len(v.Blocks); keep > 0 {
				pool[i].Blocks = pool[i].Blocks[:keep]
			} else {
				pool = slices.Delete(pool, i, i+1)
			}
		}
	}
}

// TestAutoCountsSurviveEviction: a sequence requested 9 times, evicted and
// back in the pool outranks one requested twice with the same recency; had
// its requests been forgotten on eviction, its one request since would
// rank it first. Two one-shot ids (3, 4) pass between 1's requests, more
// than the two ids the miniature caches hold: the LRU one loses 1, those
// with a weight of 1/2 or more keep it and find it, so the weight is 1/2
// and the scores are 1: 200 + W log2 9, 2: 200 + W, 9 (never requested):
// 100, with W > 0.
func TestAutoCountsSurviveEviction(t *testing.T) {
	p := mustNew(t, kvevict.Auto, kvevict.WithCapacity(2))
	for range 8 {
		p.UpdateAccess(1)
	}
	p.UpdateAccess(2)
	if _, err := p.SelectVictims([]kvevict.Candidate{
		{ID: 1, Blocks: blocks(0, 1), LastAccess: 1},
		{ID: 9, Blocks: blocks(1, 1), LastAccess: 100},
	}, 1); err != nil {
		t.Fatal(err)
	}
	// 1 was evicted at W = 0 (no rate yet); now it returns.
	for _, id := range []uint64{3, 4, 1, 2} {
		p.UpdateAccess(id)
	}
	res, err := p.SelectVictims([]kvevict.Candidate{
		{ID: 1, Blocks: blocks(0, 1), LastAccess: 200},
		{ID: 2, Blocks: blocks(1, 1), LastAccess: 200},
		{ID: 9, Blocks: blocks(2, 1), LastAccess: 100},
	}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := victimIDs(res); !slices.Equal(got, []uint64{9, 2}) {
		t.Fatalf("victims %v, want [9 2]", got)
	}
}

// TestAutoPartialBlocksThatComeBack: once the victims whose block was
// partial come back more often than the full ones, partial blocks are
// ranked like the others.
func TestAutoPartialBlocksThatComeBack(t *testing.T) {
	p := mustNew(t, kvevict.Auto)
	res, err := p.SelectVictims([]kvevict.Candidate{
		{ID: 1, Blocks: blocks(0, 1), LastAccess: 10, LastBlockPartial: true},
		{ID: 2, Blocks: blocks(1, 1), LastAccess: 5},
	}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := victimIDs(res); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("first selection: victims %v, want the partial 1 first", got)
	}
	p.UpdateAccess(1) // the partial block comes back; the full one does not
	res, err = p.SelectVictims([]kvevict.Candidate{
		{ID: 3, Blocks: blocks(0, 1), LastAccess: 10, LastBlockPartial: true},
		{ID: 4, Blocks: blocks(1, 1), LastAccess: 5},
	}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := victimIDs(res); !slices.Equal(got, []uint64{4}) {
		t.Fatalf("second selection: victims %v, want the least recent, 4", got)
	}
}

// TestAutoCountsContentAcrossSequences: a server's sequences are new at
// every turn while their content recurs. Requests come by block hash only:
// content 1001 nine times, 1002 twice, and two one-shot blocks between any
// two requests for the same block. The miniature caches hold two blocks
// each, so LRU's never finds a block again, while those with a weight keep
// 1001 for its count and find it: a lead over LRU's zero hits, beyond
// noise, so the weight is above zero and W > 0 once an eviction has set
// the clock. Candidates 20 and 21 are new IDs, never requested, heading
// 1001 and 1002 with the same recency: Auto keeps the content requested
// nine times, as a prefix cache's counts would have it. Without HeadHash
// the same calls leave it nothing but recency, and it evicts as LRU does,
// the smaller ID first among equals.
func TestAutoCountsContentAcrossSequences(t *testing.T) {
	for _, byHead := range []bool{true, false} {
		head := func(h uint64) uint64 {
			if byHead {
				return h
			}
			return 0
		}
		p := mustNew(t, kvevict.Auto, kvevict.WithCapacity(2))
		request := func(hashes ...uint64) {
			for _, h := range hashes {
				p.UpdateAccessHashes([]uint64{h})
			}
		}
		for k := range uint64(8) {
			request(1001, 2000+2*k, 2001+2*k)
		}
		request(1002, 3000, 3001)
		if _, err := p.SelectVictims([]kvevict.Candidate{
			{ID: 10, Blocks: blocks(0, 1), LastAccess: 100, HeadHash: head(1009)},
			{ID: 11, Blocks: blocks(1, 1), LastAccess: 50, HeadHash: head(1010)},
		}, 1); err != nil {
			t.Fatal(err)
		}
		request(1001, 3002, 1002)
		res, err := p.SelectVictims([]kvevict.Candidate{
			{ID: 10, Blocks: blocks(0, 1), LastAccess: 100, HeadHash: head(1009)},
			{ID: 20, Blocks: blocks(1, 1), LastAccess: 200, HeadHash: head(1001)},
			{ID: 21, Blocks: blocks(2, 1), LastAccess: 200, HeadHash: head(1002)},
		}, 2)
		if err != nil {
			t.Fatal(err)
		}
		want := []uint64{10, 21}
		if !byHead {
			want = []uint64{10, 20}
		}
		if got := victimIDs(res); !slices.Equal(got, want) {
			t.Fatalf("by head %v: victims %v, want %v", byHead, got, want)
		}
	}
}

// TestHeadHashOnlyForAuto: the other strategies ignore HeadHash and
// UpdateAccessHashes (their victims and metrics are those of the same
// calls without them), and an Index of Auto, which files a candidate by
// the id it counts it by, refuses one whose head another held candidate
// has, where a Policy lets two share a count.
func TestHeadHashOnlyForAuto(t *testing.T) {
	cands := []kvevict.Candidate{
		{ID: 1, Blocks: blocks(0, 2), LastAccess: 30, HeadHash: 7},
		{ID: 2, Blocks: blocks(2, 2), LastAccess: 10, HeadHash: 8},
		{ID: 3, Blocks: blocks(4, 2), LastAccess: 20},
	}
	for _, s := range []kvevict.Strategy{kvevict.LRU, kvevict.LFU, kvevict.ARC, kvevict.S3FIFO, kvevict.SIEVE} {
		with, without := mustNew(t, s), mustNew(t, s)
		with.UpdateAccessHashes([]uint64{7, 8, 7})
		plain := slices.Clone(cands)
		for i := range plain {
			plain[i].HeadHash = 0
		}
		a, errA := with.SelectVictims(cands, 3)
		b, errB := without.SelectVictims(plain, 3)
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		untimed := func(p kvevict.Policy) kvevict.Metrics {
			m := p.Metrics()
			m.AvgEvictionTime, m.P99EvictionTime = 0, 0
			return m
		}
		if fmt.Sprint(a.Victims) != fmt.Sprint(b.Victims) || untimed(with) != untimed(without) {
			t.Fatalf("%s: with HeadHash %v %+v, without %v %+v", s, a.Victims, untimed(with), b.Victims, untimed(without))
		}
	}
	x, err := kvevict.NewIndex(kvevict.Auto)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cands {
		if err := x.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	twin := kvevict.Candidate{ID: 4, Blocks: blocks(6, 1), HeadHash: 7}
	if err := x.Add(twin); !errors.Is(err, kvevict.ErrInvalidCandidate) {
		t.Fatalf("Add of a second head 7 to an index of auto: %v, want ErrInvalidCandidate", err)
	}
	c := cands[2]
	c.HeadHash = 8
	if err := x.Update(c); !errors.Is(err, kvevict.ErrInvalidCandidate) {
		t.Fatalf("Update to head 8, held by ID 2, in an index of auto: %v, want ErrInvalidCandidate", err)
	}
	c.HeadHash = 9 // a head no one holds: the candidate moves to it
	if err := x.Update(c); err != nil {
		t.Fatal(err)
	}
	y, err := kvevict.NewIndex(kvevict.LRU)
	if err != nil {
		t.Fatal(err)
	}
	if err := y.Add(cands[0]); err != nil {
		t.Fatalf("an index of lru refused HeadHash: %v", err)
	}
}
