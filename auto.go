package kvevict

import (
	"fmt"
	"math"

	"github.com/sagellm/kvevict/internal/rank"
)

// auto is the history of [Auto]: every id it remembers, with the requests
// counted for it, in two LRU lists. resident holds the ids that were
// candidates and were not evicted since, ghost the others (evicted, or
// accessed but never seen as a candidate). The lists bound the memory:
// resident keeps at most c ids and ghost at most ghostCap; beyond that the
// least recently used id goes from resident to ghost and from ghost away.
//
// Auto is a key strategy whose key reads this history: the selection
// engine ranks a Policy's candidates by keyOf, as it ranks LRU's by
// LastAccess, and an Index's through the groups of indexauto.go. A
// selection begins (begin: the horizon and the partial-block rule of this
// call, changing nothing) and, once its victims are known to free distinct
// blocks, ends (selected for a Policy, or evicting, evict and finish for
// an Index). UpdateAccess costs O(1).
type auto struct {
	table
	c        int        // most resident ids remembered
	ghostCap int        // most ghost ids remembered
	info     []autoInfo // per slab node

	// turnover counts the UpdateAccess calls for ids not resident: the ids
	// entering the pool, the policy's own clock, their rate measured from
	// the first selection after one.
	turnover rank.Turnover

	// reuses counts the requests for resident ids and for evicted ghosts,
	// decayed: the span over which the victims' returns are counted.
	reuses float64
	// Victims by class, and requests for them after their eviction,
	// decayed with the reuse counts: whether partial blocks come back.
	evictedAs, returned [2]float64

	weights rank.Weights // the miniature caches that choose the weight

	// The selection begun last: its tick, the horizon W and whether lone
	// partial blocks go first.
	now          int64
	w            float64
	partialFirst bool
}

// autoInfo is what Auto remembers of an id besides its list.
type autoInfo struct {
	log2Requests float32 // log2(requests), kept so that a selection need not compute it
	requests     uint32  // UpdateAccess calls for the id, saturating
	// evicted is set on a ghost that a selection evicted and that was not
	// requested since: 1 + its class (autoFull or autoPartial).
	evicted uint8
}

// Auto's classes of victims: whose block is partial, and the others.
const (
	autoFull = iota
	autoPartial
)

// Auto's lists.
const (
	autoResident uint8 = iota // ids among the pool's candidates
	autoGhost                 // ids remembered only for their requests
)

func newAuto(cfg *rank.Config) *auto {
	return &auto{
		table:    newTable(autoResident),
		c:        cfg.Capacity,
		ghostCap: cfg.GhostCap,
		weights:  rank.NewWeights(cfg.Capacity),
	}
}

func (a *auto) nodes() *table { return &a.table }

// access counts a request for id: a remembered id moves to the head of its
// list; a new one enters the ghost list, to become resident when it first
// appears as a candidate. O(1).
func (a *auto) access(id uint64) {
	n := a.lookup(id)
	if n < 0 || a.slab[n].list != autoResident {
		a.turnover.Enter()
	}
	if n < 0 {
		n = a.addNode(id, autoGhost)
		a.trimGhost()
	} else {
		switch {
		case a.slab[n].list == autoResident:
			a.reuses++
			a.decayReuse()
		case a.info[n].evicted != 0:
			a.reuses++
			a.returned[a.info[n].evicted-1]++
			a.info[n].evicted = 0
			a.decayReuse()
		}
		a.moveHead(a.slab[n].list, n)
	}
	if x := &a.info[n]; x.requests < math.MaxUint32 {
		x.requests++
		x.log2Requests = rank.Log2Requests(x.requests)
	}
	a.weights.Access(id, a.info[n].log2Requests)
}

// decayReuse halves the reuse counts once they exceed the ghost table's
// size, so that the victims' returns are those of about the span the
// ghosts remember.
func (a *auto) decayReuse() {
	if a.reuses > float64(max(a.ghostCap, a.c)) {
		a.reuses /= 2
		for k := range a.evictedAs {
			a.evictedAs[k] /= 2
			a.returned[k] /= 2
		}
	}
}

// addNode adds id at the head of list l with no requests counted. The
// count is set before the node is linked: an Index files a linked node by
// it.
func (a *auto) addNode(id uint64, l uint8) int32 {
	n := a.alloc(id)
	if int(n) == len(a.info) {
		a.info = append(a.info, autoInfo{})
	}
	a.info[n] = autoInfo{}
	a.pushHead(l, n)
	return n
}

// admit makes id resident, keeping the requests counted while it was a
// ghost.
func (a *auto) admit(id uint64) {
	if n := a.lookup(id); n >= 0 {
		a.info[n].evicted = 0 // a victim the pool did not free
		a.moveHead(autoResident, n)
		return
	}
	a.addNode(id, autoResident)
}

// begin starts a selection at tick now among n candidates: the horizon W,
// the weight the miniature caches chose, in turnovers, times the ticks in
// which n ids enter the pool at the rate measured since the first
// selection after an id entered (0, ranking by recency alone, until the
// clock and the entries have both moved), and whether lone partial blocks
// go first. It changes nothing that outlives a refused selection.
func (a *auto) begin(now int64, n int) {
	a.now = now
	a.w = a.turnover.Horizon(a.weights.Weight(), n, now)
	a.partialFirst = a.partialFirstNow()
}

// keyOf returns Auto's key for evictable candidate c in the selection
// begun last. O(1).
func (a *auto) keyOf(c *Candidate) rank.Key {
	var log2r float32 // an id never requested, as one admitted now
	if n := a.lookup(c.ID); n >= 0 {
		log2r = a.info[n].log2Requests
	}
	return autoKey(c, log2r, a.w, a.partialFirst)
}

// evicting notes that the selection begun last evicts: the rate at which
// ids enter is measured from the first such selection after one entered.
func (a *auto) evicting() { a.turnover.Evicting(a.now) }

// selected ends a Policy's selection over cands whose victims are known to
// free distinct blocks: ranked, the engine's entries for them, smallest
// first, and res, the Result built from them. Auto admits the candidates
// it does not hold as resident, as every adaptive strategy does, evicts
// the victims taken wholly and restores its bounds.
func (a *auto) selected(cands []Candidate, ranked []entry, res *Result) {
	a.evicting()
	admitCandidates(a, cands, false)
	for i := range ranked {
		c := &cands[ranked[i].Slot]
		if len(res.Victims[i].Blocks) == len(c.Blocks) {
			a.evict(a.lookup(c.ID), lonePartial(c))
		}
	}
	a.finish()
}

// partialFirstNow reports whether lone partial blocks go first: unless
// the victims whose block was partial come back more often than the
// others. A pool whose partial blocks are extended in place, keeping their
// hash as the prompt grows, reuses them, and then they are ranked as any
// other.
func (a *auto) partialFirstNow() bool {
	return a.returned[autoPartial]*a.evictedAs[autoFull] <= a.returned[autoFull]*a.evictedAs[autoPartial]
}

// lonePartial reports whether c is one block and that block is partial.
func lonePartial(c *Candidate) bool {
	return c.LastBlockPartial && len(c.Blocks) == 1
}

// autoKey is Auto's key for candidate c whose id was requested 2^log2r
// times (or never), given the horizon w: Major is the score
// (math.MinInt64 for a lone partial block if those go first), Minor the
// recency.
func autoKey(c *Candidate, log2r float32, w float64, partialFirst bool) rank.Key {
	if partialFirst && lonePartial(c) {
		return rank.Key{Major: math.MinInt64, Minor: c.LastAccess}
	}
	return rank.Key{Major: rank.Score(c.LastAccess, log2r, w), Minor: c.LastAccess}
}

// evict moves victim n to the ghost list: its requests outlive its
// blocks. lonePartial tells its class: whether its one block was partial.
func (a *auto) evict(n int32, lonePartial bool) {
	k := autoFull
	if lonePartial {
		k = autoPartial
	}
	a.info[n].evicted = uint8(1 + k)
	a.evictedAs[k]++
	a.moveHead(autoGhost, n)
	a.trimGhost()
}

// trimGhost forgets the least recently used ghosts beyond ghostCap.
func (a *auto) trimGhost() {
	for a.size(autoGhost) > a.ghostCap {
		a.drop(a.tail(autoGhost))
	}
}

// finish restores the bound on resident ids, demoting the least recently
// used.
func (a *auto) finish() {
	for a.size(autoResident) > a.c {
		a.moveHead(autoGhost, a.tail(autoResident))
	}
	a.trimGhost()
}

func (a *auto) check() error {
	if err := a.checkTable(); err != nil {
		return err
	}
	if r := a.size(autoResident); r > a.c {
		return fmt.Errorf("auto: |resident| = %d > c = %d", r, a.c)
	}
	if g := a.size(autoGhost); g > a.ghostCap {
		return fmt.Errorf("auto: |ghost| = %d > %d", g, a.ghostCap)
	}
	if err := a.weights.Check(); err != nil {
		return err
	}
	if len(a.info) != len(a.slab) {
		return fmt.Errorf("auto: %d infos for %d nodes", len(a.info), len(a.slab))
	}
	for n := a.tail(autoResident); n >= 0; n = a.newer(n) {
		if a.info[n].evicted != 0 {
			return fmt.Errorf("auto: resident %d is marked evicted", a.slab[n].id)
		}
	}
	if !(a.reuses >= 0 && a.reuses <= float64(max(a.ghostCap, a.c))) {
		return fmt.Errorf("auto: reuse count %v", a.reuses)
	}
	return nil
}
