package sim

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/prefix"
	"github.com/sagellm/kvevict/tier"
)

// A Router chooses the engine each request of a [Cluster] goes to.
// Cluster calls Route once per request, in arrival order, before the
// engine serves it, with every engine as the earlier requests left it
// (their load, their pools, the events their pools emitted since the
// previous Route); it never calls Route concurrently. A router keeps what
// it learns between calls (a mirror of the engines' caches, an index of
// the prompts it routed), so it serves one run.
type Router interface {
	// Route returns the engine req goes to, an index into engines, and
	// the blocks of req's prompt the router counts on finding there.
	// req and engines are valid only during the call. An error stops the
	// run.
	Route(req *Request, engines []*Engine) (Choice, error)
}

// Choice is a [Router]'s decision for one request.
type Choice struct {
	// Engine is the index of the engine chosen.
	Engine int
	// Predicted is how many leading blocks of the prompt the router counts
	// on finding on that engine: those it does not hold are mispredicted
	// (ClusterReport.MispredictedPerRequest). 0 for a router that does not
	// look at the engines' caches.
	Predicted int
}

// NewRoundRobin returns a router that sends the i-th request it routes to
// engine i mod N. O(1) per request.
func NewRoundRobin() Router { return &roundRobin{} }

type roundRobin struct{ next int }

func (r *roundRobin) Route(_ *Request, engines []*Engine) (Choice, error) {
	c := Choice{Engine: r.next % len(engines)}
	r.next++
	return c, nil
}

// NewLeastLoaded returns a router that sends each request to the engine
// with the lowest [Engine.Load], the lowest engine among equals. O(N) per
// request for N engines.
func NewLeastLoaded() Router { return leastLoaded{} }

type leastLoaded struct{}

func (leastLoaded) Route(_ *Request, engines []*Engine) (Choice, error) {
	pick := 0
	for i, e := range engines {
		if e.Load() < engines[pick].Load() {
			pick = i
		}
	}
	return Choice{Engine: pick}, nil
}

// The scoring routers send a request to the engine with the best score,
// from the leading blocks of its prompt the router believes each engine
// holds. The score is one of two rules: the blocks believed held less
// loadWeight blocks per request of the engine's [Engine.Load], highest
// wins; or, with a cost model ([NewTTFTRouter]), the request's estimated
// time to first token there, lowest wins. The routers differ in where the
// belief comes from: the engine itself ([NewDirectRouter]), a mirror of its
// KV events ([NewMirrorRouter], [NewTTFTRouter]) or a guess from the
// prompts routed to it ([NewApproxRouter]). Each takes O(N + the blocks it
// matches) per request for N engines, plus what it learns.

// scores holds a scoring router's rule and its belief of each engine's
// prefix, reused from request to request.
type scores struct {
	loadWeight float64
	cost       *tier.Cost // the ttft rule when set
	prefix     []int      // scratch: the prefix believed held on the GPU, per engine
	// With the tiers below the GPU believed too (a TierMirror): under the
	// prefix rule each engine's blocks weighted by tier, in place of
	// prefix; under the ttft rule each engine's loads and prefill, in
	// place of the prefill past prefix.
	weighted []float64
	service  []time.Duration
}

func newScores(loadWeight float64) (scores, error) {
	if !(loadWeight >= 0) || math.IsInf(loadWeight, 1) {
		return scores{}, fmt.Errorf("sim: %w: load weight must be a finite number of blocks >= 0, got %v", kvevict.ErrInvalidArgument, loadWeight)
	}
	return scores{loadWeight: loadWeight}, nil
}

// best returns the engine with the best score by s.prefix, the lowest
// engine among equals; under the ttft rule, the least loaded among equal
// estimates, so that idle engines share the requests none has cached.
func (s *scores) best(req *Request, engines []*Engine) Choice {
	pick := 0
	if s.cost != nil {
		var least time.Duration
		for i, e := range engines {
			var est time.Duration
			if s.service != nil {
				est = e.Wait() + s.service[i]
			} else {
				est = e.Wait() + s.cost.Prefill(tokensBefore(req, s.prefix[i], s.cost.BlockTokens()), req.InputTokens)
			}
			if i == 0 || est < least || est == least && e.Load() < engines[pick].Load() {
				least, pick = est, i
			}
		}
		return Choice{Engine: pick, Predicted: s.prefix[pick]}
	}
	top := math.Inf(-1)
	for i, e := range engines {
		held := float64(s.prefix[i])
		if s.weighted != nil {
			held = s.weighted[i]
		}
		if score := held - s.loadWeight*float64(e.Load()); score > top {
			top, pick = score, i
		}
	}
	return Choice{Engine: pick, Predicted: s.prefix[pick]}
}

// NewDirectRouter returns a scoring router that reads each engine's prefix
// directly from its pool ([Engine.CachedPrefix]): what perfect knowledge
// of the caches gives at the same load weight. It is no bound on the other
// routers: greedy routing on perfect knowledge can place a request worse
// than a guess does; [PooledBound] is the bound on hit ratio.
func NewDirectRouter(loadWeight float64) (Router, error) {
	s, err := newScores(loadWeight)
	if err != nil {
		return nil, err
	}
	return &direct{s}, nil
}

// NewOracleRouter is NewDirectRouter's former name.
//
// Deprecated: use [NewDirectRouter]; the router is no oracle, as its name
// suggested: it bounds nothing.
func NewOracleRouter(loadWeight float64) (Router, error) { return NewDirectRouter(loadWeight) }

type direct struct{ scores }

func (r *direct) Route(req *Request, engines []*Engine) (Choice, error) {
	r.prefix = r.prefix[:0]
	for _, e := range engines {
		r.prefix = append(r.prefix, e.CachedPrefix(req.HashIDs))
	}
	return r.best(req, engines), nil
}

// A Mirror is a router's copy of the engines' caches, kept from the KV
// events their pools emit, as a KV-aware router keeps one from vLLM's
// events (package kvevents holds one, behind the wire protocol). The
// router of [NewMirrorRouter] calls, at each request, Apply with every
// engine's new events, then CachedPrefix for every engine.
type Mirror interface {
	// Apply takes the events engine i's pool emitted, in order. An error
	// stops the run.
	Apply(engine int, events []prefix.Event) error
	// CachedPrefix returns how many leading blocks of hashes engine i
	// holds, as the events applied say.
	CachedPrefix(engine int, hashes []uint64) int
}

// NewMirrorRouter returns a scoring router that believes m, fed with the
// engines' events ([Engine.Events]): an exact mirror routes as the direct router
// does, and one that loses or garbles events routes worse.
func NewMirrorRouter(m Mirror, loadWeight float64) (Router, error) {
	if m == nil {
		return nil, errors.New("sim: nil mirror")
	}
	s, err := newScores(loadWeight)
	if err != nil {
		return nil, err
	}
	return &mirrored{scores: s, m: m}, nil
}

// A TierMirror is a [Mirror] that also keeps the tiers below the
// engines' pools (ClusterConfig.Below), fed with their events
// ([Engine.TierEvents]), as llm-d's index keeps a device tier in each
// pod's entry for a block.
type TierMirror interface {
	Mirror
	// ApplyTiers takes the events of the tiers below engine i's pool, in
	// order. An error stops the run.
	ApplyTiers(engine int, events []tier.Event) error
	// HeldOn reports whether engine i holds block h on medium: tier.GPU
	// (its pool, as the events applied say) or a tier below.
	HeldOn(engine int, medium tier.Medium, h uint64) bool
}

// mediums are the mediums a TierMirror is asked about, top first.
var mediums = []tier.Medium{tier.GPU, tier.CPU, tier.Storage}

// LLMDTierWeights are llm-d's default weights of a block by the tier that
// holds it (llm-d-kv-cache v0.9.0, kvcache.DefaultKVCacheBackendConfig):
// gpu 1.0, cpu 0.8. A medium it does not name weighs 1.0 there, as
// STORAGE does.
var LLMDTierWeights = map[tier.Medium]float64{tier.GPU: 1, tier.CPU: 0.8}

// NewTierRouter returns a scoring router that believes m, fed with the
// engines' events and their tiers' ([Engine.TierEvents]), and scores each
// engine as llm-d's longest-prefix scorer does over every tier: each
// leading block of the prompt the engine holds on some tier counts the
// largest weight among the tiers that hold it (weights by medium; a
// medium not in weights counts 1), the run ending at the first block held
// nowhere; less loadWeight per request of the engine's [Engine.Load]. It
// counts on the GPU's prefix (Choice.Predicted).
func NewTierRouter(m TierMirror, weights map[tier.Medium]float64, loadWeight float64) (Router, error) {
	if m == nil {
		return nil, errors.New("sim: nil mirror")
	}
	for md, w := range weights {
		if !(w >= 0) || math.IsInf(w, 1) {
			return nil, fmt.Errorf("sim: %w: the weight of %s must be a finite number >= 0, got %v", kvevict.ErrInvalidArgument, md, w)
		}
	}
	s, err := newScores(loadWeight)
	if err != nil {
		return nil, err
	}
	s.weighted = []float64{}
	return &mirrored{scores: s, m: m, tm: m, weights: maps.Clone(weights)}, nil
}

// NewTTFTRouter returns a scoring router that believes m, fed with the
// engines' events as [NewMirrorRouter]'s is, and sends each request to the
// engine where cost estimates its time to first token lowest: the
// engine's queue ([Engine.Wait]) plus the prefill of the prompt past the
// prefix m says it holds. That is Mooncake's KVCache-centric scheduling
// (FAST '25, its Algorithm 1) without KV transfers between engines. If m
// is also a [TierMirror], the estimate is the cluster's own pricing of the
// request: the runs the mirror says each tier below holds after the GPU's
// prefix, loaded over their links, then the prefill of the rest. Its
// estimates are the cluster's own times only when the cluster runs in
// time with the same cost model (ClusterConfig.Cost); without one every
// wait is 0 and it routes by cache alone.
func NewTTFTRouter(m Mirror, cost *tier.Cost) (Router, error) {
	if m == nil {
		return nil, errors.New("sim: nil mirror")
	}
	if cost == nil {
		return nil, errors.New("sim: the ttft router needs a cost model")
	}
	r := &mirrored{scores: scores{cost: cost}, m: m}
	if tm, ok := m.(TierMirror); ok {
		r.tm, r.scores.service = tm, []time.Duration{}
	}
	return r, nil
}

type mirrored struct {
	scores
	m       Mirror
	tm      TierMirror              // m, when it mirrors the tiers too
	weights map[tier.Medium]float64 // NewTierRouter's
	match   tier.Match              // scratch: the ttft rule's runs on mediums
}

func (r *mirrored) Route(req *Request, engines []*Engine) (Choice, error) {
	r.prefix = r.prefix[:0]
	if r.weighted != nil {
		r.weighted = r.weighted[:0]
	}
	if r.service != nil {
		r.service = r.service[:0]
	}
	for i, e := range engines {
		if events := e.Events(); len(events) > 0 {
			if err := r.m.Apply(i, events); err != nil {
				return Choice{}, err
			}
		}
		if events := e.TierEvents(); len(events) > 0 && r.tm != nil {
			if err := r.tm.ApplyTiers(i, events); err != nil {
				return Choice{}, err
			}
		}
		gpu := r.m.CachedPrefix(i, req.HashIDs)
		r.prefix = append(r.prefix, gpu)
		switch {
		case r.weighted != nil:
			r.weighted = append(r.weighted, r.weigh(i, req.HashIDs))
		case r.service != nil:
			r.service = append(r.service, r.price(i, req, gpu))
		}
	}
	return r.best(req, engines), nil
}

// weigh is llm-d's score of engine i's hold on hashes (NewTierRouter).
func (r *mirrored) weigh(i int, hashes []uint64) float64 {
	sum := 0.0
	for _, h := range hashes {
		most := -1.0
		for _, md := range mediums {
			if r.tm.HeldOn(i, md, h) {
				w, ok := r.weights[md]
				if !ok {
					w = 1
				}
				most = max(most, w)
			}
		}
		if most < 0 {
			break
		}
		sum += most
	}
	return sum
}

// price is the ttft rule's service time of req on engine i, whose GPU
// holds its first gpu blocks: the run after them on each tier below, in
// the hierarchy's order, loaded, then the rest prefilled.
func (r *mirrored) price(i int, req *Request, gpu int) time.Duration {
	m := &r.match
	m.Runs = append(m.Runs[:0], gpu)
	at := gpu
	for _, md := range mediums[1:] {
		n := 0
		for at+n < len(req.HashIDs) && r.tm.HeldOn(i, md, req.HashIDs[at+n]) {
			n++
		}
		m.Runs = append(m.Runs, n)
		at += n
	}
	load, compute, _ := price(r.cost, mediumLevels, req, m, r.cost.BlockTokens())
	return load + compute
}

// mediumLevels are a level per medium, in the hierarchy's order, for
// pricing the runs a TierMirror finds.
var mediumLevels = []tier.Level{{Medium: tier.GPU}, {Medium: tier.CPU}, {Medium: tier.Storage}}

// NewApproxRouter returns a scoring router that believes an approximate
// index of each engine's cache, as llm-d's approximate indexer guesses a
// pod's cache without its events: an LRU of block hashes, sized at guess
// times the engine's capacity (at least one block), filled head first with
// the prompts routed to the engine. guess must be positive and finite.
func NewApproxRouter(guess, loadWeight float64) (Router, error) {
	if !(guess > 0) || math.IsInf(guess, 1) {
		return nil, fmt.Errorf("sim: %w: approximate index size must be a finite positive multiple of an engine's capacity, got %v", kvevict.ErrInvalidArgument, guess)
	}
	s, err := newScores(loadWeight)
	if err != nil {
		return nil, err
	}
	return &approx{scores: s, guess: guess}, nil
}

type approx struct {
	scores
	guess   float64
	indexes []*tier.Cache // per engine, made at the first request
}

func (r *approx) Route(req *Request, engines []*Engine) (Choice, error) {
	if r.indexes == nil {
		for _, e := range engines {
			x, err := newApproxIndex(r.guess * float64(e.Capacity()))
			if err != nil {
				return Choice{}, err
			}
			r.indexes = append(r.indexes, x)
		}
	}
	if len(r.indexes) != len(engines) {
		return Choice{}, fmt.Errorf("approx router: %d engines, %d at its first request", len(engines), len(r.indexes))
	}
	r.prefix = r.prefix[:0]
	for _, x := range r.indexes {
		r.prefix = append(r.prefix, prefixHits(req.HashIDs, x.Contains))
	}
	c := r.best(req, engines)
	// Head first: each block becomes the most recent in turn, the least
	// recent leaving when the index is full.
	for _, h := range req.HashIDs {
		if _, err := r.indexes[c.Engine].Access(h); err != nil {
			return Choice{}, err
		}
	}
	return c, nil
}

// newApproxIndex returns an empty LRU tier.Cache of size blocks, rounded,
// at least one, and at most what an Index holds.
func newApproxIndex(size float64) (*tier.Cache, error) {
	if size > math.MaxInt32 {
		return nil, fmt.Errorf("approximate index of %.0f blocks, want at most %d", size, math.MaxInt32)
	}
	return tier.NewCache(kvevict.LRU, max(1, int(math.Round(size))), kvevict.WithTiming(false), kvevict.WithEvictionHistory(0))
}
