package main

// The flags of serve mode's engine in time: -gpu, -model, -max-batch,
// -token-budget and -loop.

import (
	"strings"

	"github.com/sagellm/kvevict/sim"
	"github.com/sagellm/kvevict/tier"
)

// checkEngine reads the engine's flags, given which were set, refusing
// each where it does not apply: all of them in replay mode, -token-budget
// without a clock, -token-time with one, and over tiers -write vllm and
// -link without a clock. -gpu or -model gives the clock; with it, the caps
// not given are vLLM's defaults for the GPU.
func checkEngine(o *options, set map[string]bool, gpu, model, loop string) error {
	e := &o.engine
	if o.mode != "serve" {
		for _, name := range []string{"gpu", "max-batch", "token-budget", "loop", "slo", "tpot-slo"} {
			if set[name] {
				return usagef("-%s needs -mode serve: a replay has no engine in time", name)
			}
		}
		return nil
	}
	e.clock = set["gpu"] || set["model"]
	switch {
	case set["token-budget"] && !e.clock:
		return usagef("-token-budget needs a clock (-gpu or -model): without one a prefill takes no step for it to bound")
	case set["token-time"] && e.clock:
		return usagef("-token-time with -gpu or -model: the cost model times every step")
	case (set["slo"] || set["tpot-slo"]) && !e.clock:
		return usagef("-slo and -tpot-slo bound times, which serve mode has with a clock (-gpu or -model)")
	}
	if err := e.check(set, gpu, loop); err != nil {
		return err
	}
	if t := &o.tiers; len(t.specs) > 0 { // the tiers below serve mode's pool
		switch {
		case t.write == tier.WriteVLLM:
			return usagef("-write vllm replays vLLM's own GPU pool, and serve mode's pool is its own: use through, selective=N or back")
		case set["link"] && !e.clock:
			return usagef("-link times the loads, which serve mode does with a clock (-gpu or -model)")
		}
	}
	if e.clock && len(o.tiers.specs) == 0 {
		var err error
		if o.tiers.model, err = tier.LookupModel(strings.TrimSpace(model)); err != nil {
			return usagef("-model: %v", err)
		}
	}
	return nil
}

// check reads the engine's flags that compare and cluster share, given
// which were set: the caps, the SLOs, the loop and, with a clock, the GPU,
// whose vLLM defaults set the caps not given.
func (e *engineOptions) check(set map[string]bool, gpu, loop string) error {
	switch {
	case e.maxBatch < 0 || e.maxBatch > sim.MaxBatchLimit:
		return usagef("-max-batch must be 0 or 1 to %d sequences, got %d", sim.MaxBatchLimit, e.maxBatch)
	case e.tokenBudget < 0 || e.tokenBudget > sim.MaxTokenBudget:
		return usagef("-token-budget must be 0 or 1 to %d tokens, got %d", sim.MaxTokenBudget, e.tokenBudget)
	case e.slo < 0 || e.tpotSLO < 0:
		return usagef("-slo and -tpot-slo must be 0 or more, got %v and %v", e.slo, e.tpotSLO)
	}
	switch loop = strings.ToLower(strings.TrimSpace(loop)); loop {
	case "", "open", "closed":
		e.loop = sim.Loop(loop)
	default:
		return usagef("-loop must be open or closed, got %q", loop)
	}
	if !e.clock {
		return nil
	}
	var err error
	if e.gpu, err = tier.LookupGPU(strings.TrimSpace(gpu)); err != nil {
		return usagef("-gpu: %v", err)
	}
	batch, budget := sim.VLLMSchedulerDefaults(e.gpu)
	if !set["max-batch"] {
		e.maxBatch = batch
	}
	if !set["token-budget"] {
		e.tokenBudget = budget
	}
	return nil
}

// checkLoop refuses a closed loop on a workload without sessions, once the
// workload is read.
func (e *engineOptions) checkLoop(w *sim.Workload) error {
	if e.loop == sim.LoopClosed && w.GroupKind != "session" {
		return usagef("-loop closed needs sessions, and workload %s groups its requests by %s", w.Name, w.GroupKind)
	}
	return nil
}
