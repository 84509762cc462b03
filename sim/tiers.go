package sim

import (
	"fmt"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/tier"
)

// Tiers are the tiers below a GPU pool: a tiered replay's ([TierConfig]),
// serve mode's pool's ([ServeConfig]) and each engine's of a cluster
// ([ClusterConfig]). The GPU is the pool, of Config.Capacity blocks
// evicting by the strategy under test.
type Tiers struct {
	// Below are the tiers under the GPU, top first, each its own capacity
	// and strategy.
	Below     []tier.Level
	Write     tier.Write // WriteThrough if zero
	Threshold int        // WriteSelective's
	Exclusive bool
}

// config is the hierarchy of t under a GPU of gpu, its events, if any, to
// events.
func (t *Tiers) config(gpu tier.Level, events func(tier.Event)) tier.Config {
	return tier.Config{Levels: append([]tier.Level{gpu}, t.Below...), Write: t.Write, Threshold: t.Threshold,
		Exclusive: t.Exclusive, Events: events}
}

// TierConfig is a replay across tiers: the GPU is the replay's pool, of
// Config.Capacity blocks evicting by the strategy under test, and Tiers
// are under it.
type TierConfig struct {
	Config
	Tiers
	// Cost prices each request in time: its loads from the tiers below and
	// the prefill of its misses. Its block tokens must be the workload's.
	// Without it the report's seconds are 0.
	Cost *tier.Cost
}

// TierStats is one tier's part of a [TierReport], in blocks and bytes.
type TierStats struct {
	Medium         tier.Medium `json:"medium"`
	CapacityBlocks int         `json:"capacity_blocks"`
	Strategy       string      `json:"strategy"`
	// Hits are the request blocks this tier served: the GPU's prefix
	// hits, or the blocks loaded from a lower tier.
	Hits int64 `json:"hits"`
	// StoredBlocks entered the tier, EvictedBlocks were its strategy's
	// victims, and FailedStores were offered and not stored.
	StoredBlocks  int64 `json:"stored_blocks"`
	EvictedBlocks int64 `json:"evicted_blocks"`
	FailedStores  int64 `json:"failed_stores"`
	// BytesRead are the bytes loaded from the tier to the GPU and
	// BytesWritten those stored into it, by the cost model's block size (0
	// on the GPU, and without a cost model). WriteAmplification is
	// BytesWritten / BytesRead: bytes written for each byte that came back
	// (0 when none did).
	BytesRead          int64   `json:"bytes_read"`
	BytesWritten       int64   `json:"bytes_written"`
	WriteAmplification float64 `json:"write_amplification"`
}

// TierReport is how one GPU strategy did over a hierarchy of tiers. Its
// Report counts a block as a hit when any tier served it (HitRatio, the
// prefill tokens) and the GPU's evictions (EvictedBlocks, whose
// re-prefills are the evicted blocks computed again, not loaded).
type TierReport struct {
	Report
	Write     string `json:"write"`     // through, selective=N or back
	Inclusion string `json:"inclusion"` // inclusive or exclusive
	// Tiers are each tier's counts, the GPU first, as Report.Tiers are in
	// serve mode, which this field hides: a tiered replay sets this one,
	// whose JSON key stands where compare -tier's rows have always had it,
	// null on Belady's.
	Tiers []TierStats `json:"tiers"`
	// GPUHits are the blocks found on the GPU, Misses those computed.
	GPUHits int64 `json:"gpu_hits"`
	Misses  int64 `json:"misses"`
	// PrefillSeconds is the modelled time of every request's prefill: the
	// recompute of its misses (ComputeSeconds) and the loads of its hits
	// below the GPU (LoadSeconds), one after the other. UnpaidLoads counts
	// the loads, one per tier and request, that took longer than
	// recomputing their blocks would have.
	PrefillSeconds float64 `json:"prefill_seconds"`
	ComputeSeconds float64 `json:"compute_seconds"`
	LoadSeconds    float64 `json:"load_seconds"`
	UnpaidLoads    int64   `json:"unpaid_loads"`
}

func (c *TierConfig) validate(w *Workload) error {
	if err := c.Config.validate(w); err != nil {
		return err
	}
	if len(c.Below) == 0 {
		return fmt.Errorf("sim: a tiered replay needs at least one tier below the GPU")
	}
	if c.Cost != nil && c.Cost.BlockTokens() != w.BlockTokens {
		return fmt.Errorf("sim: the cost model's blocks are %d tokens, the workload's %d", c.Cost.BlockTokens(), w.BlockTokens)
	}
	return nil
}

// write names the write policy as the command's -write flag does.
func (c *Tiers) write() string {
	switch c.Write {
	case tier.WriteSelective:
		return fmt.Sprintf("selective=%d", c.Threshold)
	case 0:
		return tier.WriteThrough.String()
	}
	return c.Write.String()
}

// ReplayTiers is [Replay] over a hierarchy of tiers (package tier): the
// GPU, of cfg.Capacity blocks under strategy s, is the plain replay's
// pool, and below it are cfg.Below. For each request in order: its hits
// are the run of its blocks on the GPU, then the run after it on each
// tier below ([tier.Hierarchy.Lookup]); those below are loaded, the
// request's blocks admitted to the GPU as a plain replay admits them
// (evicting under pressure, demoting under write-back), and offered to the
// tiers below as the write policy says ([tier.Hierarchy.Request]). With no
// tier below it would be Replay, hit for hit; the GPU's hits are Replay's
// whatever lies below, but for Auto above an exclusive tier, which
// [tier.New] tells of the tiers below ([kvevict.WithTierBelow]). A
// workload whose requests carry hints has them taken by every tier as
// Replay's cache takes them ([tier.Hierarchy.RequestHints]): a block
// demoted keeps its hints; vLLM's host tier (tier.WriteVLLM) is refused
// them.
func ReplayTiers(w *Workload, s kvevict.Strategy, cfg TierConfig) (TierReport, error) {
	if err := cfg.validate(w); err != nil {
		return TierReport{}, err
	}
	// The GPU's options are a plain replay's (see replay), so that the GPU
	// alone evicts as Replay does.
	gpuOpts := []kvevict.Option{kvevict.WithEvictionHistory(0)}
	gpuOpts = append(gpuOpts, replayPool(w, cfg.Capacity).Options(s)...)
	tc := cfg.config(tier.Level{Medium: tier.GPU, Capacity: cfg.Capacity, Strategy: s,
		Options: append(gpuOpts, cfg.Options...)}, nil)
	levels := tc.Levels
	h, err := tier.New(tc)
	if err != nil {
		return TierReport{}, fmt.Errorf("sim: %w", err)
	}
	ceil := computeCeiling(w)
	t := newTally(w, ceil)
	var gpuHits int64
	var clock clock
	hinted := w.hinted()
	for i := range w.Requests {
		req := &w.Requests[i]
		var m *tier.Match
		if hinted {
			tick, hints := req.tickAt()
			m, err = h.RequestHints(req.HashIDs, kvevict.Priority(req.Priority), hints, tick)
		} else {
			m, err = h.Request(req.HashIDs, kvevict.Priority(req.Priority))
		}
		if err != nil {
			return TierReport{}, fmt.Errorf("sim: %s, request %d: %w", s, i, err)
		}
		if cfg.Cost != nil {
			clock.request(cfg.Cost, levels, req, m, w.BlockTokens)
		}
		hits := m.Hits()
		t.request(i, hits)
		gpuHits += int64(m.Runs[0])
		// A block the GPU holds has no eviction pending: the request
		// it entered with cleared it, and none was recorded since.
		for j := m.Runs[0]; j < len(req.HashIDs); j++ {
			id := req.HashIDs[j]
			if j < hits {
				t.evictions.Clear(id) // loaded: not computed again
			} else if _, again := t.evictions.Access(id); again {
				t.rePrefillTokens += int64(blockTokens(req, j, w.BlockTokens))
			}
		}
		for _, id := range h.Victims(0) {
			t.evictions.Evict(id, 0)
		}
		if d, ok := h.GPUSelection(); ok {
			t.latencies = append(t.latencies, d)
		}
		if last := len(req.HashIDs) - 1; last >= 0 && blockTokens(req, last, w.BlockTokens) < w.BlockTokens {
			h.MarkPartial(req.HashIDs[last])
		}
		t.utilization(h.Len(0), cfg.Capacity)
		cfg.progress(i+1, len(w.Requests))
	}
	rep := TierReport{
		Report:         t.report(string(s), "replay", cfg.Capacity),
		Write:          cfg.write(),
		Inclusion:      "inclusive",
		GPUHits:        gpuHits,
		Misses:         t.refs - t.hits,
		ComputeSeconds: clock.compute.Seconds(),
		LoadSeconds:    clock.load.Seconds(),
		PrefillSeconds: (clock.compute + clock.load).Seconds(),
		UnpaidLoads:    clock.unpaid,
	}
	if cfg.Exclusive {
		rep.Inclusion = "exclusive"
	}
	rep.Tiers = addTierStats(nil, h.Stats(), cfg.Cost)
	return rep, nil
}

// addTierStats adds a hierarchy's counts to sum, tier by tier (a cluster
// sums its engines'), and prices the bytes below the GPU by cost's block
// size when it is set.
func addTierStats(sum []TierStats, stats []tier.Stats, cost *tier.Cost) []TierStats {
	for i, st := range stats {
		if i == len(sum) {
			sum = append(sum, TierStats{Medium: st.Medium, Strategy: string(st.Strategy)})
		}
		ts := &sum[i]
		ts.CapacityBlocks += st.Capacity
		ts.Hits += st.Hits
		ts.StoredBlocks += st.Stored
		ts.EvictedBlocks += st.Evicted
		ts.FailedStores += st.Failed
		if i > 0 && cost != nil {
			ts.BytesRead = ts.Hits * cost.BlockBytes()
			ts.BytesWritten = ts.StoredBlocks * cost.BlockBytes()
			if ts.BytesRead > 0 {
				ts.WriteAmplification = float64(ts.BytesWritten) / float64(ts.BytesRead)
			}
		}
	}
	return sum
}

// clock sums a tiered replay's modelled time.
type clock struct {
	compute, load time.Duration
	unpaid        int64
}

// request adds request req's time (see price).
func (c *clock) request(cost *tier.Cost, levels []tier.Level, req *Request, m *tier.Match, blockTokens int) {
	load, compute, unpaid := price(cost, levels, req, m, blockTokens)
	c.load += load
	c.compute += compute
	c.unpaid += int64(unpaid)
}

// price is request req's time, as m found its blocks on levels: the load
// of each run found below the GPU, one after the other, the prefill of the
// tokens after the runs, and how many of the loads took longer than
// recomputing their blocks would have.
func price(cost *tier.Cost, levels []tier.Level, req *Request, m *tier.Match, blockTokens int) (load, compute time.Duration, unpaid int) {
	at := m.Runs[0] // blocks at hand so far
	for i := 1; i < len(levels); i++ {
		n := m.Runs[i]
		if n == 0 {
			continue
		}
		load += cost.Load(levels[i].Medium, n)
		if !cost.Pays(levels[i].Medium, n, tokensBefore(req, at, blockTokens)) {
			unpaid++
		}
		at += n
	}
	return load, cost.Prefill(tokensBefore(req, at, blockTokens), req.InputTokens), unpaid
}

// serviceTime is request req's time on an engine alone, first hit of its
// blocks found: the loads of the runs m found below the GPU (load) and the
// prefill of the rest, in total; without tiers (m nil) the prefill past the
// hits alone.
func serviceTime(cost *tier.Cost, levels []tier.Level, req *Request, hit int, m *tier.Match, blockTokens int) (load, total time.Duration) {
	if m == nil {
		return 0, cost.Prefill(tokensBefore(req, hit, blockTokens), req.InputTokens)
	}
	load, compute, _ := price(cost, levels, req, m, blockTokens)
	return load, load + compute
}

// tokensBefore is how many prompt tokens req's first n blocks hold.
func tokensBefore(req *Request, n, blockTokens int) int {
	if n == len(req.HashIDs) {
		return req.InputTokens
	}
	return min(n*blockTokens, req.InputTokens)
}
