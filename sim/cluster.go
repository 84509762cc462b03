package sim

import (
	"fmt"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/internal/stat"
	"github.com/sagellm/kvevict/prefix"
)

// LoadWindow is how many of a cluster's latest requests an engine's load
// counts ([Engine.Load]).
const LoadWindow = 64

// ClusterConfig is what a [Cluster] run needs besides the workload, the
// strategy and the router.
type ClusterConfig struct {
	// Config's Capacity is each engine's pool in blocks, its Options
	// configure the strategy that ranks each pool (prefix.WithStrategyOptions),
	// and its Progress is called as a replay calls it.
	Config
	// Engines is how many engines the cluster has. Must be >= 1.
	Engines int
}

// ClusterReport is how a cluster did on a workload. Its JSON form is the
// fields of a `kvevict cluster -format json` row that the run measures.
type ClusterReport struct {
	Engines        int    `json:"engines"`
	CapacityBlocks int    `json:"capacity_blocks"` // per engine
	Strategy       string `json:"strategy"`
	// HitRatio is the prompt blocks found on the engine a request went to
	// (its longest resident prefix there) over all prompt blocks.
	HitRatio  float64 `json:"hit_ratio"`
	BlockHits int64   `json:"block_hits"`
	BlockRefs int64   `json:"block_refs"`
	// PrefillTokens are the prompt tokens the engines computed.
	PrefillTokens int64 `json:"prefill_tokens"`
	// LoadImbalance is the most requests an engine received over the mean;
	// Jain is Jain's index of the requests per engine.
	LoadImbalance float64 `json:"load_imbalance"`
	Jain          float64 `json:"jain"`
	// MispredictedPerRequest are the blocks a router counted on, on the
	// engine it chose (Choice.Predicted), that the engine did not hold,
	// per request.
	MispredictedPerRequest float64 `json:"mispredicted_per_request"`
}

// An Engine is one engine of a [Cluster] as a [Router] reads it: its pool,
// the requests routed to it lately, and the KV events its pool emitted.
type Engine struct {
	tree     *prefix.Tree
	capacity int
	events   []prefix.Event // since the router's previous Route
	load     int            // requests among the cluster's last LoadWindow
	received int            // requests in all
}

// CachedPrefix returns how many leading blocks of hashes the engine's pool
// holds: the hits a request of those blocks would get there. It reads the
// pool without touching it, as only an oracle could; a router that does
// not read the engine directly knows it from the engine's [Engine.Events].
// O(len(hashes)).
func (e *Engine) CachedPrefix(hashes []uint64) int { return e.tree.Peek(hashes) }

// Load returns how many of the cluster's last [LoadWindow] requests went to
// the engine. O(1).
func (e *Engine) Load() int { return e.load }

// Capacity returns the blocks the engine's pool holds. O(1).
func (e *Engine) Capacity() int { return e.capacity }

// Events returns the KV events the engine's pool emitted since the
// router's previous Route, in order: the blocks it stored and removed
// serving the previous request, if that request was routed to it, else
// none. A router that mirrors the engines reads them at every Route. The
// slice is valid until Route returns; the events' Hashes are the caller's
// to keep.
func (e *Engine) Events() []prefix.Event { return e.events }

// Cluster replays w in arrival order over cfg.Engines engines behind
// router r, each engine a pool of cfg.Capacity blocks: a prefix tree that
// evicts leaves first, ranked by strategy s (a key strategy or Auto; see
// package prefix), its tick the request's index. For each request:
//
//   - r.Route chooses the engine, reading every engine as the earlier
//     requests left it;
//   - the request's hits are the longest prefix of its HashIDs resident on
//     that engine, and its prompt tokens past them are prefilled;
//   - the engine admits all its blocks (prefix.Tree.Admit), evicting leaves
//     to make room, and counts the request in its load;
//   - the blocks the router predicted beyond the hits are mispredicted.
//
// A router serves one run: pass a new one to each call.
func Cluster(w *Workload, s kvevict.Strategy, r Router, cfg ClusterConfig) (ClusterReport, error) {
	if err := cfg.validate(w); err != nil {
		return ClusterReport{}, err
	}
	if cfg.Engines < 1 {
		return ClusterReport{}, fmt.Errorf("sim: a cluster needs at least 1 engine, got %d", cfg.Engines)
	}
	if r == nil {
		return ClusterReport{}, fmt.Errorf("sim: nil router")
	}
	c, err := newCluster(w, s, cfg)
	if err != nil {
		return ClusterReport{}, err
	}
	for i := range w.Requests {
		if err := c.serve(i, r); err != nil {
			return ClusterReport{}, fmt.Errorf("sim: %d engines of %d blocks, %s, request %d: %w",
				cfg.Engines, cfg.Capacity, s, i, err)
		}
		cfg.progress(i+1, len(w.Requests))
	}
	return c.report(), nil
}

// cluster is the state of one [Cluster] run.
type cluster struct {
	w        *Workload
	strategy kvevict.Strategy
	capacity int
	engines  []*Engine
	last     *Engine         // the engine of the previous request, nil before the first
	recent   [LoadWindow]int // the engines of the latest requests, a ring
	next     int             // recent's oldest entry once it is full, and the next to write
	counted  int             // requests in recent, at most LoadWindow

	hits, refs, prefill, mispredicted int64
}

func newCluster(w *Workload, s kvevict.Strategy, cfg ClusterConfig) (*cluster, error) {
	c := &cluster{w: w, strategy: s, capacity: cfg.Capacity}
	for range cfg.Engines {
		e := &Engine{capacity: cfg.Capacity}
		t, err := prefix.New(s, cfg.Capacity,
			prefix.WithStrategyOptions(cfg.Options...),
			prefix.WithEvents(func(ev prefix.Event) { e.events = append(e.events, ev) }))
		if err != nil {
			return nil, err
		}
		e.tree = t
		c.engines = append(c.engines, e)
	}
	return c, nil
}

// serve routes request i, serves it on the engine chosen and counts it in
// that engine's load.
func (c *cluster) serve(i int, r Router) error {
	req := &c.w.Requests[i]
	choice, err := r.Route(req, c.engines)
	if err != nil {
		return err
	}
	if choice.Engine < 0 || choice.Engine >= len(c.engines) || choice.Predicted < 0 {
		return fmt.Errorf("the router chose engine %d of %d, counting on %d blocks", choice.Engine, len(c.engines), choice.Predicted)
	}
	if c.last != nil {
		c.last.events = c.last.events[:0] // the router had them
	}
	e := c.engines[choice.Engine]
	hit, err := e.tree.Admit(req.HashIDs, prefix.Access{Tick: int64(i)})
	if err != nil {
		return err
	}
	c.hits += int64(hit)
	c.refs += int64(len(req.HashIDs))
	c.prefill += int64(req.InputTokens - min(hit*c.w.BlockTokens, req.InputTokens))
	c.mispredicted += int64(max(choice.Predicted-hit, 0))
	if c.counted == LoadWindow {
		c.engines[c.recent[c.next]].load--
	} else {
		c.counted++
	}
	c.recent[c.next] = choice.Engine
	c.next = (c.next + 1) % LoadWindow
	e.load++
	e.received++
	c.last = e
	return nil
}

func (c *cluster) report() ClusterReport {
	var sum, sumSq float64
	most := 0
	for _, e := range c.engines {
		n := e.received
		sum += float64(n)
		sumSq += float64(n) * float64(n)
		most = max(most, n)
	}
	rep := ClusterReport{
		Engines: len(c.engines), CapacityBlocks: c.capacity, Strategy: string(c.strategy),
		BlockHits: c.hits, BlockRefs: c.refs, PrefillTokens: c.prefill,
		Jain: stat.Jain(sum, sumSq, len(c.engines)),
	}
	if c.refs > 0 {
		rep.HitRatio = float64(c.hits) / float64(c.refs)
	}
	if sum > 0 {
		rep.LoadImbalance = float64(most) / (sum / float64(len(c.engines)))
	}
	rep.MispredictedPerRequest = float64(c.mispredicted) / float64(len(c.w.Requests))
	return rep
}
