package sim

import (
	"fmt"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/tier"
)

// DefaultTokenTime is how long a running sequence takes to decode one token
// in [Serve] unless ServeConfig.TokenTime says otherwise.
const DefaultTokenTime = 20 * time.Millisecond

// MaxTokenTime is the longest [ServeConfig.TokenTime]: a minute per token,
// far slower than any decode, and short enough that a run's clock, which
// counts [MaxTokens] of them per answer, cannot overflow.
const MaxTokenTime = time.Minute

// ServeConfig configures [Serve].
type ServeConfig struct {
	Config
	// TokenTime is the time of a step without a clock (Cost nil), in which
	// a running sequence decodes one token and a prefill takes no step; 0
	// means DefaultTokenTime. From 0 to [MaxTokenTime].
	TokenTime time.Duration
	// Granularity is what one eviction candidate is; "" means
	// DefaultGranularity. Block granularity needs a key strategy or Auto.
	Granularity Granularity
	// Evictor, if set, replaces the evictor Granularity names: the seam
	// for other granularities. Report.Granularity is then Granularity as
	// given.
	Evictor Evictor

	// EngineConfig gives the engine a clock (Cost), caps its batch and
	// says how sessions' turns arrive.
	EngineConfig
	// Tiers, if any, are below the pool, which is their GPU: a request's
	// hits are its prefix in the pool, then the runs after it on each tier
	// below, loaded into the pool's blocks; the pool's victims are demoted
	// to them under WriteBack, and a request's blocks offered to them as
	// Write says (see [ReplayTiers]). With Cost a request waits for its
	// loads (the runs' transfers over their links, Cost's, one after the
	// other, each after the loads queued on its link) before it prefills
	// the rest: it holds its blocks meanwhile, out of the batch and of
	// MaxBatch, then waits, first in line, for room in the batch, as vLLM's
	// scheduler keeps such a request (WAITING_FOR_REMOTE_KVS).
	// A request's hints go to the tiers below with its blocks, as
	// [tier.Hierarchy.RequestHints] gives them; a block the pool evicts
	// goes down without them. vLLM's mode (tier.WriteVLLM), which replays
	// vLLM's own GPU and takes no hints, is refused.
	Tiers

	// afterStep, if set, is called after every event: a test hook for the
	// pool's invariant checker.
	afterStep func(*pool)
}

// EngineConfig is what shapes an engine in time: its cost model, its
// batch caps, how sessions' turns arrive and the SLOs its goodput counts.
// [ServeConfig] and [ClusterConfig] embed it; a cluster's engines each
// take it whole.
type EngineConfig struct {
	// Cost, when set, gives each engine a clock: each step's time is
	// Cost.Step of what the step computes (its prefill chunks and one token
	// per decoding sequence, over the KV cache of every running sequence),
	// a prefill takes steps of its own, the last of which computes the
	// first token, and the report carries the run's times (Report.Times,
	// or a ClusterReport's). Its block tokens must be the workload's, and
	// ServeConfig.TokenTime must be 0. Without it every step of [Serve]
	// takes TokenTime and a prefill takes none; a [Cluster] that decodes
	// needs it.
	Cost *tier.Cost
	// MaxBatch caps the sequences running at once (vLLM's max_num_seqs): a
	// waiting request is admitted only below it. 0 means no cap; at most
	// [MaxBatchLimit].
	MaxBatch int
	// TokenBudget caps the tokens of one step (vLLM's
	// max_num_batched_tokens): the decoding sequences' one each, and the
	// prefill chunks the rest allows, in admission order. 0 means no cap;
	// at most [MaxTokenBudget]. It needs Cost: without a clock a prefill
	// takes no step.
	TokenBudget int
	// Loop is how a session's turns arrive; "" means LoopClosed when
	// groups are sessions, else LoopOpen.
	Loop Loop
	// SLO and TPOTSLO are the time to first token and the time per
	// output token a request must keep to count in Times.Goodput; 0 sets
	// no bound. They need Cost.
	SLO, TPOTSLO time.Duration
}

// Serve runs w through a paged KV pool of cfg.Capacity blocks with prefix
// caching, evicting with strategy s at cfg.Granularity (or with
// cfg.Evictor), as an inference server would:
//
//   - a request arrives at its Timestamp, or later if it is a session's turn
//     and its previous turn finished late (below), and waits, first come
//     first served; it is admitted when its prompt fits: the longest prefix
//     of its blocks already in the pool hits, prompt blocks in the pool
//     beyond that prefix are reused but computed, the others are allocated
//     and prefilled;
//   - a running sequence holds a reference on each of its blocks and decodes
//     one token a step, allocating a new block whenever its last one fills;
//     a step takes TokenTime, or with cfg.Cost the roofline time of the
//     batch it runs in (engine.go), which then prefills each prompt in
//     chunks of steps first, the last chunk's step giving the first token;
//     below cfg.MaxBatch sequences, and within cfg.TokenBudget tokens a
//     step;
//   - a finished sequence releases its blocks: prompt blocks stay cached
//     (evictable) until evicted, generated ones are freed; each later
//     request that reuses any of them is one hit on that sequence, its
//     candidate's AccessCount at sequence and tail granularity;
//   - an allocation that does not fit the free blocks asks the evictor for
//     cached ones; if they cannot cover it, the latest admitted running
//     sequence (perhaps the growing one) is preempted: it releases
//     everything and waits, first in line, to be recomputed; admissions
//     pause until a sequence finishes. A sequence alone in a pool too small
//     for it is finished early (Report.Truncated). A prompt that cannot fit the pool
//     at all is rejected (Report.Rejected).
//
// When groups are sessions (w.GroupKind == "session") and cfg.Loop is not
// LoopOpen, arrivals are closed loop, as a user or an agent sends its next turn only after reading the
// previous answer: a request whose Timestamp is at least its session's
// previous request's Timestamp plus that request's decode time
// (OutputTokens x TokenTime, DefaultTokenTime with a clock: the rate the
// timestamps are read at) follows it, and arrives no earlier than its
// pause after that request finished, the pause being what the timestamps
// leave between the two once the decode is taken out:
//
//	pause   = Timestamp - prev.Timestamp - prev.OutputTokens x TokenTime
//	arrival = max(Timestamp, finish(prev) + pause)
//
// finish(prev) is when prev finished for good: after its last
// recomputation if it was preempted, when it was refused if rejected, when
// it was cut short if truncated. A pool that admits every request on
// arrival finishes each at its Timestamp plus its decode time, so arrivals
// are the timestamps exactly; a loaded pool delays a session's turns by the
// queueing of the turns before them. A request the timestamps send before
// its session's previous one could have finished (a batch's parallel
// questions, or a pause shorter than the decode at this TokenTime) did not
// wait for it and arrives at its Timestamp, as do requests of tenants and
// a session's first request.
//
// A request whose Wait (DynoSim's fields in a trace) gives a pause follows
// its session's previous request whatever the timestamps, and one whose
// Wait names requests follows those instead; either arrives its pause
// after the last of them finished, its Timestamp aside, as DynoSim sends
// it:
//
//	arrival = max(finish(r) for each r it follows) + Wait.Pause
//
// Hits, prefill and fairness count each request's first admission (a
// rejected request counts as all misses). Re-prefill tokens are the prompt
// tokens computed again because of evictions: at a first admission, those
// after the resident prefix and within the longest prefix the pool had
// computed before (an unbounded pool would have hit them), and all of a
// preempted request's recomputation. Report.RePrefillTokensP50 and P99
// are taken over the returning requests: first admissions of a session's
// later request when a block of the prompt prefix it shares with the
// session's previous admitted request is no longer in the pool.
func Serve(w *Workload, s kvevict.Strategy, cfg ServeConfig) (Report, error) {
	if err := cfg.validate(w); err != nil {
		return Report{}, err
	}
	if err := cfg.checkEngine(w); err != nil {
		return Report{}, err
	}
	g := cfg.Granularity
	ev := cfg.Evictor
	if ev == nil {
		if g == "" {
			g = DefaultGranularity
		}
		var err error
		if ev, err = newEvictor(g, s, cfg.Capacity, cfg.Options, cfg.contract); err != nil {
			return Report{}, fmt.Errorf("sim: serve %s: %w", s, err)
		}
	}
	f := newFleet(w, &cfg.EngineConfig, tokenTicks(&cfg), 1, cfg.Config.progress)
	f.route = func(int, int64) (int, error) { return 0, nil }
	p := newPool(f, cfg, ev, computeCeiling(w))
	if err := p.setTiers(&cfg.Tiers, s); err != nil {
		return Report{}, fmt.Errorf("sim: serve %s: %w", s, err)
	}
	if err := f.run(); err != nil {
		return Report{}, fmt.Errorf("sim: serve %s: %w", s, err)
	}
	p.settleLeases()
	rep := p.tally.report(string(s), "serve", cfg.Capacity)
	rep.Granularity = string(g)
	rep.Preemptions, rep.Rejected, rep.Truncated = p.preemptions, p.rejected, p.truncated
	if cfg.Cost != nil {
		rep.Times = f.rec.times([]*engineClock{p.clock})
	}
	rep.Tiers = p.addTierStats(nil)
	return rep, nil
}

// Loop is how the turns of a session arrive in [Serve].
type Loop string

const (
	// LoopClosed sends a session's turn no earlier than its previous
	// turn's finish plus its pause (see [Serve]).
	LoopClosed Loop = "closed"
	// LoopOpen sends every request at its Timestamp, whatever the engine
	// did: the warm schedule a recorded trace keeps.
	LoopOpen Loop = "open"
)

// MaxBatchLimit is the largest ServeConfig.MaxBatch, and MaxTokenBudget
// the largest ServeConfig.TokenBudget: far above any engine's, and small
// enough that a step's tokens cannot overflow.
const (
	MaxBatchLimit  = 1 << 20
	MaxTokenBudget = 1 << 24
)

// checkEngine checks the fields that shape the engine in time.
func (cfg *ServeConfig) checkEngine(w *Workload) error {
	switch {
	case cfg.TokenTime < 0 || cfg.TokenTime > MaxTokenTime:
		return invalid("token time must be 0 to %v, got %v", MaxTokenTime, cfg.TokenTime)
	case cfg.Cost != nil && cfg.TokenTime != 0:
		return invalid("a token time with a cost model: the cost model times each step")
	}
	if err := cfg.EngineConfig.check(w); err != nil {
		return err
	}
	return cfg.Tiers.checkPool()
}

// checkPool checks t as the tiers below a pool of Serve's.
func (t *Tiers) checkPool() error {
	if len(t.Below) > 0 && t.Write == tier.WriteVLLM {
		return invalid("vLLM's offloading (write vllm) replays vLLM's own GPU, not this pool")
	}
	return nil
}

// check checks cfg for w.
func (cfg *EngineConfig) check(w *Workload) error {
	switch {
	case cfg.Cost != nil && cfg.Cost.BlockTokens() != w.BlockTokens:
		return invalid("the cost model's blocks are %d tokens, the workload's %d", cfg.Cost.BlockTokens(), w.BlockTokens)
	case cfg.MaxBatch < 0 || cfg.MaxBatch > MaxBatchLimit:
		return invalid("max batch must be 0 (no cap) to %d sequences, got %d", MaxBatchLimit, cfg.MaxBatch)
	case cfg.TokenBudget < 0 || cfg.TokenBudget > MaxTokenBudget:
		return invalid("token budget must be 0 (no cap) to %d tokens, got %d", MaxTokenBudget, cfg.TokenBudget)
	case cfg.SLO < 0 || cfg.TPOTSLO < 0:
		return invalid("negative SLO: TTFT %v, TPOT %v", cfg.SLO, cfg.TPOTSLO)
	case (cfg.SLO > 0 || cfg.TPOTSLO > 0) && cfg.Cost == nil:
		return invalid("an SLO needs a cost model: without a clock there are no times to keep")
	case cfg.TokenBudget > 0 && cfg.Cost == nil:
		return invalid("a token budget needs a cost model: without a clock a prefill takes no step for it to bound")
	case cfg.Loop != "" && cfg.Loop != LoopOpen && cfg.Loop != LoopClosed:
		return invalid("loop must be open or closed, got %q", cfg.Loop)
	case cfg.Loop == LoopClosed && w.GroupKind != "session":
		return invalid("a closed loop needs sessions, and workload %q groups requests by %s", w.Name, w.GroupKind)
	}
	return nil
}

// invalid is an error matching kvevict.ErrInvalidArgument.
func invalid(format string, args ...any) error {
	return fmt.Errorf("sim: %w: "+format, append([]any{kvevict.ErrInvalidArgument}, args...)...)
}
