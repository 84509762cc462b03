package kvevict

import (
	"fmt"
	"math"
	"slices"

	"github.com/sagellm/kvevict/internal/ghost"
	"github.com/sagellm/kvevict/internal/lists"
	"github.com/sagellm/kvevict/internal/options"
	"github.com/sagellm/kvevict/internal/rank"
)

// auto is the history of [Auto]: every id it remembers, with the requests
// counted for it. The resident ids, those that were candidates and were not
// evicted since, are the table's one LRU list; the ghosts, the others
// (evicted, or accessed but never seen as a candidate), a ghost.Counts.
// Both are bounded: resident keeps at most c ids and the ghosts at most
// WithGhostCap; beyond that the least recently used id goes from resident to
// the ghosts, and the oldest ghost away.
//
// Auto is a key strategy whose key reads this history: the selection
// engine ranks a Policy's candidates by keyOf, as it ranks LRU's by
// LastAccess, and an Index's through the groups of orderauto.go. A
// selection begins (begin: the horizon and the partial-block rule of this
// call, changing nothing) and, once its victims are known to free distinct
// blocks, ends (selected for a Policy, or evicting, evict and finish for
// an Index). UpdateAccess costs O(1).
type auto struct {
	lists.Table              // the resident ids
	info        []autoInfo   // per slab node
	ghosts      ghost.Counts // the others
	c           int          // most resident ids remembered

	// turnover counts the blocks of the victims, the policy's own clock,
	// their rate measured from the first selection that evicted.
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
	// admitting are a Policy's candidates seen by the selection begun
	// last that hold blocks and are not resident.
	admitting []*Candidate
}

// autoInfo is what Auto remembers of a resident id besides its place in
// the list.
type autoInfo struct {
	log2Requests float32 // log2(requests), kept so that a selection need not compute it
	requests     uint32  // UpdateAccess calls for the id, saturating
}

// Auto's classes of victims: whose block is partial, and the others. A
// ghost's Tag is 1 + the class of a victim not requested since its
// eviction.
const (
	autoFull = iota
	autoPartial
)

// autoResident is Auto's one list in its table: the ids among the pool's
// candidates. Its ghosts are kept apart, in a ghost.Counts.
const autoResident uint8 = 0

func newAuto(cfg *options.Config) *auto {
	return &auto{
		Table:   lists.NewTable(autoResident),
		ghosts:  ghost.New(cfg.GhostCap),
		c:       cfg.Capacity,
		weights: rank.NewWeights(cfg.Capacity, cfg.Below),
	}
}

func (a *auto) Nodes() *lists.Table { return &a.Table }

// Access counts a request for id: a resident id moves to the head of its
// list; another is remembered as a ghost, to become resident when it
// first appears as a candidate. O(1).
func (a *auto) Access(id uint64) {
	if n := a.Lookup(id); n >= 0 {
		a.reuses++
		a.decayReuse()
		a.MoveHead(autoResident, n)
		x := &a.info[n]
		x.requests = rank.AddRequest(x.requests)
		x.log2Requests = rank.Log2Requests(x.requests)
		a.weights.Access(id, x.log2Requests)
		return
	}
	g, _ := a.ghosts.Get(id)
	if g.Tag != 0 { // a victim returns
		a.reuses++
		a.returned[g.Tag-1]++
		a.decayReuse()
	}
	g = ghost.Count{Requests: rank.AddRequest(g.Requests)}
	a.ghosts.Put(id, g)
	a.weights.Access(id, rank.Log2Requests(g.Requests))
}

// accessHashes counts a request for each block of hashes, as access does
// for an id. From the first such call on, a weight above zero must beat
// recency in the miniature caches by more than their noise: they simulate
// a cache of blocks, where the pool evicts sequences, so their verdict for
// frequency is weaker evidence than over blocks.
func (a *auto) accessHashes(hashes []uint64) {
	a.weights.Cautious = true
	for _, h := range hashes {
		a.Access(h)
	}
}

// decayReuse halves the reuse counts once they exceed the ghosts' and the
// resident list's size, so that the victims' returns are those of about
// the span the ghosts remember.
func (a *auto) decayReuse() {
	if a.reuses > float64(max(a.ghosts.Cap(), a.c)) {
		a.reuses /= 2
		for k := range a.evictedAs {
			a.evictedAs[k] /= 2
			a.returned[k] /= 2
		}
	}
}

// Admit makes id resident, with the requests counted while it was a ghost
// (a victim the pool did not free, or an id requested before it held
// blocks). The count is set before the node is linked: an Index files a
// linked node by it.
func (a *auto) Admit(id uint64) {
	g, _ := a.ghosts.Take(id)
	n := a.Alloc(id)
	if int(n) == len(a.info) {
		a.info = append(a.info, autoInfo{})
	}
	a.info[n] = autoInfo{requests: g.Requests, log2Requests: rank.Log2Requests(g.Requests)}
	a.PushHead(autoResident, n)
}

func (a *auto) Forget(id uint64) {
	if n := a.Lookup(id); n >= 0 {
		a.Drop(n)
	}
	a.ghosts.Take(id)
}

// toGhost forgets resident node n, remembering its requests as a ghost's
// with tag.
func (a *auto) toGhost(n int32, tag uint8) {
	id, requests := a.Slab[n].ID, a.info[n].requests
	a.Drop(n)
	a.ghosts.Put(id, ghost.Count{Requests: requests, Tag: tag})
}

// begin starts a selection at tick now among candidates holding n
// evictable blocks: the horizon W, the weight the miniature caches chose,
// in turnovers, times the ticks in which the pool evicts n blocks at the
// rate measured since its first eviction (0, ranking by recency alone,
// until the clock has moved past one), and whether lone partial blocks go
// first. It changes nothing that outlives a refused selection.
func (a *auto) begin(now int64, n int) {
	a.forgetSeen()
	a.now = now
	a.w = a.turnover.Horizon(a.weights.Weight(), n, now)
	a.partialFirst = a.partialFirstNow()
}

// keyOf returns Auto's key for evictable candidate c in the selection
// begun last. O(1).
func (a *auto) keyOf(c *Candidate) rank.Key {
	log2r, _ := a.log2Requests(historyID(c))
	return autoKey(c, log2r, a.w, a.partialFirst)
}

// keyOfSeen is keyOf for a Policy's selection: it also notes c if it is
// not resident, to be admitted once the selection succeeds, so that the
// one lookup serves both.
func (a *auto) keyOfSeen(c *Candidate) rank.Key {
	log2r, resident := a.log2Requests(historyID(c))
	if !resident {
		a.admitting = append(a.admitting, c)
	}
	return autoKey(c, log2r, a.w, a.partialFirst)
}

// see notes a candidate of a Policy's selection that is not evictable: if
// it holds blocks and is not resident, it is admitted once the selection
// succeeds, as the evictable ones are.
func (a *auto) see(c *Candidate) {
	if len(c.Blocks) > 0 && a.Lookup(historyID(c)) < 0 {
		a.admitting = append(a.admitting, c)
	}
}

// log2Requests returns log2 of the requests counted for id (0 for an id
// never requested) and whether it is resident. O(1).
func (a *auto) log2Requests(id uint64) (log2r float32, resident bool) {
	if n := a.Lookup(id); n >= 0 {
		return a.info[n].log2Requests, true
	}
	if g, ok := a.ghosts.Get(id); ok {
		return rank.Log2Requests(g.Requests), false // as admit will count it
	}
	return 0, false
}

// forgetSeen drops the candidates noted for admission: a view of the
// caller's slice, which a history must not keep past the call.
func (a *auto) forgetSeen() {
	clear(a.admitting)
	a.admitting = a.admitting[:0]
	if cap(a.admitting) > lists.ShrinkAbove {
		a.admitting = nil
	}
}

// evicted counts the blocks freed by the selection begun last: the
// turnover's clock.
func (a *auto) evicted(blocks int) { a.turnover.Evicted(a.now, blocks) }

// selected commits a Policy's selection over cands: ranked, the engine's
// entries for its victims, smallest first, and victims, what the
// transaction took of each. Auto admits the candidates it does not hold
// as resident, as every adaptive strategy does, evicts the victims taken
// wholly and restores its bounds.
func (a *auto) selected(cands []Candidate, ranked []entry, victims []Victim) {
	freed := 0
	for i := range victims {
		freed += len(victims[i].Blocks)
	}
	a.evicted(freed)
	slices.SortFunc(a.admitting, byRecency)
	for _, c := range a.admitting {
		if id := historyID(c); a.Lookup(id) < 0 { // two candidates may share a head
			a.Admit(id)
		}
	}
	for i := range ranked {
		c := &cands[ranked[i].Slot]
		if len(victims[i].Blocks) == len(c.Blocks) {
			if n := a.Lookup(historyID(c)); n >= 0 { // evicted with another of its head
				a.evict(n, lonePartial(c))
			}
		}
	}
	a.Finish()
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

// evict makes victim n a ghost: its requests outlive its blocks.
// lonePartial tells its class: whether its one block was partial.
func (a *auto) evict(n int32, lonePartial bool) {
	k := autoFull
	if lonePartial {
		k = autoPartial
	}
	a.evictedAs[k]++
	a.toGhost(n, uint8(1+k))
}

// Finish restores the bound on resident ids, making the least recently
// used ghosts.
func (a *auto) Finish() {
	for a.Size(autoResident) > a.c {
		a.toGhost(a.Tail(autoResident), 0)
	}
}

func (a *auto) Check() error {
	if err := a.CheckTable(); err != nil {
		return err
	}
	if r := a.Size(autoResident); r > a.c {
		return fmt.Errorf("auto: |resident| = %d > c = %d", r, a.c)
	}
	if err := a.ghosts.Check(); err != nil {
		return err
	}
	if err := a.weights.Check(); err != nil {
		return err
	}
	if len(a.info) != len(a.Slab) {
		return fmt.Errorf("auto: %d infos for %d nodes", len(a.info), len(a.Slab))
	}
	for n := a.Tail(autoResident); n >= 0; n = a.Newer(n) {
		if _, ok := a.ghosts.Get(a.Slab[n].ID); ok {
			return fmt.Errorf("auto: resident %d is a ghost too", a.Slab[n].ID)
		}
	}
	if !(a.reuses >= 0 && a.reuses <= float64(max(a.ghosts.Cap(), a.c))) {
		return fmt.Errorf("auto: reuse count %v", a.reuses)
	}
	return nil
}
