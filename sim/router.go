package sim

import (
	"errors"
	"fmt"
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
	prefix     []int      // scratch: the prefix believed held, per engine
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
			est := e.Wait() + s.cost.Prefill(tokensBefore(req, s.prefix[i], s.cost.BlockTokens()), req.InputTokens)
			if i == 0 || est < least || est == least && e.Load() < engines[pick].Load() {
				least, pick = est, i
			}
		}
		return Choice{Engine: pick, Predicted: s.prefix[pick]}
	}
	top := math.Inf(-1)
	for i, e := range engines {
		if score := float64(s.prefix[i]) - s.loadWeight*float64(e.Load()); score > top {
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

// NewTTFTRouter returns a scoring router that believes m, fed with the
// engines' events as [NewMirrorRouter]'s is, and sends each request to the
// engine where cost estimates its time to first token lowest: the
// engine's queue ([Engine.Wait]) plus the prefill of the prompt past the
// prefix m says it holds. That is Mooncake's KVCache-centric scheduling
// (FAST '25, its Algorithm 1) without KV transfers between engines. Its
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
	return &mirrored{scores: scores{cost: cost}, m: m}, nil
}

type mirrored struct {
	scores
	m Mirror
}

func (r *mirrored) Route(req *Request, engines []*Engine) (Choice, error) {
	r.prefix = r.prefix[:0]
	for i, e := range engines {
		if events := e.Events(); len(events) > 0 {
			if err := r.m.Apply(i, events); err != nil {
				return Choice{}, err
			}
		}
		r.prefix = append(r.prefix, r.m.CachedPrefix(i, req.HashIDs))
	}
	return r.best(req, engines), nil
}

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
