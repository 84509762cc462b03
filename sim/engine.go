package sim

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sagellm/kvevict/internal/stat"
	"github.com/sagellm/kvevict/tier"
)

// The engine in time: the pool of [Serve] runs steps back to back, each
// running sequence advancing one step per step time of the batch it runs
// in: a prefill chunk, or one decoded token. Steps are not aligned across
// sequences: a request admitted between two steps of the others starts
// its own at once, at the batch's rate, which keeps a pool without a
// clock (every step TokenTime, prefill free) what it always was. The step
// time is the cost model's for the batch as it is (engineClock.retime),
// so a sequence's next milestone is kept in steps, not in time: the
// engine's progress, v, counts the steps every running sequence has made
// since the start, unit to a step.

// engineClock is the engine's progress, the batch the step time depends on,
// and the time integrals of its requests and sequences.
type engineClock struct {
	cost        *tier.Cost // nil: every step takes unit ticks
	unit        int64      // progress per step, and ticks per step without cost
	maxBatch    int
	tokenBudget int

	v         int64   // progress at now, whole units
	frac      float64 // and its fraction of a unit, from 0 to 1
	stepTicks float64 // the current step's time, in ticks

	// The batch: the decoding sequences, their tokens when their vAt was
	// set and the sum of those vAt; the prefilling sequences' tokens
	// computed, and their chunks in flight.
	decoders              int
	decTokens             int64
	decVAt                float64 // a sum of progress: as an int64 it could overflow
	prefDone, chunkTokens int64
	chunkFLOPs            float64

	// The time integrals of the requests in the engine (arrived and not
	// finished) and of the sequences running, and the time it ran one.
	inSystem              int
	areaIn, areaRun, busy float64
	loads                 time.Duration // the loads from the tiers below
	rec                   *record       // the run's, shared by its engines
}

// record is each request's arrival, first token and finish, in ticks (-1
// before), over every engine of a run.
type record struct {
	arrival, first, finish []int64
	cut                    []bool // finished short (truncated)
	started                bool
	start                  int64 // the first arrival
	outTokens              int64
	w                      *Workload
	sessions               bool
	slo, tpotSLO           int64 // ticks; 0: no bound
}

// newRecord returns the record of w's requests, kept only with a cost
// model: without one a run has no times.
func newRecord(w *Workload, cfg *EngineConfig) *record {
	r := &record{w: w, sessions: w.GroupKind == "session",
		slo: int64(cfg.SLO / time.Microsecond), tpotSLO: int64(cfg.TPOTSLO / time.Microsecond)}
	if cfg.Cost != nil {
		n := len(w.Requests)
		r.arrival, r.first, r.finish, r.cut = make([]int64, n), make([]int64, n), make([]int64, n), make([]bool, n)
		for i := range n {
			r.arrival[i], r.first[i], r.finish[i] = -1, -1, -1
		}
	}
	return r
}

func newEngineClock(cfg *EngineConfig, tokenTime int64, rec *record) *engineClock {
	c := &engineClock{cost: cfg.Cost, unit: tokenTime, maxBatch: cfg.MaxBatch, tokenBudget: cfg.TokenBudget,
		stepTicks: float64(tokenTime), rec: rec}
	if c.cost != nil {
		c.unit = clockedUnit
	}
	return c
}

// clockedUnit is the progress of a step with a cost model: fine enough
// that a sequence's milestone, kept in whole units, comes within a tick of
// its time for steps up to seconds long.
const clockedUnit = 1 << 20

// at returns when progress v comes, from now: v is at least c.v. With the
// step time a whole unit, as without a clock, exactly now + v - c.v.
func (c *engineClock) at(now, v int64) int64 {
	d := v - c.v
	if c.stepTicks == float64(c.unit) && c.frac == 0 {
		return now + d
	}
	return now + int64(math.Round((float64(d)-c.frac)*c.stepTicks/float64(c.unit)))
}

// advance moves the clock from now to t, with running sequences running,
// and counts the time in the integrals. The progress's fraction is
// carried, not dropped: a long step, of many ticks a unit of progress,
// interrupted by many arrivals would otherwise lose a unit at each.
func (c *engineClock) advance(now, t int64, running int) {
	if t <= now {
		return
	}
	dt := t - now
	if c.stepTicks == float64(c.unit) && c.frac == 0 {
		c.v += dt
	} else {
		x := float64(dt)*float64(c.unit)/c.stepTicks + c.frac
		n := math.Floor(x)
		c.v += int64(n)
		c.frac = x - n
	}
	c.areaIn += float64(c.inSystem) * float64(dt)
	c.areaRun += float64(running) * float64(dt)
	if running > 0 {
		c.busy += float64(dt)
	}
}

// decodingTokens is the decoding sequences' tokens at progress c.v: each
// has made a token a step since its vAt.
func (c *engineClock) decodingTokens() int64 {
	return c.decTokens + int64((float64(c.decoders)*float64(c.v)-c.decVAt)/float64(c.unit))
}

// retime sets the step time from the batch as it is: without a cost model
// it stays a unit. A step of no work (a measured rate and nothing to read)
// still takes a nanosecond, so that the engine's progress stays finite in
// time.
func (c *engineClock) retime() {
	if c.cost == nil {
		return
	}
	ctx := c.decodingTokens()
	st := tier.Step{
		Tokens:   c.decoders + int(c.chunkTokens),
		FLOPs:    c.cost.Model().DecodeFLOPs(c.decoders, ctx) + c.chunkFLOPs,
		KVTokens: ctx + c.prefDone,
	}
	ns := c.cost.Step(st)
	c.stepTicks = max(float64(ns)/float64(time.Microsecond), 1e-3)
}

// budgetLeft is what the token budget leaves for one more chunk: no cap
// without one.
func (c *engineClock) budgetLeft() int {
	if c.tokenBudget == 0 {
		return math.MaxInt
	}
	return max(c.tokenBudget-c.decoders-int(c.chunkTokens), 0)
}

// addDecoder and dropDecoder count s in and out of the decoding batch.
func (c *engineClock) addDecoder(s *sequence) {
	c.decoders++
	c.decTokens += int64(s.tokens)
	c.decVAt += float64(s.vAt)
}

func (c *engineClock) dropDecoder(s *sequence) {
	c.decoders--
	c.decTokens -= int64(s.tokens)
	c.decVAt -= float64(s.vAt)
}

// beginChunk starts s's next prefill chunk: as much of its prompt left as
// the budget allows, perhaps nothing, in which case s waits a step.
func (c *engineClock) beginChunk(s *sequence, prompt int) {
	s.chunk = min(s.prefillLeft, c.budgetLeft())
	done := prompt - s.prefillLeft
	s.chunkFLOPs = c.cost.Model().PrefillFLOPs(done, done+s.chunk)
	c.chunkTokens += int64(s.chunk)
	c.chunkFLOPs += s.chunkFLOPs
}

// endChunk ends s's chunk in flight, its tokens computed.
func (c *engineClock) endChunk(s *sequence) {
	c.chunkTokens -= int64(s.chunk)
	c.chunkFLOPs -= s.chunkFLOPs
	if c.chunkTokens == 0 {
		c.chunkFLOPs = 0 // no float residue once no chunk is in flight
	}
	s.chunk, s.chunkFLOPs = 0, 0
}

// arrive counts request r arrived at now.
func (c *engineClock) arrive(r int, now int64) {
	c.inSystem++
	rec := c.rec
	if !rec.started {
		rec.started, rec.start = true, now
	}
	if rec.arrival != nil {
		rec.arrival[r] = now
	}
}

// done counts request r finished for good at now.
func (c *engineClock) done(r int, now int64) {
	c.inSystem--
	if c.rec.finish != nil {
		c.rec.finish[r] = now
	}
}

// firstToken records request r's first token at now, the first time only.
func (c *engineClock) firstToken(r int, now int64) {
	if rec := c.rec; rec.first != nil && rec.first[r] < 0 {
		rec.first[r] = now
	}
}

// Times are the figures of a [Serve] run in time (ServeConfig.Cost): all
// modelled by the cost model, not measured; in seconds unless named
// otherwise. Percentiles are nearest-rank. The span is from the first
// arrival to the last finish.
type Times struct {
	// TTFT is each request's time to first token: from its arrival to the
	// end of its prefill, over the requests that got one (not rejected).
	TTFTMean float64 `json:"ttft_mean_s"`
	TTFTP50  float64 `json:"ttft_p50_s"`
	TTFTP90  float64 `json:"ttft_p90_s"`
	TTFTP99  float64 `json:"ttft_p99_s"`
	// TPOT is each request's time per output token after the first: from
	// its first token to its finish over its output tokens less one, over
	// the requests of two tokens or more that finished whole.
	TPOTMean float64 `json:"tpot_mean_s"`
	TPOTP50  float64 `json:"tpot_p50_s"`
	TPOTP90  float64 `json:"tpot_p90_s"`
	TPOTP99  float64 `json:"tpot_p99_s"`
	// E2E is each request's time from its arrival to its finish, over all
	// requests (a rejected one finishes as it arrives).
	E2EMean float64 `json:"e2e_mean_s"`
	E2EP50  float64 `json:"e2e_p50_s"`
	E2EP90  float64 `json:"e2e_p90_s"`
	E2EP99  float64 `json:"e2e_p99_s"`
	// ThroughputTokensPerS is the output tokens of the requests that
	// finished whole over the span; ArrivalRatePerS the requests over it.
	ThroughputTokensPerS float64 `json:"throughput_tokens_per_s"`
	ArrivalRatePerS      float64 `json:"arrival_rate_per_s"`
	// MeanInSystem is the requests arrived and not finished, averaged over
	// the span, counted by the engine as they arrive and finish (Little's
	// law sets it against ArrivalRatePerS x E2EMean); MeanRunning the
	// sequences running, likewise.
	MeanInSystem float64 `json:"mean_in_system"`
	MeanRunning  float64 `json:"mean_running"`
	// BusiestUtilization is the share of the span the engine ran a
	// sequence.
	BusiestUtilization float64 `json:"busiest_utilization"`
	// LoadSeconds is the time of the loads from the tiers below the GPU
	// (ServeConfig.Tiers, ClusterConfig.Tiers), every load's transfer over
	// its link summed, each engine's: 0 without tiers. A request waits for
	// its loads before its prefill, and for the loads queued on a link
	// before its own: that wait is in its TTFT, not here.
	LoadSeconds float64 `json:"load_seconds"`
	// SessionCompletion is, when groups are sessions, each session's time
	// from its first request's arrival to its last one's finish.
	SessionCompletionP50 float64 `json:"session_completion_p50_s,omitempty"`
	SessionCompletionP99 float64 `json:"session_completion_p99_s,omitempty"`
	// Goodput is the share of the requests whose TTFT is at most
	// ServeConfig.SLO and whose TPOT is at most ServeConfig.TPOTSLO (each
	// when set; a request of one token has no TPOT to miss), DistServe's
	// measure; a rejected request misses.
	Goodput float64 `json:"goodput"`
}

// times sums the run's times up over its engines' clocks. O(n log n) for
// n requests.
func (c *record) times(clocks []*engineClock) *Times {
	t := &Times{}
	var ttft, tpot, e2e []int64
	end := c.start
	good := 0
	for r := range c.arrival {
		a, f := c.arrival[r], c.finish[r]
		if a < 0 || f < 0 {
			continue
		}
		end = max(end, f)
		e2e = append(e2e, f-a)
		if c.first[r] < 0 {
			continue
		}
		ttft = append(ttft, c.first[r]-a)
		ok := c.slo == 0 || c.first[r]-a <= c.slo
		if out := c.w.Requests[r].OutputTokens; out > 1 && !c.cut[r] {
			tpot = append(tpot, (f-c.first[r])/int64(out-1))
			ok = ok && (c.tpotSLO == 0 || tpot[len(tpot)-1] <= c.tpotSLO)
		}
		if ok {
			good++
		}
	}
	if len(e2e) > 0 {
		t.Goodput = float64(good) / float64(len(e2e))
	}
	t.TTFTMean, t.TTFTP50, t.TTFTP90, t.TTFTP99 = summary(ttft)
	t.TPOTMean, t.TPOTP50, t.TPOTP90, t.TPOTP99 = summary(tpot)
	t.E2EMean, t.E2EP50, t.E2EP90, t.E2EP99 = summary(e2e)
	if span := float64(end - c.start); span > 0 {
		t.ThroughputTokensPerS = float64(c.outTokens) / (span / 1e6)
		t.ArrivalRatePerS = float64(len(e2e)) / (span / 1e6)
		for _, k := range clocks {
			t.MeanInSystem += k.areaIn / span
			t.MeanRunning += k.areaRun / span
			t.BusiestUtilization = max(t.BusiestUtilization, k.busy/span)
		}
	}
	for _, k := range clocks {
		t.LoadSeconds += k.loads.Seconds()
	}
	if c.sessions {
		t.SessionCompletionP50, t.SessionCompletionP99 = sessionCompletion(c.w, c.arrival, c.finish)
	}
	return t
}

// sessionCompletion is the median and 99th percentile of the sessions'
// completion times of w, in seconds, from each request's arrival and
// finish in ticks (-1: none).
func sessionCompletion(w *Workload, arrival, finish []int64) (p50, p99 float64) {
	type span struct{ first, last int64 }
	by := map[uint64]span{}
	for r := range arrival {
		if arrival[r] < 0 || finish[r] < 0 {
			continue
		}
		g := w.Requests[r].Group
		s, ok := by[g]
		if !ok {
			s = span{arrival[r], finish[r]}
		}
		s.first, s.last = min(s.first, arrival[r]), max(s.last, finish[r])
		by[g] = s
	}
	all := make([]int64, 0, len(by))
	for _, s := range by {
		all = append(all, s.last-s.first)
	}
	_, p50, _, p99 = summary(all)
	return p50, p99
}

// summary returns the mean, median, 90th and 99th percentiles of ticks, in
// seconds; zeros for none. It sorts ticks.
func summary(ticks []int64) (mean, p50, p90, p99 float64) {
	if len(ticks) == 0 {
		return 0, 0, 0, 0
	}
	slices.Sort(ticks)
	var sum float64
	for _, x := range ticks {
		sum += float64(x)
	}
	sec := func(x int64) float64 { return float64(x) / 1e6 }
	return sum / float64(len(ticks)) / 1e6, sec(stat.Percentile(ticks, 50)), sec(stat.Percentile(ticks, 90)), sec(stat.Percentile(ticks, 99))
}

// VLLMSchedulerDefaults returns the sequence cap and the token budget vLLM
// gives an OpenAI-compatible server on gpu (vllm/engine/arg_utils.py,
// EngineArgs.get_batch_defaults; docs/simulator.md cites the version):
// 1,024 sequences and 8,192 tokens on a GPU of 70 GiB or more that is not
// an A100, else 256 and 2,048.
func VLLMSchedulerDefaults(gpu tier.GPUSpec) (maxBatch, tokenBudget int) {
	if gpu.MemoryBytes >= 70<<30 && !strings.Contains(strings.ToLower(gpu.Name), "a100") {
		return 1024, 8192
	}
	return 256, 2048
}
