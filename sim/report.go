package sim

import (
	"slices"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/internal/idmap"
	"github.com/sagellm/kvevict/internal/rank"
	"github.com/sagellm/kvevict/internal/reprefill"
	"github.com/sagellm/kvevict/internal/stat"
)

// BeladyName is the Strategy of the reports of the offline optimum.
const BeladyName = "belady"

// Report is how one strategy did on one workload at one capacity. Its JSON
// form is the fixed shape `kvevict compare -format json` prints.
type Report struct {
	Strategy string `json:"strategy"` // a kvevict strategy, or "belady"
	// Hints names the hint source of the row's workload (a HintSource's
	// String), set by the caller that chose it; "" when none was chosen.
	Hints string `json:"hints,omitempty"`
	Mode  string `json:"mode"` // "replay" or "serve"
	// Granularity is what one eviction candidate was: "block" for a
	// replay (one block per candidate by construction) and for Belady;
	// in serve mode the ServeConfig's ("sequence", "tail" or "block").
	Granularity    string `json:"granularity"`
	CapacityBlocks int    `json:"capacity_blocks"`

	// HitRatio is block hits / block references: the prompt blocks found in
	// the longest resident prefix, over all prompt blocks.
	HitRatio      float64 `json:"hit_ratio"`
	TokenHitRatio float64 `json:"token_hit_ratio"` // prompt tokens in hit blocks / prompt tokens
	BlockHits     int64   `json:"block_hits"`
	BlockRefs     int64   `json:"block_refs"`

	// EvictedBlocks counts the blocks evicted (freed) over the run: one per
	// block, whatever the granularity of the victim that held it.
	// RePrefilledBlocks counts evicted blocks that were referenced again
	// later and so computed twice; each eviction counts at most once, so
	// RePrefilledBlocks <= EvictedBlocks. BlockRePrefillRate is
	// RePrefilledBlocks / EvictedBlocks, a per-block ratio (the root
	// package's Metrics.RePrefillRate is per evicted sequence); 0 when
	// nothing was evicted.
	EvictedBlocks      int64   `json:"evicted_blocks"`
	RePrefilledBlocks  int64   `json:"reprefilled_blocks"`
	BlockRePrefillRate float64 `json:"block_reprefill_rate"`
	// RePrefillTokens are the prompt tokens computed again because of
	// evictions (in serve mode also the blocks after an evicted one in a
	// prompt, and preempted requests' recomputation; see Serve).
	RePrefillTokens int64 `json:"reprefill_tokens"`

	// PrefillTokens are the prompt tokens computed (missed); an unbounded
	// cache would compute UnboundedPrefillTokens. ThroughputImpact is
	// PrefillTokens / UnboundedPrefillTokens - 1: the extra prefill work
	// the capacity costs.
	PrefillTokens          int64   `json:"prefill_tokens"`
	UnboundedPrefillTokens int64   `json:"unbounded_prefill_tokens"`
	ThroughputImpact       float64 `json:"throughput_impact"`

	// Utilization is the mean fraction of the pool's blocks holding KV
	// (in use or cached), sampled after every request or step.
	Utilization float64 `json:"utilization"`
	// HitFairness is Jain's index over FairnessOver ("session" or
	// "tenant") of each group's hit ratio relative to an unbounded
	// cache's, over the groups that could hit at all: 1 when every group
	// gets the same share of its attainable hits, 1/n when one of n
	// groups gets them all. The root package's Metrics.FairnessScore is
	// computed differently, over how often each sequence was evicted.
	HitFairness  float64 `json:"hit_fairness"`
	FairnessOver string  `json:"fairness_over"`

	// Serve mode only: running sequences preempted (and recomputed), requests
	// whose prompt could not fit the pool, and sequences finished early
	// because the pool could not hold them even alone.
	Preemptions int `json:"preemptions"`
	Rejected    int `json:"rejected"`
	Truncated   int `json:"truncated"`

	// RePrefillTokensP50 and RePrefillTokensP99 are percentiles (nearest
	// rank) of the re-prefill tokens of each returning request, the
	// time-to-first-token cost a session pays for the KV it lost, over
	// ReturningRequests requests; zero when there are none. Serve mode
	// only, and only when groups are sessions: a returning request is the
	// first admission of a session's request (not a preempted request's
	// recomputation) while a block of the longest common prefix of its
	// prompt and the prompt of the session's previous admitted request is
	// no longer in the pool: the session lost KV since its last turn. Its
	// re-prefill tokens are those RePrefillTokens counts at that admission.
	RePrefillTokensP50 int64 `json:"reprefill_tokens_p50"`
	RePrefillTokensP99 int64 `json:"reprefill_tokens_p99"`
	ReturningRequests  int   `json:"returning_requests"`

	// EvictionP50 and EvictionP99 are percentiles of the latency of one
	// eviction's choice in nanoseconds: Index.Evict's, or
	// Policy.SelectVictims' where no Index serves (see Replay); zero for
	// Belady.
	EvictionP50 int64 `json:"eviction_p50_ns"`
	EvictionP99 int64 `json:"eviction_p99_ns"`
	// ReleasedEvicted and LeasedEvicted count, with hints, the evicted
	// blocks of sequences (in a replay, of requests) that were final, and
	// those evicted under a live lease (a lease broken: only leased blocks
	// were left to take).
	ReleasedEvicted int64 `json:"released_evicted_blocks,omitempty"`
	LeasedEvicted   int64 `json:"leased_evicted_blocks,omitempty"`
	// LeasesHonoured counts, in serve mode with hints, the leases of
	// cached sequences kept until a request reused their blocks or until
	// they ended with blocks still cached; LeasesWasted those that ended
	// with no request reusing them. A lease broken by an eviction counts
	// in LeasedEvicted instead, and one still live when the run ends in
	// none. A replay counts neither: its candidates are blocks, each
	// with a lease of its own.
	LeasesHonoured int64 `json:"leases_honoured,omitempty"`
	LeasesWasted   int64 `json:"leases_wasted,omitempty"`
	// Tiers are each tier's counts, the GPU first, in [Serve] with
	// ServeConfig.Tiers; nil otherwise (a [TierReport] has its own).
	Tiers []TierStats `json:"tiers,omitempty"`
	// Times are the run's times, for a serve run with a clock
	// (ServeConfig.Cost); nil otherwise.
	*Times
}

// tally accumulates a Report's counts as a run goes.
type tally struct {
	w                 *Workload
	ceil              *ceiling
	hits, refs        int64
	hitTokens, tokens int64
	prefill           int64
	// releasedEvicted and leasedEvicted are Report's, counted by hinted;
	// leasesHonoured and leasesWasted too, counted by leaseHonoured.
	releasedEvicted, leasedEvicted int64
	leasesHonoured, leasesWasted   int64
	// evictions remembers every evicted block, by hash, with the sequence
	// it was evicted from, and counts the references that return to one:
	// RePrefilledBlocks.
	evictions       reprefill.Ledger[uint64]
	rePrefillTokens int64
	loads           int64 // blocks made resident (replay): MIN minimises these
	utilSum         float64
	utilSamples     int64
	groupHits       map[uint64]int64
	latencies       []time.Duration
	returning       []int64 // re-prefill tokens of each returning request (serve)
}

func newTally(w *Workload, c *ceiling) *tally {
	return &tally{w: w, ceil: c, groupHits: make(map[uint64]int64),
		evictions: reprefill.New[uint64](reprefill.Unbounded)}
}

// request counts request r's prefix of hit blocks.
func (t *tally) request(r int, hit int) {
	req := &t.w.Requests[r]
	t.refs += int64(len(req.HashIDs))
	t.hits += int64(hit)
	t.groupHits[req.Group] += int64(hit)
	for i := range req.HashIDs {
		n := int64(blockTokens(req, i, t.w.BlockTokens))
		t.tokens += n
		if i < hit {
			t.hitTokens += n
		} else {
			t.prefill += n
		}
	}
}

func (t *tally) utilization(used, capacity int) {
	t.utilSum += float64(used) / float64(capacity)
	t.utilSamples++
}

func (t *tally) report(strategy, mode string, capacity int) Report {
	rep := Report{
		Strategy:               strategy,
		Mode:                   mode,
		CapacityBlocks:         capacity,
		BlockHits:              t.hits,
		BlockRefs:              t.refs,
		EvictedBlocks:          int64(t.evictions.Evictions()),
		RePrefilledBlocks:      int64(t.evictions.RePrefills()),
		RePrefillTokens:        t.rePrefillTokens,
		PrefillTokens:          t.prefill,
		UnboundedPrefillTokens: t.ceil.prefill,
		FairnessOver:           t.w.GroupKind,
		HitFairness:            t.fairness(),
	}
	if mode == "replay" {
		rep.Granularity = string(GranularityBlock)
	}
	rep.HitRatio = ratio(t.hits, t.refs)
	rep.TokenHitRatio = ratio(t.hitTokens, t.tokens)
	rep.BlockRePrefillRate = t.evictions.Rate()
	if t.ceil.prefill > 0 {
		rep.ThroughputImpact = float64(t.prefill)/float64(t.ceil.prefill) - 1
	}
	if t.utilSamples > 0 {
		rep.Utilization = t.utilSum / float64(t.utilSamples)
	}
	if len(t.returning) > 0 {
		slices.Sort(t.returning)
		rep.RePrefillTokensP50 = stat.Percentile(t.returning, 50)
		rep.RePrefillTokensP99 = stat.Percentile(t.returning, 99)
		rep.ReturningRequests = len(t.returning)
	}
	if len(t.latencies) > 0 {
		slices.Sort(t.latencies)
		rep.EvictionP50 = int64(stat.Percentile(t.latencies, 50))
		rep.EvictionP99 = int64(stat.Percentile(t.latencies, 99))
	}
	rep.ReleasedEvicted, rep.LeasedEvicted = t.releasedEvicted, t.leasedEvicted
	rep.LeasesHonoured, rep.LeasesWasted = t.leasesHonoured, t.leasesWasted
	return rep
}

// leaseHonoured counts a lease kept until a request reused its blocks
// (read) or until it ended unread.
func (t *tally) leaseHonoured(read bool) {
	t.leasesHonoured++
	if !read {
		t.leasesWasted++
	}
}

// hinted counts an evicted block of a sequence whose hints are h, at tick
// now.
func (t *tally) hinted(h *kvevict.Hints, now int64) {
	r, class := rank.HintRank((*rank.Hint)(h), now)
	if class != rank.ClassApart {
		return
	}
	switch r {
	case rank.ReleasedRank:
		t.releasedEvicted++
	case rank.LeasedRank:
		t.leasedEvicted++
	}
}

// fairness is Jain's index (sum x)^2 / (n sum x^2) of x = hits / attainable
// hits per group, over groups with attainable hits.
func (t *tally) fairness() float64 {
	var sum, sum2 float64
	n := 0
	groups := make([]uint64, 0, len(t.ceil.groupHits))
	for g := range t.ceil.groupHits {
		groups = append(groups, g)
	}
	slices.Sort(groups) // a fixed order makes the float sum reproducible
	for _, g := range groups {
		ceil := t.ceil.groupHits[g]
		if ceil == 0 {
			continue
		}
		x := float64(t.groupHits[g]) / float64(ceil)
		sum += x
		sum2 += x * x
		n++
	}
	return stat.Jain(sum, sum2, n) // 1 when no group could hit, or all got nothing
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// ceiling is what an unbounded cache achieves: a block hits when every
// block of the prefix up to it was referenced before.
type ceiling struct {
	hits      int64
	prefill   int64
	groupHits map[uint64]int64
	distinct  int // distinct blocks referenced: the most a pool ever holds
}

func computeCeiling(w *Workload) *ceiling {
	c := &ceiling{groupHits: make(map[uint64]int64)}
	var seen idmap.Map[struct{}]
	for r := range w.Requests {
		req := &w.Requests[r]
		hit := 0
		for hit < len(req.HashIDs) {
			if _, ok := seen.Get(req.HashIDs[hit]); !ok {
				break
			}
			hit++
		}
		c.hits += int64(hit)
		c.groupHits[req.Group] += int64(hit)
		for i := hit; i < len(req.HashIDs); i++ { // the hits were seen already
			c.prefill += int64(blockTokens(req, i, w.BlockTokens))
			seen.Put(req.HashIDs[i], struct{}{})
		}
	}
	c.distinct = seen.Len()
	return c
}
