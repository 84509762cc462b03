package main

// kvevict cluster replays a workload over N engines behind a router: each
// engine a pool of blocks (a prefix tree evicting leaves first by the
// strategy), the router choosing an engine for each request. Eviction and
// routing decide the cluster's hit ratio together; the command shows both.

import (
	"fmt"
	"math"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/internal/stat"
	"github.com/sagellm/kvevict/internal/unitcache"
	"github.com/sagellm/kvevict/kvevents"
	"github.com/sagellm/kvevict/prefix"
	"github.com/sagellm/kvevict/sim"
)

// The routers of kvevict cluster.
const (
	// routeRoundRobin sends request r to engine r mod N.
	routeRoundRobin = "round-robin"
	// routeLeastLoaded sends a request to the engine that received the
	// fewest of the last loadWindow requests.
	routeLeastLoaded = "least-loaded"
	// routePrefix scores each engine by the longest prefix of the request
	// resident on it, as an exact mirror fed by the engines' KV events
	// says (encoded and decoded as on the wire), less the load term.
	routePrefix = "prefix"
	// routeApprox scores each engine by the same prefix on an approximate
	// index: an LRU of block hashes per engine, filled head first with
	// the prompts routed to it, sized at -guess times the engine's
	// capacity, as llm-d's approximate indexer guesses a pod's cache.
	routeApprox = "approx"
	// routeOracle scores each engine by the prefix it really holds, read
	// from its pool without events: what perfect knowledge gives the
	// same load term.
	routeOracle = "oracle"
)

// routers lists the routers in the order of the output.
var routers = []string{routeRoundRobin, routeLeastLoaded, routePrefix, routeApprox, routeOracle}

// loadWindow is how many of the latest requests an engine's load counts:
// the least-loaded router's measure, and the load term of the scoring ones.
const loadWindow = 64

// Defaults of kvevict cluster's scoring routers.
const (
	// defaultLoadWeight is the blocks of prefix one request of load costs
	// an engine's score.
	defaultLoadWeight = 0.5
	// defaultGuess is the approximate index's size over the engine's.
	defaultGuess = 1.0
)

// clusterRun is one run of kvevict cluster.
type clusterRun struct {
	engines, capacity int
	strategy          kvevict.Strategy
	router            string
}

// clusterReport is how a cluster did on a workload; its JSON form is the
// row kvevict cluster -format json prints.
type clusterReport struct {
	Workload       string `json:"workload"`
	Router         string `json:"router"`
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
	// MispredictedPerRequest are the blocks a scoring router counted on,
	// on the engine it chose, that the engine did not hold, per request.
	MispredictedPerRequest float64 `json:"mispredicted_per_request"`
	// PooledBelady is the hit ratio of Belady's MIN on one pooled cache of
	// engines x capacity blocks: the customary bound (see compare -h).
	PooledBelady float64 `json:"pooled_belady_hit_ratio"`
}

// cluster is the state of one run.
type cluster struct {
	w        *sim.Workload
	run      clusterRun
	weight   float64 // load term per request in the window
	engines  []*engine
	mirror   *kvevents.Mirror // routePrefix
	recent   []int            // the engines of the last requests, oldest first
	load     []int            // requests per engine among recent
	received []int            // requests per engine in all
	score    []int            // scratch: each engine's predicted prefix
	kv       []kvevents.Hash  // scratch: the request's hashes on the wire

	hits, refs, prefill, mispredicted int64
}

// engine is one engine of a cluster: its pool, the events its pool emitted
// since the router last read them, and the approximate index a router
// keeps of it.
type engine struct {
	topic   string
	tree    *prefix.Tree
	pending []kvevents.Event
	approx  *approxIndex
}

func newCluster(w *sim.Workload, run clusterRun, guess, weight float64) (*cluster, error) {
	c := &cluster{
		w: w, run: run, weight: weight,
		load: make([]int, run.engines), received: make([]int, run.engines), score: make([]int, run.engines),
	}
	if run.router == routePrefix {
		m, err := kvevents.NewMirror(run.capacity)
		if err != nil {
			return nil, err
		}
		c.mirror = m
	}
	for i := range run.engines {
		e := &engine{topic: fmt.Sprintf("kv@engine-%d@m", i)}
		var onEvent func(prefix.Event)
		if c.mirror != nil {
			onEvent = func(ev prefix.Event) {
				e.pending = append(e.pending, kvevents.FromPrefix(ev, int64(w.BlockTokens), nil))
			}
		}
		t, err := newPoolTree(run.strategy, run.capacity, onEvent)
		if err != nil {
			return nil, err
		}
		e.tree = t
		if run.router == routeApprox {
			if e.approx, err = newApproxIndex(max(1, int(math.Round(guess*float64(run.capacity))))); err != nil {
				return nil, err
			}
		}
		c.engines = append(c.engines, e)
	}
	return c, nil
}

// serve routes request r, serves it on the engine chosen and lets the
// router learn what changed.
func (c *cluster) serve(r int) error {
	req := &c.w.Requests[r]
	pick, scored := c.route(r, req.HashIDs)
	e := c.engines[pick]
	hit := e.tree.Peek(req.HashIDs)
	c.hits += int64(hit)
	c.refs += int64(len(req.HashIDs))
	c.prefill += int64(req.InputTokens - min(hit*c.w.BlockTokens, req.InputTokens))
	if scored && c.score[pick] > hit {
		c.mispredicted += int64(c.score[pick] - hit)
	}
	if _, err := e.tree.Admit(req.HashIDs, prefix.Access{Tick: int64(r)}); err != nil {
		return err
	}
	switch {
	case c.mirror != nil:
		if err := c.publish(e); err != nil {
			return err
		}
	case e.approx != nil:
		if err := e.approx.add(req.HashIDs); err != nil {
			return err
		}
	}
	c.recent = append(c.recent, pick)
	c.load[pick]++
	c.received[pick]++
	if len(c.recent) > loadWindow {
		c.load[c.recent[0]]--
		c.recent = c.recent[1:]
	}
	return nil
}

// route returns the engine request r goes to, and whether the router
// predicted each engine's prefix (in c.score). Ties go to the lowest
// engine.
func (c *cluster) route(r int, hashes []uint64) (pick int, scored bool) {
	switch c.run.router {
	case routeRoundRobin:
		return r % len(c.engines), false
	case routeLeastLoaded:
		for i := range c.load {
			if c.load[i] < c.load[pick] {
				pick = i
			}
		}
		return pick, false
	case routePrefix:
		c.kv = c.kv[:0]
		for _, h := range hashes {
			c.kv = append(c.kv, kvevents.IntHash(h))
		}
	}
	best := math.Inf(-1)
	for i, e := range c.engines {
		switch c.run.router {
		case routePrefix:
			c.score[i] = c.mirror.Match(e.topic, c.kv)
		case routeApprox:
			c.score[i] = e.approx.match(hashes)
		default: // routeOracle
			c.score[i] = e.tree.Peek(hashes)
		}
		if s := float64(c.score[i]) - c.weight*float64(c.load[i]); s > best {
			best, pick = s, i
		}
	}
	return pick, true
}

// publish carries e's events to the router's mirror through the wire
// encoding, as a vLLM engine's batch reaches a router, so that a codec
// bug shows in the hit ratio.
func (c *cluster) publish(e *engine) error {
	if len(e.pending) == 0 {
		return nil
	}
	payload, err := kvevents.Encode(&kvevents.EventBatch{Events: e.pending}, kvevents.EncodingMixed)
	if err != nil {
		return err
	}
	batch, skipped, err := kvevents.Decode(payload)
	if err != nil {
		return err
	}
	if skipped.Total() > 0 {
		return fmt.Errorf("the mirror skipped %d of the engine's events", skipped.Total())
	}
	c.mirror.Apply(e.topic, &batch)
	e.pending = e.pending[:0]
	return nil
}

// report is the run's report, its pooled bound left for the caller.
func (c *cluster) report() clusterReport {
	var sum, sumSq float64
	most := 0
	for _, n := range c.received {
		sum += float64(n)
		sumSq += float64(n) * float64(n)
		most = max(most, n)
	}
	requests := len(c.w.Requests)
	rep := clusterReport{
		Workload: c.w.Name, Router: c.run.router, Engines: c.run.engines,
		CapacityBlocks: c.run.capacity, Strategy: string(c.run.strategy),
		BlockHits: c.hits, BlockRefs: c.refs, PrefillTokens: c.prefill,
		Jain: stat.Jain(sum, sumSq, len(c.received)),
	}
	if c.refs > 0 {
		rep.HitRatio = float64(c.hits) / float64(c.refs)
	}
	if sum > 0 {
		rep.LoadImbalance = float64(most) / (sum / float64(len(c.received)))
	}
	if requests > 0 {
		rep.MispredictedPerRequest = float64(c.mispredicted) / float64(requests)
	}
	return rep
}

// simulateCluster replays w in arrival order over run's cluster and
// returns its report.
func simulateCluster(w *sim.Workload, run clusterRun, guess, weight float64, progress func(done, total int)) (clusterReport, error) {
	c, err := newCluster(w, run, guess, weight)
	if err != nil {
		return clusterReport{}, err
	}
	for r := range w.Requests {
		if err := c.serve(r); err != nil {
			return clusterReport{}, fmt.Errorf("%d engines of %d blocks, %s, %s router, request %d: %w",
				run.engines, run.capacity, run.strategy, run.router, r, err)
		}
		if progress != nil && (r%256 == 255 || r == len(w.Requests)-1) {
			progress(r+1, len(w.Requests))
		}
	}
	return c.report(), nil
}

// approxIndex is a router's guess of one engine's cache: an LRU of block
// hashes, the unit cache the simulator replays with, kept in an Index.
type approxIndex struct{ cache *unitcache.Cache }

func newApproxIndex(capacity int) (*approxIndex, error) {
	x, err := kvevict.NewIndex(kvevict.LRU, kvevict.WithTiming(false), kvevict.WithEvictionHistory(0))
	if err != nil {
		return nil, err
	}
	x.Grow(capacity)
	c, err := unitcache.NewIndexed(x, capacity)
	if err != nil {
		return nil, err
	}
	return &approxIndex{cache: c}, nil
}

// match returns the longest prefix of hashes the index holds.
func (a *approxIndex) match(hashes []uint64) int {
	n := 0
	for n < len(hashes) && a.cache.Contains(hashes[n]) {
		n++
	}
	return n
}

// add records a prompt routed to the engine as llm-d's indexer does,
// head first: each block becomes the most recent in turn, the least recent
// leaving when the index is full.
func (a *approxIndex) add(hashes []uint64) error {
	for _, h := range hashes {
		if _, err := a.cache.Access(h); err != nil {
			return err
		}
	}
	return nil
}
