package kvevict

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/sagellm/kvevict/internal/options"
	"github.com/sagellm/kvevict/internal/rank"
	"github.com/sagellm/kvevict/internal/reprefill"
	"github.com/sagellm/kvevict/internal/stat"
)

// Metrics is a snapshot of how a policy's or an index's choices went, in
// the same fields for both. Selections that failed, and those with
// requiredBlocks == 0, count nothing.
type Metrics struct {
	Strategy Strategy

	// Selections counts the selections that evicted something: calls to
	// a Policy's SelectVictims, or an Index's Evict and EvictAppend.
	Selections uint64
	// TotalEvictions counts victims: sequences evicted, wholly or in part.
	TotalEvictions uint64
	// PartialEvictions counts victims that lost only a tail of their blocks.
	PartialEvictions uint64
	// EvictedBlocks counts blocks freed by all selections.
	EvictedBlocks uint64

	// AvgEvictionTime is the mean Result.Elapsed over Selections.
	AvgEvictionTime time.Duration
	// P99EvictionTime is the 99th percentile of Result.Elapsed over the most
	// recent selections (up to 1024 of them).
	P99EvictionTime time.Duration

	// RePrefills counts evictions followed by a request of the same
	// sequence: prefill work the server had to redo. For a Policy the
	// request is an UpdateAccess of the evicted ID; for an Index, an Add
	// of an ID an Evict took whole, or the first Touch of a sequence a
	// partial eviction trimmed (UpdateAccess feeds an Index's adaptive
	// history only). Each eviction counts at most once, and only while it
	// is among the remembered evictions (see [WithEvictionHistory]).
	RePrefills uint64
	// RePrefillRate is RePrefills / TotalEvictions, 0 when nothing was
	// evicted. Lower is better: evicted sequences were rarely needed again.
	RePrefillRate float64
	// FairnessScore is Jain's index, (sum x)^2 / (n sum x^2), where x is
	// how many times each of n sequences appears among the remembered
	// evictions. 1 when every evicted sequence was evicted equally often
	// (or none was); it falls toward 1/n as one sequence is evicted over and
	// over while others are spared.
	FairnessScore float64

	// ReleasesEvicted counts victims whose [Hints] said Released.
	ReleasesEvicted uint64
	// LeasesBroken counts victims taken under a live soft lease: the need
	// could be covered only by taking leased blocks.
	LeasesBroken uint64
	// LeasesHonoured counts the leases kept until a request came under
	// them ([Index.Touch]) or until they ended with their sequence held,
	// at their end tick or replaced or withdrawn by [Index.Update].
	// LeasesWasted counts those that ended with no request under them:
	// they kept blocks that nothing read again. An Index counts both; a
	// Policy, which sees only each call's candidates and never a lease's
	// end, counts neither.
	LeasesHonoured, LeasesWasted uint64
	// LeasedBlocks is how many blocks were held under a live lease, soft
	// or hard, by the candidates of the latest selection that evicted
	// something (a Policy), or by the index's candidates now (an Index).
	LeasedBlocks int
}

// stopwatch times selections for Result.Elapsed, or reads no clock when
// timing is off. It reads the monotonic clock alone: an offset from an
// origin taken once is one clock read, where time.Now reads the wall clock
// too.
type stopwatch struct {
	origin time.Time
	on     bool
}

func newStopwatch(cfg *options.Config) stopwatch {
	if cfg.NoTiming {
		return stopwatch{}
	}
	return stopwatch{origin: time.Now(), on: true}
}

// start returns the moment a selection starts, for elapsed.
func (w *stopwatch) start() time.Duration {
	if !w.on {
		return 0
	}
	return time.Since(w.origin)
}

// elapsed returns the time since start, 0 when timing is off.
func (w *stopwatch) elapsed(start time.Duration) time.Duration {
	if !w.on {
		return 0
	}
	return time.Since(w.origin) - start
}

// latencyWindow is how many recent selection times P99EvictionTime covers.
const latencyWindow = 1024

// stats accumulates a policy's metrics. Its memory is bounded by the history
// cap, so a server that runs for months does not grow it.
type stats struct {
	strategy         Strategy
	selections       uint64
	partialEvictions uint64
	evictedBlocks    uint64
	totalTime        time.Duration
	latencies        []time.Duration // ring of the latest selection times
	nextLatency      int

	// evictions counts the victims, by sequence, for TotalEvictions, and
	// remembers the last WithEvictionHistory of them for RePrefills,
	// RePrefillRate and FairnessScore: an access (UpdateAccess, or an
	// Index's Add or Touch) goes to it.
	evictions reprefill.Ledger[struct{}]

	releasesEvicted, leasesBroken uint64
	leasesHonoured, leasesWasted  uint64
	leasedBlocks                  int
}

// leaseHonoured counts a lease kept until a request came under it (read)
// or until it ended unread.
func (s *stats) leaseHonoured(read bool) {
	s.leasesHonoured++
	if !read {
		s.leasesWasted++
	}
}

// newStats returns the stats of strategy s configured by cfg; without
// eviction history no eviction is remembered.
func newStats(s Strategy, cfg *options.Config) stats {
	return stats{strategy: s, evictions: reprefill.New[struct{}](cfg.EvictionHistory)}
}

// record counts one successful selection, of which partial victims kept a
// head of their blocks. O(k) for k victims.
func (s *stats) record(res *Result, partial int) {
	s.partialEvictions += uint64(partial)
	s.selections++
	s.totalTime += res.Elapsed
	if len(s.latencies) < latencyWindow {
		s.latencies = append(s.latencies, res.Elapsed)
	} else {
		s.latencies[s.nextLatency] = res.Elapsed
		s.nextLatency = (s.nextLatency + 1) % latencyWindow
	}
	s.evictedBlocks += uint64(res.FreedBlocks)
	for i := range res.Victims {
		s.evictions.Evict(res.Victims[i].ID, struct{}{})
	}
}

// hinted counts victim c, taken at tick now, by its hints.
func (s *stats) hinted(c *Candidate, now int64) {
	if !c.hinted() {
		return
	}
	r, class := hintRank(c, now)
	if class != rank.ClassApart {
		return
	}
	switch r {
	case rank.ReleasedRank:
		s.releasesEvicted++
	case rank.LeasedRank:
		s.leasesBroken++
	}
}

// snapshot returns the metrics but P99EvictionTime, and a copy of the
// latency window to compute it from. It copies the window rather than
// sorting it, so that a caller holding a lock releases it before [p99]
// sorts the copy.
func (s *stats) snapshot() (m Metrics, window []time.Duration) {
	m = Metrics{
		Strategy:         s.strategy,
		Selections:       s.selections,
		TotalEvictions:   s.evictions.Evictions(),
		PartialEvictions: s.partialEvictions,
		EvictedBlocks:    s.evictedBlocks,
		RePrefills:       s.evictions.RePrefills(),
		RePrefillRate:    s.evictions.Rate(),
		FairnessScore:    s.evictions.Fairness(),
		ReleasesEvicted:  s.releasesEvicted,
		LeasesBroken:     s.leasesBroken,
		LeasesHonoured:   s.leasesHonoured,
		LeasesWasted:     s.leasesWasted,
		LeasedBlocks:     s.leasedBlocks,
	}
	if s.selections > 0 {
		m.AvgEvictionTime = s.totalTime / time.Duration(s.selections)
		window = slices.Clone(s.latencies)
	}
	return m, window
}

// p99 returns the 99th percentile of a latency window, sorting it in
// place; 0 for an empty window. O(w log w).
func p99(window []time.Duration) time.Duration {
	if len(window) == 0 {
		return 0
	}
	slices.Sort(window)
	return stat.Percentile(window, 99)
}

// logEviction writes one debug record for a selection, if the logger wants it.
func logEviction(l *slog.Logger, res *Result) {
	ctx := context.Background()
	if !l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	ids := make([]uint64, len(res.Victims))
	for i, v := range res.Victims {
		ids[i] = v.ID
	}
	l.LogAttrs(ctx, slog.LevelDebug, "kvevict: evicted",
		slog.String("strategy", string(res.Strategy)),
		slog.Any("victims", ids),
		slog.Int("freed_blocks", res.FreedBlocks),
		slog.Duration("elapsed", res.Elapsed))
}
