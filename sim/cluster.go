package sim

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/internal/stat"
	"github.com/sagellm/kvevict/prefix"
	"github.com/sagellm/kvevict/tier"
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
	// EngineConfig's Cost, when set, runs the cluster in time: requests
	// arrive at their Timestamp divided by Speedup and, without Decode,
	// each engine prefills them one at a time in arrival order, a
	// request's prefill taking what Cost gives for the prompt tokens past
	// its hits, and its time to first token is its wait in the engine's
	// queue plus its prefill. Its block tokens must be the workload's.
	// Without it the report's times are 0 and [Engine.Wait] is always 0.
	// Its SLO is the time to first token the report's WithinSLO and
	// Goodput count requests within. Its other fields shape the engines
	// with Decode, and are refused without.
	EngineConfig
	// Decode makes each engine [Serve]'s pool in time, stepped by Cost,
	// which it needs: requests are admitted first come first served while
	// blocks and EngineConfig's caps allow, prefilled in chunks and
	// decoded in batches, preempted when blocks run out, and sessions'
	// turns arrive closed loop (EngineConfig.Loop) across the cluster.
	// Each pool evicts at block granularity ([BlockEvictor]), over the
	// tiers below it as [Serve]'s does.
	Decode bool
	// Speedup divides every arrival time, to study the cluster under more
	// load: 2 serves the workload in half its span. 0 means 1. A speedup
	// below 1 that puts an arrival past [MaxTimestamp] is refused.
	Speedup float64
	// Tiers are under each engine's pool, each engine's own: without
	// Decode the engine is a [tier.Tree] (its prefix tree, its GPU, over a
	// [tier.Hierarchy]), with Decode serve mode's pool over one. They are
	// configured as a [TierConfig]'s, except that vLLM's mode, which
	// replays vLLM's own GPU, is refused. A request's hits are then the run
	// on the engine's GPU followed by the runs below it; in time, the runs
	// below are loaded over their links (Cost's) before the rest is
	// prefilled. A router sees the tiers only through the events an engine
	// publishes ([Engine.TierEvents], as a [TierMirror] and
	// [NewTierRouter] read them); the others see the GPUs.
	Tiers
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
	// Tiers are the engines' tiers summed, the GPU first, with ClusterConfig.Below;
	// their capacities are all the engines' together.
	Tiers []TierStats `json:"tiers,omitempty"`
	// The times of a cluster run in time (ClusterConfig.Cost), all
	// modelled, in seconds, as [Serve]'s with Decode. Without it a
	// request's TTFT is its wait in its engine's queue plus its prefill,
	// and it finishes at its first token: E2E is TTFT, there is no TPOT
	// nor output, and an engine runs one request at a time.
	Times
	// WithinSLO is the share of requests whose TTFT is at most
	// ClusterConfig.SLO. PrefillSeconds is every engine's prefill time
	// summed, without Decode: with it the prefill shares its steps with
	// decode, and it is 0.
	WithinSLO      float64 `json:"within_slo"`
	PrefillSeconds float64 `json:"prefill_seconds"`
	// Preemptions are the pools' with Decode.
	Preemptions int `json:"preemptions"`
}

// An Engine is one engine of a [Cluster] as a [Router] reads it: its pool,
// the requests routed to it lately, and the KV events its pool emitted.
type Engine struct {
	tree     *prefix.Tree // the pool, without ClusterConfig.Below
	tiers    *tier.Tree   // the pool and the tiers below it, with ClusterConfig.Below
	pool     *pool        // the pool in time, with ClusterConfig.Decode
	capacity int
	events   []prefix.Event // since the router's previous Route
	// tierEvents are the tiers' below the tree since the router's
	// previous Route, as events.
	tierEvents []tier.Event
	load       int // requests among the cluster's last LoadWindow
	received   int // requests in all
	// In time: when the prefills queued on the engine end, the prefill
	// time it spent, and the cluster's clock, the current arrival.
	free, busy time.Duration
	now        *time.Duration
}

// CachedPrefix returns how many leading blocks of hashes the engine's pool
// holds: the hits a request of those blocks would get there. It reads the
// pool without touching it, as only a simulator can; a router that does
// not read the engine directly knows it from the engine's [Engine.Events].
// O(len(hashes)).
func (e *Engine) CachedPrefix(hashes []uint64) int {
	switch {
	case e.tiers != nil:
		return e.tiers.Peek(hashes)
	case e.pool != nil:
		return e.pool.resident(hashes)
	}
	return e.tree.Peek(hashes)
}

// Load returns how many of the cluster's last [LoadWindow] requests went to
// the engine. O(1).
func (e *Engine) Load() int { return e.load }

// Wait returns how long a request arriving now would wait before the
// engine starts its prefill: the prefills queued on it that have not
// ended. With ClusterConfig.Decode, whose engine prefills in batches, it
// is an estimate: the prefill time the cost model gives each request the
// engine holds without a first token yet, alone, past the prefix the
// engine held when it arrived. It is 0 for a cluster not run in time
// (ClusterConfig.Cost). O(1).
func (e *Engine) Wait() time.Duration {
	if e.pool != nil {
		return e.pool.queue.total
	}
	return max(e.free-*e.now, 0)
}

// TierEvents returns the events of the tiers below the engine's pool
// (ClusterConfig.Below) since the router's previous Route, in order, as
// [Engine.Events] does the pool's: each tier's stores and removals, with
// its medium. None without tiers. Valid until Route returns; the events'
// Hashes are the caller's to keep.
func (e *Engine) TierEvents() []tier.Event { return e.tierEvents }

// Capacity returns the blocks the engine's pool holds. O(1).
func (e *Engine) Capacity() int { return e.capacity }

// Events returns the KV events the engine's pool emitted since the
// router's previous Route, in order: the blocks it stored and removed
// serving the previous request, if that request was routed to it, else
// none; with ClusterConfig.Decode, whatever its pool did since, which
// admits, decodes and evicts in time. A router that mirrors the engines reads them at every Route. The
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
//   - the blocks the router predicted beyond the hits are mispredicted;
//   - in time (cfg.Cost), the request waits for the engine's earlier
//     requests to be prefilled, then its own prompt tokens past its hits
//     are. A request whose Timestamp is before its predecessor's arrives
//     with it: arrival order is the workload's order.
//
// Batching and chunked prefill are not modelled: an engine prefills one
// request at a time, whole.
//
// A workload whose requests carry hints (Request.Hints) has them honoured
// by each engine's tree as [Serve]'s pool honours them: a request's blocks
// take its hints (prefix.Access.Hints), a lease from its arrival. The
// trees' ticks then run on the hints' clock, the arrival (Timestamp over
// Speedup) in microseconds times 4,096, one tick more for each request
// that arrives at the same microsecond, which keeps the requests' order.
// The tiers below an engine's tree (Below) take the request's hints for
// the blocks it loads and offers; a block the tree demotes goes down
// without its hints.
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
	if !(cfg.Speedup >= 0) || math.IsInf(cfg.Speedup, 1) {
		return ClusterReport{}, fmt.Errorf("sim: %w: speedup must be a finite number above 0 (or 0 for 1), got %v", kvevict.ErrInvalidArgument, cfg.Speedup)
	}
	if speedup := cmp.Or(cfg.Speedup, 1); speedup < 1 {
		for i := range w.Requests {
			if at := float64(w.Requests[i].Timestamp) / speedup; at > MaxTimestamp {
				return ClusterReport{}, fmt.Errorf("sim: %w: speedup %v puts request %d's arrival at %.0f ms, past the latest, %d", kvevict.ErrInvalidArgument, cfg.Speedup, i, at, int64(MaxTimestamp))
			}
		}
	}
	if err := cfg.checkDecode(w); err != nil {
		return ClusterReport{}, err
	}
	c, err := newCluster(w, s, cfg)
	if err != nil {
		return ClusterReport{}, err
	}
	if err := c.run(r, &cfg); err != nil {
		return ClusterReport{}, fmt.Errorf("sim: %d engines of %d blocks, %s, %w", cfg.Engines, cfg.Capacity, s, err)
	}
	return c.report(), nil
}

// run serves every request, routed by r.
func (c *cluster) run(r Router, cfg *ClusterConfig) error {
	if c.fleet != nil {
		c.fleet.route = func(i int, now int64) (int, error) {
			c.now = time.Duration(now) * time.Microsecond
			k, _, err := c.route(i, r)
			if err != nil {
				return 0, fmt.Errorf("request %d: %w", i, err)
			}
			return k, nil
		}
		return c.fleet.run()
	}
	for i := range c.w.Requests {
		if err := c.serve(i, r); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		cfg.progress(i+1, len(c.w.Requests))
	}
	return nil
}

// checkDecode checks the engines' configuration: what shapes engines that
// decode is unset without Decode, and what Decode needs is there.
func (cfg *ClusterConfig) checkDecode(w *Workload) error {
	e := &cfg.EngineConfig
	switch {
	case !cfg.Decode && (e.MaxBatch != 0 || e.TokenBudget != 0 || e.Loop != "" || e.TPOTSLO != 0):
		return invalid("a batch cap, a token budget, a loop and a TPOT SLO shape engines that decode: set Decode")
	case cfg.Decode && e.Cost == nil:
		return invalid("engines that decode run in time: set Cost")
	}
	if cfg.Decode {
		if err := cfg.Tiers.checkPool(); err != nil {
			return err
		}
	}
	return e.check(w)
}

// cluster is the state of one [Cluster] run.
type cluster struct {
	w        *Workload
	strategy kvevict.Strategy
	capacity int
	engines  []*Engine
	recent   [LoadWindow]int // the engines of the latest requests, a ring
	next     int             // recent's oldest entry once it is full, and the next to write
	counted  int             // requests in recent, at most LoadWindow

	hits, refs, prefill, mispredicted int64
	levels                            []tier.Level // with Below: the GPU, then Below

	// In time: the cost model, the speedup, the SLO, the current arrival
	// and the first, and every request's time to first token.
	cost    *tier.Cost
	speedup float64
	slo     time.Duration
	now     time.Duration
	first   time.Duration
	ttft    []time.Duration
	// load is the time spent loading from the tiers below.
	load time.Duration
	// arrivals and finishes are each request's, in request order.
	arrivals, finishes []time.Duration

	// With hints: the latest arrival in microseconds and the latest tick
	// (see access).
	hinted           bool
	arrived, clocked int64

	// fleet runs the engines' pools with Decode; nil without.
	fleet *fleet
}

// access is request i's access to an engine's tree: its tick, the
// request's index, or with hints its tick on the hints' clock and its
// hints, their ends scaled to the ticks.
func (c *cluster) access(i int) prefix.Access {
	if !c.hinted {
		return prefix.Access{Tick: int64(i)}
	}
	req := &c.w.Requests[i]
	c.arrived = max(c.arrived, int64(float64(req.Timestamp)*1000/c.speedup))
	c.clocked = max(c.clocked+1, c.arrived<<hintClockShift)
	return prefix.Access{Tick: c.clocked, Hints: req.Hints.tickHints(c.arrived)}
}

func newCluster(w *Workload, s kvevict.Strategy, cfg ClusterConfig) (*cluster, error) {
	c := &cluster{w: w, strategy: s, capacity: cfg.Capacity, cost: cfg.Cost, speedup: cfg.Speedup, slo: cfg.SLO, hinted: w.hinted()}
	if c.speedup == 0 {
		c.speedup = 1
	}
	if c.cost != nil {
		c.ttft = make([]time.Duration, 0, len(w.Requests))
	}
	if len(cfg.Below) > 0 {
		c.levels = cfg.config(tier.Level{Medium: tier.GPU, Capacity: cfg.Capacity, Strategy: s, Options: cfg.Options}, nil).Levels
	}
	if cfg.Decode {
		// The closed loop reads the timestamps at DefaultTokenTime a token,
		// as Serve does with a clock.
		c.fleet = newFleet(w, &cfg.EngineConfig, int64(DefaultTokenTime/time.Microsecond), c.speedup, cfg.Config.progress)
	}
	var ceil *ceiling
	for range cfg.Engines {
		e := &Engine{capacity: cfg.Capacity, now: &c.now}
		onEvent := func(ev prefix.Event) { e.events = append(e.events, ev) }
		var err error
		if c.fleet != nil {
			ev, err := newEvictor(GranularityBlock, s, cfg.Capacity, cfg.Options, cfg.contract)
			if err != nil {
				return nil, err
			}
			if ceil == nil {
				ceil = computeCeiling(w)
			}
			e.pool = newPool(c.fleet, ServeConfig{Config: cfg.Config, EngineConfig: cfg.EngineConfig}, ev, ceil)
			e.pool.onEvent = onEvent
			e.pool.onTierEvent = func(ev tier.Event) { e.tierEvents = append(e.tierEvents, ev) }
			if err := e.pool.setTiers(&cfg.Tiers, s); err != nil {
				return nil, err
			}
			e.pool.queue = &prefillQueue{cost: cfg.Cost, each: make([]time.Duration, len(w.Requests))}
			c.engines = append(c.engines, e)
			continue
		}
		if c.levels != nil {
			e.tiers, err = tier.NewTree(cfg.config(c.levels[0], func(ev tier.Event) { e.tierEvents = append(e.tierEvents, ev) }), onEvent)
		} else {
			e.tree, err = prefix.New(s, cfg.Capacity, prefix.WithStrategyOptions(cfg.Options...), prefix.WithEvents(onEvent))
		}
		if err != nil {
			return nil, err
		}
		c.engines = append(c.engines, e)
	}
	return c, nil
}

// serve routes request i, serves it on the engine chosen and counts it in
// that engine's load.
func (c *cluster) serve(i int, r Router) error {
	req := &c.w.Requests[i]
	if c.cost != nil {
		c.now = max(c.now, time.Duration(float64(req.Timestamp)*float64(time.Millisecond)/c.speedup))
		if i == 0 {
			c.first = c.now
		}
	}
	k, predicted, err := c.route(i, r)
	if err != nil {
		return err
	}
	e := c.engines[k]
	var m *tier.Match
	var gpu int
	if e.tiers != nil {
		m, err = e.tiers.Request(req.HashIDs, c.access(i))
	} else {
		gpu, err = e.tree.Admit(req.HashIDs, c.access(i))
	}
	if err != nil {
		return err
	}
	hit := gpu
	if m != nil {
		gpu, hit = m.Runs[0], m.Hits()
	}
	c.hits += int64(hit)
	c.refs += int64(len(req.HashIDs))
	cached := tokensBefore(req, hit, c.w.BlockTokens)
	c.prefill += int64(req.InputTokens - cached)
	if c.cost != nil {
		load, service := serviceTime(c.cost, c.levels, req, hit, m, c.w.BlockTokens)
		c.load += load
		e.free = max(e.free, c.now) + service
		e.busy += service
		c.ttft = append(c.ttft, e.free-c.now)
		c.arrivals, c.finishes = append(c.arrivals, c.now), append(c.finishes, e.free)
	}
	c.mispredicted += int64(max(predicted-gpu, 0))
	return nil
}

// route routes request i with r, counts it in the engine's load, and
// returns the engine and the blocks r counted on there. With Decode the
// blocks the router counted on that the engine does not hold now are
// mispredicted; without, the request's own admission counts them (serve).
func (c *cluster) route(i int, r Router) (k, predicted int, err error) {
	req := &c.w.Requests[i]
	choice, err := r.Route(req, c.engines)
	if err != nil {
		return 0, 0, err
	}
	if choice.Engine < 0 || choice.Engine >= len(c.engines) || choice.Predicted < 0 {
		return 0, 0, fmt.Errorf("the router chose engine %d of %d, counting on %d blocks", choice.Engine, len(c.engines), choice.Predicted)
	}
	for _, e := range c.engines {
		e.events = e.events[:0] // the router had them
		e.tierEvents = e.tierEvents[:0]
	}
	e := c.engines[choice.Engine]
	if e.pool != nil {
		c.mispredicted += int64(max(choice.Predicted-e.pool.resident(req.HashIDs), 0))
	}
	if c.counted == LoadWindow {
		c.engines[c.recent[c.next]].load--
	} else {
		c.counted++
	}
	c.recent[c.next] = choice.Engine
	c.next = (c.next + 1) % LoadWindow
	e.load++
	e.received++
	return choice.Engine, choice.Predicted, nil
}

func (c *cluster) report() ClusterReport {
	var preemptions int
	for _, e := range c.engines {
		if p := e.pool; p != nil {
			c.hits, c.refs, c.prefill = c.hits+p.tally.hits, c.refs+p.tally.refs, c.prefill+p.tally.prefill
			preemptions += p.preemptions
		}
	}
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
		Jain: stat.Jain(sum, sumSq, len(c.engines)), Preemptions: preemptions,
	}
	if c.refs > 0 {
		rep.HitRatio = float64(c.hits) / float64(c.refs)
	}
	if sum > 0 {
		rep.LoadImbalance = float64(most) / (sum / float64(len(c.engines)))
	}
	rep.MispredictedPerRequest = float64(c.mispredicted) / float64(len(c.w.Requests))
	if c.cost != nil {
		c.timeReport(&rep)
	}
	for _, e := range c.engines {
		switch {
		case e.tiers != nil:
			rep.Tiers = addTierStats(rep.Tiers, e.tiers.Stats(), c.cost)
		case e.pool != nil:
			rep.Tiers = e.pool.addTierStats(rep.Tiers)
		}
	}
	return rep
}

// timeReport fills in rep's times.
func (c *cluster) timeReport(rep *ClusterReport) {
	if c.fleet != nil {
		clocks := make([]*engineClock, len(c.engines))
		for i, e := range c.engines {
			clocks[i] = e.pool.clock
		}
		rec := c.fleet.rec
		rep.Times = *rec.times(clocks)
		within, n := 0, 0
		for r := range rec.arrival {
			if rec.first[r] >= 0 {
				n++
				if rec.first[r]-rec.arrival[r] <= int64(c.slo/time.Microsecond) {
					within++
				}
			}
		}
		if n > 0 {
			rep.WithinSLO = float64(within) / float64(n)
		}
		return
	}
	// Without Decode a request finishes at its first token, and an engine
	// runs one request at a time.
	var end, busiest, busy time.Duration
	for _, e := range c.engines {
		end, busiest, busy = max(end, e.free), max(busiest, e.busy), busy+e.busy
	}
	rep.PrefillSeconds, rep.LoadSeconds = busy.Seconds(), c.load.Seconds()
	t := &rep.Times
	if span := end - c.first; span > 0 {
		t.BusiestUtilization = float64(busiest) / float64(span)
		t.MeanRunning = float64(busy) / float64(span)
		t.MeanInSystem = inSystem(c.arrivals, c.finishes) / span.Seconds()
		t.ArrivalRatePerS = float64(len(c.ttft)) / span.Seconds()
	}
	var sum time.Duration
	for _, d := range c.ttft {
		sum += d
	}
	t.TTFTMean = sum.Seconds() / float64(len(c.ttft))
	slices.Sort(c.ttft)
	t.TTFTP50 = stat.Percentile(c.ttft, 50).Seconds()
	t.TTFTP90 = stat.Percentile(c.ttft, 90).Seconds()
	t.TTFTP99 = stat.Percentile(c.ttft, 99).Seconds()
	t.E2EMean, t.E2EP50, t.E2EP90, t.E2EP99 = t.TTFTMean, t.TTFTP50, t.TTFTP90, t.TTFTP99
	within, _ := slices.BinarySearch(c.ttft, c.slo+1)
	rep.WithinSLO = float64(within) / float64(len(c.ttft))
	t.Goodput = rep.WithinSLO
	if c.w.GroupKind == "session" {
		micro := func(ds []time.Duration) []int64 {
			out := make([]int64, len(ds))
			for i, d := range ds {
				out[i] = int64(d / time.Microsecond)
			}
			return out
		}
		t.SessionCompletionP50, t.SessionCompletionP99 = sessionCompletion(c.w, micro(c.arrivals), micro(c.finishes))
	}
}

// inSystem is the time integral, in seconds, of the count of requests
// arrived and not finished, from each request's arrival and finish. It
// sorts copies: the callers' stay by request, as the sessions' completion
// reads them.
func inSystem(arrivals, finishes []time.Duration) float64 {
	arrivals, finishes = slices.Clone(arrivals), slices.Clone(finishes)
	slices.Sort(arrivals)
	slices.Sort(finishes)
	var area float64
	n, i, j := 0, 0, 0
	var at time.Duration
	for j < len(finishes) {
		next := finishes[j]
		if i < len(arrivals) && arrivals[i] <= next {
			next = arrivals[i]
		}
		area += float64(n) * (next - at).Seconds()
		at = next
		if i < len(arrivals) && arrivals[i] == next {
			n++
			i++
		} else {
			n--
			j++
		}
	}
	return area
}

// prefillQueue is what a cluster's pool with Decode has yet to prefill, as
// [Engine.Wait] estimates it: each request without a first token, priced
// alone by the cost model past the prefix the pool held at its arrival,
// and with tiers the runs below it loaded, as a cluster without Decode
// prices it (serviceTime).
type prefillQueue struct {
	cost  *tier.Cost
	each  []time.Duration // by request, while counted
	total time.Duration
}

// arrive counts request r, arriving at p.
func (q *prefillQueue) arrive(p *pool, r int) {
	req := &p.w.Requests[r]
	found, m := p.lookup(req)
	_, d := serviceTime(q.cost, p.levels, req, found, m, p.w.BlockTokens)
	q.each[r] = d
	q.total += d
}

// started stops counting request r: its prefill ended, or it was refused.
func (q *prefillQueue) started(r int) {
	q.total -= q.each[r]
	q.each[r] = 0
}

// resident returns how many leading blocks of hashes p holds, computed or
// being computed. O(len(hashes)).
func (p *pool) resident(hashes []uint64) int {
	return prefixHits(hashes, func(h uint64) bool { _, ok := p.byHash[h]; return ok })
}
