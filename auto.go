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
// A selection does not follow a list: rank computes every evictable
// candidate's score and keeps the smallest that cover the need through
// the selection engine (selector.offer), in O(n + k log k) for n
// candidates and k victims; victim then hands them out in order. UpdateAccess costs O(1).
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

	// The selection's candidates, between rank and finish: a Policy's
	// slice, or the slots of the Index that follows this history.
	cands []Candidate
	index *Index

	sel    selector // the greedy selection over this call's scores
	ranked []entry  // this selection's victims, in the order victim returns them
	next   int      // index in ranked of the next victim
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

// candidateScorer is implemented by a history that ranks the call's
// candidates by their fields as well as by what it remembers.
// selectAdaptive calls rank once the evictable candidates are marked,
// before it asks for the first victim, and only when a victim is needed.
type candidateScorer interface {
	rank(cands []Candidate, required int)
}

func newAuto(cfg *rank.Config) history {
	return &auto{
		table:    newTable(autoResident),
		c:        cfg.Capacity,
		ghostCap: cfg.GhostCap,
		weights:  rank.NewWeights(cfg.Capacity),
	}
}

func (a *auto) nodes() *table { return &a.table }

// Auto places nothing on an access, so no request waits for a selection.
func (a *auto) pendingID() (uint64, bool) { return 0, false }
func (a *auto) commit()                   {}

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

// rank orders this selection's evictable candidates, which are exactly the
// marked nodes, by score and keeps the smallest whose blocks cover
// required, smallest first: the greedy selection's victims.
func (a *auto) rank(cands []Candidate, required int) {
	a.cands = cands
	now := maxLastAccess(cands)
	w := a.horizon(now, len(cands))
	partialFirst := a.partialFirst()
	a.sel.begin(required, len(cands))
	a.next = 0
	bounded := false
	var bound entry
	for n := a.tail(autoResident); n >= 0; n = a.newer(n) {
		if !a.marked(n) {
			continue
		}
		i := a.slab[n].cand
		c := &cands[i]
		e := newEntry(c, autoKey(c, a.info[n].log2Requests, w, partialFirst), i)
		if bounded && !less(&e, &bound) {
			continue
		}
		bounded = a.sel.offer(e, &bound)
	}
	a.ranked = a.sel.victims()
}

// horizon returns W: the weight the miniature caches chose, in turnovers,
// times the ticks in which n ids enter the pool at the rate measured since
// the first selection after an id entered. It is 0, ranking by recency
// alone, until the clock and the entries have both moved.
func (a *auto) horizon(now int64, n int) float64 {
	a.turnover.Evicting(now)
	return a.turnover.Horizon(a.weights.Weight(), n, now)
}

// partialFirst reports whether lone partial blocks go first: unless the
// victims whose block was partial come back more often than the others.
// A pool whose partial blocks are extended in place, keeping their hash
// as the prompt grows, reuses them, and then they are ranked as any other.
func (a *auto) partialFirst() bool {
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

// victim returns the node of the next ranked victim. The engine asks only
// while the ranked victims have not covered the need.
func (a *auto) victim() int32 {
	if a.next >= len(a.ranked) {
		return -1
	}
	e := &a.ranked[a.next]
	a.next++
	return a.lookup(e.ID)
}

// evict moves victim n to the ghost list: its requests outlive its blocks.
func (a *auto) evict(n int32) {
	k := autoFull
	if lonePartial(a.candidate(n)) {
		k = autoPartial
	}
	a.info[n].evicted = uint8(1 + k)
	a.evictedAs[k]++
	a.moveHead(autoGhost, n)
	a.trimGhost()
}

// candidate returns the candidate that marked node n stands for.
func (a *auto) candidate(n int32) *Candidate {
	if a.index != nil {
		return &a.index.nodes[a.slab[n].cand].c
	}
	return &a.cands[a.slab[n].cand]
}

// trimGhost forgets the least recently used ghosts beyond ghostCap.
func (a *auto) trimGhost() {
	for a.size(autoGhost) > a.ghostCap {
		a.drop(a.tail(autoGhost))
	}
}

// finish restores the bound on resident ids, demoting the least recently
// used, and drops the selection's scratch.
func (a *auto) finish() {
	for a.size(autoResident) > a.c {
		a.moveHead(autoGhost, a.tail(autoResident))
	}
	a.trimGhost()
	a.ranked = nil // a view of sel's buffer, which the next selection reuses
	a.next = 0
	a.cands, a.index = nil, nil
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
