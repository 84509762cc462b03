package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/sim"
)

// job is one run of compare: a strategy, or Belady's MIN, at a capacity.
type job struct {
	capacity int
	strategy kvevict.Strategy // "": Belady
	total    bool             // with -tier: Belady at every tier's capacity together
	hints    int              // the index of its -hints source; 0 without -hints
}

// jobs lists compare's runs in the order of the output: per capacity, the
// strategies, then Belady.
func (o *options) jobs() []job {
	var out []job
	for _, c := range o.capacities {
		for _, s := range o.strategies {
			for h := range max(len(o.hints), 1) {
				out = append(out, job{capacity: c, strategy: s, hints: h})
			}
		}
		out = append(out, job{capacity: c})
	}
	return out
}

// run runs j on w; progress, if not nil, follows it. It only reads w, so
// runs of one workload may go at once.
func (o *options) run(w *sim.Workload, j job, progress func(done, total int)) (sim.Report, error) {
	cfg := sim.Config{Capacity: j.capacity, Progress: progress}
	if j.strategy == "" {
		return sim.Belady(w, cfg)
	}
	if o.hinted != nil {
		w = o.hinted[j.hints]
	}
	if o.sampling > 0 { // parseStrategies admits only key strategies then
		cfg.Options = []kvevict.Option{kvevict.WithSampling(o.sampling)}
	}
	var rep sim.Report
	var err error
	if o.mode == "serve" {
		sc := sim.ServeConfig{Config: cfg, TokenTime: o.tokenTime, Granularity: o.granularity,
			EngineConfig: sim.EngineConfig{MaxBatch: o.engine.maxBatch, TokenBudget: o.engine.tokenBudget, Loop: o.engine.loop}}
		if o.engine.cost != nil {
			sc.TokenTime, sc.Cost, sc.SLO, sc.TPOTSLO = 0, o.engine.cost, o.engine.slo, o.engine.tpotSLO
		}
		sc.Tiers = o.tiers.below(j.capacity)
		rep, err = sim.Serve(w, j.strategy, sc)
	} else {
		rep, err = sim.Replay(w, j.strategy, cfg)
	}
	if o.hinted != nil {
		rep.Hints = o.hints[j.hints].String()
	}
	return rep, err
}

// errInterrupted is what compare returns when a signal stopped it: exit
// status 130, as a shell reports a command that SIGINT ended.
var errInterrupted = errors.New("interrupted")

// runJobs calls run for each index from 0 to n-1 in order, at most workers
// at once, and returns each one's report and whether it finished. A
// failed run stops the start of new ones; runJobs returns, once the runs
// started have ended, the error of the first failed in index order, the
// one a run of one worker returns. A value on interrupt stops it at once:
// it keeps the runs that have finished, abandons those in progress (their
// goroutines end unread) and returns errInterrupted.
func runJobs[R any](n, workers int, run func(i int) (R, error), interrupt <-chan os.Signal) ([]R, []bool, error) {
	type result struct {
		i   int
		rep R
		err error
	}
	results := make(chan result, n) // an abandoned run never blocks
	reports, finished := make([]R, n), make([]bool, n)
	failed, failedAt := error(nil), n
	record := func(r result) {
		switch {
		case r.err == nil:
			reports[r.i], finished[r.i] = r.rep, true
		case r.i < failedAt:
			failed, failedAt = r.err, r.i
		}
	}
	interrupted := func() ([]R, []bool, error) {
		for {
			select {
			case r := <-results:
				record(r)
			default:
				return reports, finished, errInterrupted
			}
		}
	}
	next, running := 0, 0
	for {
		select {
		case <-interrupt:
			return interrupted()
		default:
		}
		for ; failed == nil && running < workers && next < n; next, running = next+1, running+1 {
			go func(i int) {
				rep, err := run(i)
				results <- result{i, rep, err}
			}(next)
		}
		if running == 0 {
			return reports, finished, failed
		}
		select {
		case <-interrupt:
			return interrupted()
		case r := <-results:
			running--
			record(r)
		}
	}
}

// finishedCapacities splits the results of an interrupted run, in blocks
// of one per capacity in order, as jobs and tierJobs list them: the
// results of the capacities whose runs all finished, and the capacities
// left out.
func finishedCapacities[R any](results []R, finished []bool, capacities []int) (kept []R, left []string) {
	per := len(results) / len(capacities)
	for c, capacity := range capacities {
		if slices.Contains(finished[c*per:(c+1)*per], false) {
			left = append(left, strconv.Itoa(capacity))
		} else {
			kept = append(kept, results[c*per:(c+1)*per]...)
		}
	}
	return kept, left
}

// runAll runs o's jobs on w, workers at once, with their progress on
// stderr, and returns their reports in the order of jobs. On a value from
// interrupt it returns the reports of the capacities whose runs all
// finished and errInterrupted, saying which it left out.
func runAll(o *options, w *sim.Workload, stderr io.Writer, workers int, interrupt <-chan os.Signal) ([]sim.Report, error) {
	js := o.jobs()
	bar := newProgress(stderr, o.format, len(js)*len(w.Requests))
	reports, finished, err := runJobs(len(js), workers, func(i int) (sim.Report, error) {
		rep, err := o.run(w, js[i], bar.callback())
		bar.finished()
		return rep, err
	}, interrupt)
	bar.stop()
	if err == nil || !errors.Is(err, errInterrupted) {
		return reports, err
	}
	kept, left := finishedCapacities(reports, finished, o.capacities)
	msg := "left out capacity " + left[0] + ", whose runs had not all finished"
	if len(left) > 1 {
		msg = "left out capacities " + strings.Join(left, ", ") + ", whose runs had not all finished"
	}
	if o.plot != "" {
		msg += "; no plot drawn"
	}
	return kept, fmt.Errorf("%w: %s", err, msg)
}
