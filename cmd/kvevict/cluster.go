package main

// kvevict cluster replays a workload over N engines behind each router it
// is given (sim.Cluster) and prints how each did beside the pooled Belady
// bound. The simulation is sim's; this file holds the flags, the sweep of
// runs, the mirror that takes the engines' KV events through the wire for
// the prefix router, and the table.

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/kvevents"
	"github.com/sagellm/kvevict/prefix"
	"github.com/sagellm/kvevict/sim"
	"github.com/sagellm/kvevict/tier"
)

// The routers of kvevict cluster.
const (
	// routeRoundRobin sends request r to engine r mod N.
	routeRoundRobin = "round-robin"
	// routeLeastLoaded sends a request to the engine that received the
	// fewest of the last sim.LoadWindow requests.
	routeLeastLoaded = "least-loaded"
	// routePrefix scores each engine by the longest prefix of the request
	// resident on it, as an exact mirror fed by the engines' KV events
	// says (encoded and decoded as on the wire: wireMirror), less the
	// load term.
	routePrefix = "prefix"
	// routeTTFT sends a request to the engine with the least estimated
	// time to first token, its queue plus the prefill past the prefix the
	// same mirror says it holds (sim.NewTTFTRouter: Mooncake's rule).
	routeTTFT = "ttft"
	// routeApprox scores each engine by the same prefix on an approximate
	// index (sim.NewApproxRouter) sized at -guess times the engine's
	// capacity.
	routeApprox = "approx"
	// routeDirect scores each engine as prefix does, reading the prefix
	// from its pool without events (sim.NewDirectRouter): prefix equals
	// it unless events are lost. It is no bound: greedy routing on
	// perfect knowledge can lose to a guess.
	routeDirect = "direct"
)

// routers lists the routers in the order of the output.
var routers = []string{routeRoundRobin, routeLeastLoaded, routePrefix, routeTTFT, routeApprox, routeDirect}

// oldRouterNames are the routers' former names, still accepted, with a
// note.
var oldRouterNames = map[string]string{"oracle": routeDirect}

// scoring reports whether router r weighs prefix against load by
// -load-weight.
func scoring(r string) bool { return r == routePrefix || r == routeApprox || r == routeDirect }

// Defaults of kvevict cluster.
const (
	defaultClusterEngines       = "2,4,8,16"
	defaultClusterCapacity      = "500"  // per engine, synthetic workloads
	defaultClusterTraceCapacity = "2500" // per engine, with -trace
	maxEngines                  = 1024
	// defaultLoadWeight is the blocks of prefix one request of load costs
	// an engine's score.
	defaultLoadWeight = "0.5"
	// defaultGuess is the approximate index's size over the engine's.
	defaultGuess = 1.0
	// defaultSLO is the TTFT target within which -slo counts requests: a
	// chosen default, not a standard (docs/cluster.md).
	defaultSLO      = 2 * time.Second
	defaultBaseline = routeRoundRobin + "/" + string(kvevict.LRU)
	maxSpeedup      = 1e6
	maxLoadWeights  = 16
)

// The orders -rank puts a block's rows in to name its best.
const (
	rankTTFT    = "ttft"    // lowest TTFT p99 first
	rankHit     = "hit"     // highest hit ratio first
	rankPrefill = "prefill" // compare -tier: least modelled prefill seconds first
	rankGoodput = "goodput" // compare -mode serve in time, cluster: highest goodput first
)

// clusterOptions are cluster's parsed flags.
type clusterOptions struct {
	source      options // -trace, -workload, -requests, -seed: as compare reads them
	engines     []int
	capacities  []int
	strategies  []kvevict.Strategy
	routers     []string
	guess       float64
	loadWeights []float64
	model       tier.Model
	tiers       tierOptions // -tier, -write, -inclusive, -exclusive, -link: as compare reads them
	speedup     float64
	slo         time.Duration
	// decode makes each engine serve mode's pool in time, shaped by
	// engine (-max-batch, -token-budget, -loop, -tpot-slo); engine.gpu
	// times the engines with or without it.
	decode   bool
	engine   engineOptions
	baseline clusterRun // its router and strategy
	rank     string
	format   string
	plot     string
	wide     bool
	notes    []string // what stderr says before the run: old flag names used
	// hints are -hints' sources, and hinted the workload as each gives
	// it; both nil without -hints.
	hints  []sim.HintSource
	hinted []*sim.Workload
}

const clusterUsage = "kvevict cluster [-trace FILE | -workload NAME [-requests N] [-seed S]] [-engines LIST] [-capacity LIST] [-strategies LIST] [-routers LIST] [-guess F] [-load-weight LIST] [-model NAME] [-tier MEDIUM:BLOCKS:STRATEGY ... [-write W] [-inclusive|-exclusive] [-link L]] [-gpu NAME] [-decode [-max-batch N] [-token-budget N] [-loop open|closed] [-tpot-slo DURATION]] [-speedup F] [-slo DURATION] [-baseline ROUTER/STRATEGY] [-rank ttft|hit|goodput] [-hints LIST] [-format table|csv|json] [-wide] [-plot FILE]"

// clusterHelp explains cluster's output; -h prints it after the flags.
const clusterHelp = `
kvevict cluster replays the requests over N engines, each a pool of -capacity
blocks (a prefix tree evicting leaves first by -strategies), in time: requests
arrive at their timestamps over -speedup, each engine prefills them one at a
time in arrival order, a prefill takes what the cost model gives for the
prompt tokens past its hits (-model on one -gpu at 50% MFU; docs/tiers.md),
and a request's time to first token (TTFT) is its wait in the queue plus its
prefill. With -decode each engine is serve mode's pool in time instead
(docs/cluster.md): it admits while blocks and -max-batch allow, prefills in
chunks under -token-budget beside the decode of the running sequences, each
step timed by the roofline of -model on -gpu, preempts when blocks run out
and evicts single blocks leaf-first; sessions' turns arrive closed loop across
the cluster (-loop). Every time is modelled, not measured. -tier puts tiers
below each engine's pool as compare -tier does (with -write
through|selective=N|back, -inclusive or -exclusive, -link): a hit is then a
block found on any tier, and the blocks found below are loaded over their
link before the rest is prefilled (with -decode, behind the loads queued on
the link); the mirror of prefix and ttft takes every tier's events, the
other routers see the pools only. Each request is routed
by each router of -routers:
  round-robin    request r to engine r mod N
  least-loaded   the engine with the fewest of the last 64 requests
  prefix         the longest resident prefix per engine on an exact mirror,
                 fed by the engines' KV events encoded and decoded as on the
                 wire, less -load-weight blocks per request of that load; with
                 -tier, llm-d's scorer over every tier: each leading block
                 held anywhere counts its best tier's weight (gpu 1, cpu 0.8,
                 storage 1, llm-d's defaults)
  ttft           the least estimated TTFT: the engine's queue plus the
                 prefill past the prefix the same mirror says it holds
                 (Mooncake's rule); with -tier, plus the loads of the runs the
                 mirror says the tiers below hold
  approx         prefix's score on an approximate index per engine: an LRU of
                 block hashes filled head first with the prompts routed there,
                 sized at -guess x the engine's capacity (llm-d's approximate
                 indexer)
  direct         prefix's score on the prefix each engine really holds, read
                 without events: prefix equals it unless events are lost. No
                 bound: greedy routing on perfect knowledge can lose to a
                 guess (it was named oracle)
Table columns, one block per engine count and capacity, closed by a line
naming the best row by -rank and its change against -baseline:
  engines        engines in the cluster
  blocks         each engine's pool, in blocks
  strategy       each engine's eviction strategy
  router         how requests were routed, with its -load-weight when
                 several are given and its -hints source (docs/hints.md):
                 the engines' trees and the tiers below honour the hints
  hit ratio      prompt blocks found on the engine chosen (its longest
                 resident prefix) / prompt blocks
  Δhit           hit ratio minus the baseline's at the same engines and blocks
  Δprefill       prompt tokens the engines computed over the baseline's, in
                 percent
  ttft p99 s     the 99th percentile of TTFT, in seconds
  Δp99           TTFT p99 over the baseline's, as a change in percent
  in slo         share of requests whose TTFT is at most -slo (-wide with
                 -decode)
  busiest        the most prefill time an engine spent / the run's span; with
                 -decode (and -wide), the most time an engine ran a sequence
  goodput        -decode: share of requests within -slo and -tpot-slo
  tpot p99 s     -decode: the 99th percentile of the time per output token
  imbalance      most requests an engine received / the mean (-wide with
                 -decode)
-wide adds:
  prefill Mtok   prompt tokens the engines computed, in millions
  ttft p50 s     the median TTFT; ttft p90 s, the 90th percentile
  e2e p99 s      -decode: the 99th percentile of arrival to last token
  preempted      -decode: the sequences preempted, over every engine
  jain           Jain's index of the requests per engine (1: even)
  mispredicted   blocks per request a router counted on, on the engine it
                 chose, that the engine did not hold
  load s         -tier: the loads from the tiers below, every engine's
                 transfers summed, in seconds (the waits for them are in TTFT)
The verdict's pooled belady is Belady's MIN on one cache of engines x blocks
(and every tier's blocks, with -tier), counting every block of a request
found (not only a prefix) and free not to cache a block: the bound on hit
ratio, which no row passes (sim.PooledBound).
-format csv and json carry every field, and every flag that shapes a row.
`

func parseClusterFlags(args []string, help io.Writer) (*clusterOptions, error) {
	fs := newFlagSet("cluster")
	o := &clusterOptions{}
	var engines, capacity, strategies, routerList, oldStrategies, oldRouters, loadWeights, model, baseline, hints string
	sourceFlags(fs, &o.source)
	fs.StringVar(&engines, "engines", defaultClusterEngines, "comma-separated engine counts, each once")
	fs.StringVar(&capacity, "capacity", "", "comma-separated pool sizes per engine in blocks, each once (default "+defaultClusterCapacity+", or "+defaultClusterTraceCapacity+" with -trace)")
	fs.StringVar(&strategies, "strategies", string(kvevict.LRU), "comma-separated eviction strategies a prefix tree ranks by, each once, or all")
	fs.StringVar(&routerList, "routers", "all", "comma-separated routers, each once, or all: "+strings.Join(routers, ", "))
	fs.StringVar(&oldStrategies, "strategy", "", "the former name of -strategies, still accepted")
	fs.StringVar(&oldRouters, "router", "", "the former name of -routers, still accepted")
	fs.Float64Var(&o.guess, "guess", defaultGuess, "approx: the approximate index's size over an engine's capacity")
	fs.StringVar(&loadWeights, "load-weight", defaultLoadWeight, "prefix, approx, direct: comma-separated blocks of score one request of an engine's recent load costs, a row each")
	var write string
	var inclusive bool
	tierFlags(fs, &o.tiers, &write, &inclusive, false)
	costFlags(fs, &o.tiers, &model, "the model whose prefill FLOPs and KV bytes price the times", "with -tier")
	var gpu, loop string
	fs.StringVar(&gpu, "gpu", "h100", "the GPU whose peak FLOPs (and with -decode memory bandwidth) time the engines: "+strings.Join(tier.GPUNames(), ", "))
	fs.BoolVar(&o.decode, "decode", false, "each engine is serve mode's pool in time: it batches, prefills in chunks, decodes each request's output and preempts (docs/cluster.md); without it an engine prefills one request at a time, whole")
	fs.IntVar(&o.engine.maxBatch, "max-batch", 0, "-decode: most sequences an engine runs at once (vLLM's max_num_seqs); 0: vLLM's default for -gpu")
	fs.IntVar(&o.engine.tokenBudget, "token-budget", 0, "-decode: most tokens one step of an engine computes (vLLM's max_num_batched_tokens); 0: vLLM's default for -gpu")
	fs.StringVar(&loop, "loop", "", "-decode: open (every request at its timestamp) or closed (a session's turn after its previous one's finish plus its pause); default closed where the requests are sessions")
	fs.DurationVar(&o.engine.tpotSLO, "tpot-slo", 0, "-decode: the time per output token a request must keep to count in goodput; 0: no bound")
	fs.Float64Var(&o.speedup, "speedup", 1, "divide every arrival time by `F`, to study the cluster under more load")
	fs.DurationVar(&o.slo, "slo", defaultSLO, "the TTFT target the in slo column counts requests within")
	fs.StringVar(&baseline, "baseline", defaultBaseline, "the `ROUTER/STRATEGY` each row is set against (run if -routers or -strategies leave it out)")
	fs.StringVar(&o.rank, "rank", rankTTFT, "what names a block's best row: ttft (lowest TTFT p99), hit (highest hit ratio) or goodput (the highest share of requests within -slo and -tpot-slo)")
	fs.StringVar(&o.format, "format", "table", "output: table, csv or json")
	fs.BoolVar(&o.wide, "wide", false, "table: add the columns -h lists under -wide")
	fs.StringVar(&o.plot, "plot", "", "also draw hit ratio against engines to `file`.svg or .png")
	fs.StringVar(&hints, "hints", "", "comma-separated hint `sources`, a row per router and strategy each, honoured by the engines' trees: none, trace, hindsight[:precision=P:recall=R:seed=S], ttl=DUR[:hard] (docs/hints.md); without it the requests' hints are cleared")
	if err := parseFlagSet(fs, args, clusterUsage, help); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(help, clusterHelp)
		}
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, old := range []struct {
		name, now string
		value     *string
		into      *string
	}{{"strategy", "strategies", &oldStrategies, &strategies}, {"router", "routers", &oldRouters, &routerList}} {
		if !set[old.name] {
			continue
		}
		if set[old.now] {
			return nil, usagef("-%s and -%s are one flag: give -%s", old.name, old.now, old.now)
		}
		*old.into = *old.value
		set[old.now] = true
		o.notes = append(o.notes, fmt.Sprintf("note: -%s is now -%s, as compare spells it; -%s is still accepted", old.name, old.now, old.name))
	}
	o.format = strings.ToLower(strings.TrimSpace(o.format))
	o.rank = strings.ToLower(strings.TrimSpace(o.rank))
	if err := checkSource(&o.source, set); err != nil {
		return nil, err
	}
	switch {
	case o.format != "table" && o.format != "csv" && o.format != "json":
		return nil, usagef("-format must be table, csv or json, got %q", o.format)
	case o.wide && o.format != "table":
		return nil, usagef("-wide widens the table, and -format %s carries every field already", o.format)
	case !(o.guess > 0 && o.guess <= 100):
		return nil, usagef("-guess must be above 0 and at most 100 (times an engine's capacity), got %v", o.guess)
	case !(o.speedup > 0 && o.speedup <= maxSpeedup):
		return nil, usagef("-speedup must be above 0 and at most %g, got %v", float64(maxSpeedup), o.speedup)
	case o.slo <= 0:
		return nil, usagef("-slo must be a positive duration such as 2s or 500ms, got %v", o.slo)
	case o.rank != rankTTFT && o.rank != rankHit && o.rank != rankGoodput:
		return nil, usagef("-rank must be ttft, hit or goodput, got %q", o.rank)
	}
	if !o.decode {
		for _, name := range []string{"max-batch", "token-budget", "loop", "tpot-slo"} {
			if set[name] {
				return nil, usagef("-%s shapes engines that decode: add -decode", name)
			}
		}
	}
	o.engine.clock, o.engine.slo = true, o.slo // a cluster runs in time
	if err := o.engine.check(set, gpu, loop); err != nil {
		return nil, err
	}
	if err := checkPlotPath(o.plot); err != nil {
		return nil, err
	}
	var err error
	if o.model, err = tier.LookupModel(strings.TrimSpace(model)); err != nil {
		return nil, usagef("-model: %v", err)
	}
	o.tiers.model = o.model
	if o.engines, err = parseCounts(engines, "engine count", "-engines", maxEngines); err != nil {
		return nil, err
	}
	if capacity == "" {
		capacity = defaultClusterCapacity
		if o.source.trace != "" {
			capacity = defaultClusterTraceCapacity
		}
	}
	if o.capacities, err = parseCapacities(capacity); err != nil {
		return nil, err
	}
	if err := o.tiers.check(set, write, inclusive, o.capacities); err != nil {
		return nil, err
	}
	if o.format == "csv" && len(o.tiers.specs) > 0 {
		return nil, usagef("-format csv has no place for each tier's counts: use -format json or the table")
	}
	if o.tiers.write == tier.WriteVLLM {
		return nil, usagef("-write vllm replays vLLM's own GPU pool, and a cluster's engines are prefix trees: use through, selective=N or back")
	}
	const treeWhy = "a cluster's engines are prefix trees, which rank by a key strategy or auto, and %s ranks by lists of sequences"
	if o.strategies, err = parseStrategies(strategies, treeWhy, false); err != nil {
		return nil, err
	}
	if o.routers, o.notes, err = parseRouters(routerList, o.notes); err != nil {
		return nil, err
	}
	if o.loadWeights, err = parseLoadWeights(loadWeights); err != nil {
		return nil, err
	}
	if o.baseline, o.notes, err = parseBaseline(baseline, treeWhy, o.notes); err != nil {
		return nil, err
	}
	mirrors := func(r string) bool { return r == routePrefix || r == routeTTFT }
	if slices.ContainsFunc(o.routers, mirrors) || mirrors(o.baseline.router) {
		for _, c := range o.capacities {
			if n := o.tiers.totalCapacity(c); n > kvevents.MaxMirrorCapacity {
				return nil, usagef("-capacity %d with its tiers is %d blocks an engine, more than the mirror of prefix and ttft holds (%d)", c, n, kvevents.MaxMirrorCapacity)
			}
		}
	}
	if set["hints"] {
		if o.hints, err = sim.ParseHintSources(hints); err != nil {
			return nil, usagef("-hints: %v", err)
		}
	}
	switch {
	case set["guess"] && !slices.Contains(o.routers, routeApprox):
		return nil, usagef("-guess sizes the approx router's index, and -routers does not name approx")
	case set["load-weight"] && !slices.ContainsFunc(o.routers, scoring) && !scoring(o.baseline.router):
		return nil, usagef("-load-weight weighs the scoring routers (prefix, approx, direct), and neither -routers nor -baseline names one")
	}
	return o, nil
}

// parseCounts parses a list of positive counts up to most, each once.
func parseCounts(list, what, flagName string, most int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > most {
			return nil, usagef("bad %s %q: want 1 to %d", what, f, most)
		}
		if slices.Contains(out, n) {
			return nil, usagef("%s %d is named twice in %s", what, n, flagName)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseLoadWeights parses -load-weight: weights from 0 to 1e6 blocks per
// request, each once.
func parseLoadWeights(list string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		w, err := strconv.ParseFloat(f, 64)
		if err != nil || !(w >= 0 && w <= 1e6) {
			return nil, usagef("bad load weight %q: want 0 to 1e6 blocks per request", f)
		}
		if slices.Contains(out, w) {
			return nil, usagef("load weight %v is named twice in -load-weight", w)
		}
		out = append(out, w)
	}
	if len(out) > maxLoadWeights {
		return nil, usagef("-load-weight names %d weights, at most %d", len(out), maxLoadWeights)
	}
	return out, nil
}

// parseRouter parses one router's name, a former name with a note.
func parseRouter(f string, notes []string) (string, []string, error) {
	r := strings.ToLower(strings.TrimSpace(f))
	if now, ok := oldRouterNames[r]; ok {
		notes = append(notes, fmt.Sprintf("note: router %s is now named %s (it is no bound on the others); %s is still accepted", r, now, r))
		r = now
	}
	if !slices.Contains(routers, r) {
		return "", notes, usagef("unknown router %q (known: %s)", f, strings.Join(routers, ", "))
	}
	return r, notes, nil
}

// parseRouters parses -routers: known routers, each once, or all.
func parseRouters(list string, notes []string) ([]string, []string, error) {
	if strings.EqualFold(strings.TrimSpace(list), "all") {
		return slices.Clone(routers), notes, nil
	}
	var out []string
	for _, f := range strings.Split(list, ",") {
		r, n, err := parseRouter(f, notes)
		if err != nil {
			return nil, nil, err
		}
		notes = n
		if slices.Contains(out, r) {
			return nil, nil, usagef("router %s is named twice in -routers", r)
		}
		out = append(out, r)
	}
	return out, notes, nil
}

// parseBaseline parses -baseline ROUTER/STRATEGY.
func parseBaseline(v, treeWhy string, notes []string) (clusterRun, []string, error) {
	router, strategy, ok := strings.Cut(v, "/")
	if !ok {
		return clusterRun{}, nil, usagef("-baseline wants ROUTER/STRATEGY, such as %s, got %q", defaultBaseline, v)
	}
	r, notes, err := parseRouter(router, notes)
	if err != nil {
		return clusterRun{}, nil, usagef("-baseline: %v", err)
	}
	ss, err := parseStrategies(strategy, treeWhy, false)
	if err != nil || len(ss) != 1 {
		return clusterRun{}, nil, usagef("-baseline %q: want one strategy a prefix tree ranks by after the /", v)
	}
	return clusterRun{router: r, strategy: ss[0]}, notes, nil
}

// clusterRun is one run of kvevict cluster.
type clusterRun struct {
	engines, capacity int
	strategy          kvevict.Strategy
	router            string
	loadWeight        float64 // a scoring router's
	hints             int     // the index of its -hints source; 0 without -hints
	baseline          bool    // run only for the baseline, not asked for
}

// clusterRow is a row of kvevict cluster's output, as -format json prints
// it: the workload, the router and every flag that shaped the row, how the
// cluster did, its change against the baseline, and the bound.
type clusterRow struct {
	Workload string `json:"workload"`
	Router   string `json:"router"`
	// Hints is the row's -hints source as normalised; empty without -hints.
	Hints string `json:"hints,omitempty"`
	sim.ClusterReport
	// LoadWeight is a scoring router's, Guess approx's.
	LoadWeight *float64 `json:"load_weight,omitempty"`
	Guess      *float64 `json:"guess,omitempty"`
	Model      string   `json:"model"`
	Speedup    float64  `json:"speedup"`
	SLOSeconds float64  `json:"slo_s"`
	// Baseline is the ROUTER/STRATEGY the row is set against, at the same
	// engines and blocks. The changes: the hit ratio's difference, and the
	// prefill tokens' and TTFT p99's ratios less 1.
	Baseline       string  `json:"baseline"`
	IsBaseline     bool    `json:"is_baseline"`
	HitRatioChange float64 `json:"hit_ratio_change"`
	PrefillChange  float64 `json:"prefill_tokens_change"`
	TTFTP99Change  float64 `json:"ttft_p99_change"`
	// Best is whether the row is its block's best by Rank, ties included.
	Rank string `json:"rank"`
	Best bool   `json:"best"`
	// PooledBelady is the hit ratio of Belady's MIN on one pooled cache of
	// engines x capacity blocks, counting every block found and free to
	// bypass (sim.PooledBound): the bound no row passes.
	PooledBelady float64 `json:"pooled_belady_hit_ratio"`
}

// routerName is r's router as the table and the plot name it: with its
// load weight when several are run.
func (o *clusterOptions) routerName(r *clusterRow) string {
	name := r.Router
	if r.LoadWeight != nil && len(o.loadWeights) > 1 {
		name = fmt.Sprintf("%s w%g", r.Router, *r.LoadWeight)
	}
	if r.Hints != "" {
		name += " (" + r.Hints + ")"
	}
	return name
}

// jobs lists the runs in the order of the output: per engine count and
// capacity, the pooled bound (a run without a router), then each
// strategy's routers (a scoring router once per load weight, each once
// per -hints source), then the baseline if none of those is it.
func (o *clusterOptions) jobs() []clusterRun {
	var out []clusterRun
	for _, n := range o.engines {
		for _, c := range o.capacities {
			out = append(out, clusterRun{engines: n, capacity: c})
			found := false
			for _, s := range o.strategies {
				for _, r := range o.routers {
					weights := []float64{0}
					if scoring(r) {
						weights = o.loadWeights
					}
					for _, lw := range weights {
						for h := range max(len(o.hints), 1) {
							run := clusterRun{engines: n, capacity: c, strategy: s, router: r, loadWeight: lw, hints: h}
							found = found || o.isBaseline(run)
							out = append(out, run)
						}
					}
				}
			}
			if !found {
				b := o.baseline
				b.engines, b.capacity, b.baseline = n, c, true
				if scoring(b.router) {
					b.loadWeight = o.loadWeights[0]
				}
				out = append(out, b)
			}
		}
	}
	return out
}

// isBaseline reports whether run is the baseline: its router and strategy,
// at the first load weight for a scoring router and the first -hints
// source.
func (o *clusterOptions) isBaseline(run clusterRun) bool {
	return run.router == o.baseline.router && run.strategy == o.baseline.strategy &&
		(!scoring(run.router) || run.loadWeight == o.loadWeights[0]) && run.hints == 0
}

func clusterCommand(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	o, err := parseClusterFlags(args, stdout)
	if err != nil {
		return err
	}
	for _, n := range o.notes {
		fmt.Fprintln(stderr, n)
	}
	w, hinted, err := loadHinted(&o.source, o.hints, stdin)
	if err != nil {
		return err
	}
	o.hinted = hinted
	if err := o.engine.checkLoop(w); err != nil {
		return err
	}
	interrupt := make(chan os.Signal, 1)
	signal.Notify(interrupt, os.Interrupt)
	reports, err := runCluster(o, w, stderr, runtime.GOMAXPROCS(0), interrupt)
	signal.Stop(interrupt)
	if err != nil {
		return err
	}
	switch {
	case o.format == "table":
		err = writeClusterTable(stdout, o, w, reports)
	case o.format == "csv" && o.hints == nil:
		err = writeCSV(stdout, reports, "hints", "tiers") // tiers: refused with -tier, empty without
	case o.format == "csv":
		err = writeCSV(stdout, reports, "tiers")
	default:
		err = writeRecords(stdout, o.format, reports)
	}
	if err != nil || o.plot == "" {
		return err
	}
	return plotCluster(o.plot, w.Name, o, reports)
}

// runCluster runs o's jobs on w, workers at once, and returns the routers'
// reports in the order of jobs, each with its pooled bound, its change
// against the baseline and whether it is its block's best. The bound of an
// engine count and capacity is its first job, so every report after it
// finds it. Ctrl-C stops the command with nothing written: a cluster's
// rows make sense beside their bound and their peers.
func runCluster(o *clusterOptions, w *sim.Workload, stderr io.Writer, workers int, interrupt <-chan os.Signal) ([]clusterRow, error) {
	cost, err := tier.NewCost(o.model, w.BlockTokens, o.engine.gpu.Compute(), o.tiers.links)
	if err != nil {
		return nil, usagef("%v", err)
	}
	js := o.jobs()
	bar := newProgress(stderr, o.format, len(js)*len(w.Requests))
	results, _, err := runJobs(len(js), workers, func(i int) (clusterRow, error) {
		defer bar.finished()
		run := js[i]
		if run.router == "" {
			bound, err := sim.PooledBound(w, sim.Config{Capacity: run.engines * o.tiers.totalCapacity(run.capacity), Progress: bar.callback()})
			return clusterRow{PooledBelady: bound}, err
		}
		r, err := o.newRouter(run, w, cost)
		if err != nil {
			return clusterRow{}, err
		}
		cfg := sim.ClusterConfig{Config: sim.Config{Capacity: run.capacity, Progress: bar.callback()}, Engines: run.engines,
			EngineConfig: sim.EngineConfig{Cost: cost, SLO: o.slo}, Speedup: o.speedup, Tiers: o.tiers.below(run.capacity)}
		if o.decode {
			e := &o.engine
			cfg.Decode = true
			cfg.MaxBatch, cfg.TokenBudget, cfg.Loop, cfg.TPOTSLO = e.maxBatch, e.tokenBudget, e.loop, e.tpotSLO
		}
		rw := w
		if o.hints != nil {
			rw = o.hinted[run.hints]
		}
		rep, err := sim.Cluster(rw, run.strategy, r, cfg)
		if err != nil {
			return clusterRow{}, fmt.Errorf("%s router: %w", run.router, err)
		}
		row := clusterRow{Workload: w.Name, Router: run.router, Model: o.model.Name, Speedup: o.speedup,
			SLOSeconds: o.slo.Seconds(), ClusterReport: rep, IsBaseline: o.isBaseline(run), Rank: o.rank,
			Baseline: o.baseline.router + "/" + string(o.baseline.strategy)}
		if scoring(run.router) {
			row.LoadWeight = &run.loadWeight
		}
		if run.router == routeApprox {
			row.Guess = &o.guess
		}
		if o.hints != nil {
			row.Hints = o.hints[run.hints].String()
		}
		return row, nil
	}, interrupt)
	bar.stop()
	if err != nil {
		return nil, err
	}
	var out []clusterRow
	for i, run := range js {
		if run.router != "" {
			results[i].PooledBelady = results[i-1].PooledBelady // carried down from the block's bound
			out = append(out, results[i])
		}
	}
	// The baseline's run is the one of its block; every row is set
	// against it and the best named.
	for lo := 0; lo < len(out); {
		hi := lo + 1
		for hi < len(out) && out[hi].Engines == out[lo].Engines && out[hi].CapacityBlocks == out[lo].CapacityBlocks {
			hi++
		}
		block := out[lo:hi]
		base := block[slices.IndexFunc(block, func(r clusterRow) bool { return r.IsBaseline })]
		for k := range block {
			r := &block[k]
			r.HitRatioChange = r.HitRatio - base.HitRatio
			r.PrefillChange = change(float64(r.PrefillTokens), float64(base.PrefillTokens))
			r.TTFTP99Change = change(r.TTFTP99, base.TTFTP99)
		}
		for _, k := range o.best(block) {
			block[k].Best = true
		}
		lo = hi
	}
	return out, nil
}

// change is v over base, less 1: 0 when base is 0.
func change(v, base float64) float64 {
	if base == 0 {
		return 0
	}
	return v/base - 1
}

// best returns the rows of a block tied best by o.rank, the rows run only
// for the baseline included.
func (o *clusterOptions) best(block []clusterRow) []int {
	key := func(r *clusterRow) float64 { return r.TTFTP99 }
	switch o.rank {
	case rankHit:
		key = func(r *clusterRow) float64 { return -r.HitRatio }
	case rankGoodput:
		key = func(r *clusterRow) float64 { return -r.Goodput }
	}
	var out []int
	for k := range block {
		switch {
		case len(out) == 0 || key(&block[k]) < key(&block[out[0]]):
			out = []int{k}
		case key(&block[k]) == key(&block[out[0]]):
			out = append(out, k)
		}
	}
	return out
}

// writeClusterTable writes one block per engine count and capacity, each
// closed by its verdict: the best row by -rank against the baseline, and
// the pooled bound.
func writeClusterTable(out io.Writer, o *clusterOptions, w *sim.Workload, rs []clusterRow) error {
	fmt.Fprintf(out, "workload %s: %d requests, %d-token blocks\n", w.Name, len(w.Requests), w.BlockTokens)
	fmt.Fprintf(out, "modelled times (docs/cluster.md): %s on one %s at 50%% MFU, arrivals sped up %gx, slo %v\n",
		o.model.Name, strings.ToUpper(o.engine.gpu.Name), o.speedup, o.slo)
	if e := &o.engine; o.decode {
		loop := string(e.loop)
		if loop == "" {
			loop = string(sim.LoopOpen)
			if w.GroupKind == "session" {
				loop = string(sim.LoopClosed)
			}
		}
		tpot := "none"
		if e.tpotSLO > 0 {
			tpot = e.tpotSLO.String()
		}
		fmt.Fprintf(out, "engines decode: at most %d sequences and %d tokens a step, %s loop, tpot slo %s\n", e.maxBatch, e.tokenBudget, loop, tpot)
	}
	if t := &o.tiers; len(t.specs) > 0 {
		var below []string
		for _, sp := range t.specs {
			k, _ := tier.DefaultLink(sp.medium)
			if l, ok := t.links[sp.medium]; ok {
				k = l
			}
			below = append(below, fmt.Sprintf("%s over %s", sp, k))
		}
		fmt.Fprintf(out, "below each engine: %s; %s (hits count every tier)\n", strings.Join(below, ", "), t.policy())
	}
	var terms []string
	if slices.ContainsFunc(o.routers, scoring) || scoring(o.baseline.router) {
		ws := make([]string, len(o.loadWeights))
		for i, lw := range o.loadWeights {
			ws[i] = strconv.FormatFloat(lw, 'g', -1, 64)
		}
		terms = append(terms, fmt.Sprintf("load term %s blocks per request of the last %d", strings.Join(ws, ", "), sim.LoadWindow))
	}
	if slices.Contains(o.routers, routeApprox) {
		terms = append(terms, fmt.Sprintf("approx index %v x an engine's blocks", o.guess))
	}
	if len(terms) > 0 {
		fmt.Fprintln(out, strings.Join(terms, "; "))
	}
	fmt.Fprintf(out, "Δ: each row against %s at its engines and blocks\n", o.baselineName(&rs[0]))
	// Names align left, in columns as wide as the longest.
	sw, rw := len("strategy"), len("router")
	for i := range rs {
		sw, rw = max(sw, len(rs[i].Strategy)), max(rw, len(o.routerName(&rs[i])))
	}
	var grid bytes.Buffer
	tw := tabwriter.NewWriter(&grid, 0, 0, 1, ' ', tabwriter.AlignRight)
	head := fmt.Sprintf("%-*s\t%-*s\thit ratio\tΔhit\t", sw, "strategy", rw, "router")
	if o.wide {
		head += "prefill Mtok\t"
	}
	head += "Δprefill\t"
	if o.wide {
		head += "ttft p50 s\tttft p90 s\t"
	}
	head += "ttft p99 s\tΔp99\t"
	if o.decode {
		// goodput, which is in slo with a TPOT bound, and TPOT take the
		// place of in slo, busiest and imbalance, which -wide shows: the
		// table keeps to 100 columns.
		head += "goodput\ttpot p99 s\t"
		if o.wide {
			head += "in slo\tbusiest\timbalance\te2e p99 s\tpreempted\t"
		}
	} else {
		head += "in slo\tbusiest\timbalance\t"
	}
	tiered := len(o.tiers.specs) > 0
	if o.wide {
		head += "jain\tmispredicted\t"
		if tiered {
			head += "load s\t"
		}
	}
	fmt.Fprintln(tw, head)
	for i := range rs {
		r := &rs[i]
		line := fmt.Sprintf("%-*s\t%-*s\t%.4f\t%+.4f\t", sw, r.Strategy, rw, o.routerName(r), r.HitRatio, r.HitRatioChange)
		if o.wide {
			line += fmt.Sprintf("%.1f\t", float64(r.PrefillTokens)/1e6)
		}
		line += fmt.Sprintf("%+.1f%%\t", 100*r.PrefillChange)
		if o.wide {
			line += fmt.Sprintf("%.3f\t%.3f\t", r.TTFTP50, r.TTFTP90)
		}
		line += fmt.Sprintf("%.3f\t%+.1f%%\t", r.TTFTP99, 100*r.TTFTP99Change)
		if o.decode {
			line += fmt.Sprintf("%.3f\t%.4f\t", r.Goodput, r.TPOTP99)
			if o.wide {
				line += fmt.Sprintf("%.3f\t%.3f\t%.3f\t%.3f\t%d\t", r.WithinSLO, r.BusiestUtilization, r.LoadImbalance, r.E2EP99, r.Preemptions)
			}
		} else {
			line += fmt.Sprintf("%.3f\t%.3f\t%.3f\t", r.WithinSLO, r.BusiestUtilization, r.LoadImbalance)
		}
		if o.wide {
			line += fmt.Sprintf("%.3f\t%.2f\t", r.Jain, r.MispredictedPerRequest)
			if tiered {
				line += fmt.Sprintf("%.1f\t", r.LoadSeconds)
			}
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// A block per engine count and capacity: its title, the columns, its
	// rows and its verdict.
	lines := strings.SplitAfter(grid.String(), "\n")
	for i := range rs {
		r := &rs[i]
		if i == 0 || rs[i-1].Engines != r.Engines || rs[i-1].CapacityBlocks != r.CapacityBlocks {
			fmt.Fprintf(out, "\n%d engines of %d blocks\n%s", r.Engines, r.CapacityBlocks, lines[0])
		}
		fmt.Fprint(out, lines[1+i])
		if i+1 == len(rs) || rs[i+1].Engines != r.Engines || rs[i+1].CapacityBlocks != r.CapacityBlocks {
			fmt.Fprintln(out, o.verdict(rs, r.Engines, r.CapacityBlocks))
		}
	}
	return nil
}

// verdict is the line that closes the block of n engines of c blocks: its
// best rows by -rank, every tie named, the best's change against the
// baseline in hit ratio, prefill and TTFT p99, what the rank did not
// weigh, and the pooled bound.
func (o *clusterOptions) verdict(rs []clusterRow, n, c int) string {
	var best []*clusterRow
	for i := range rs {
		if r := &rs[i]; r.Engines == n && r.CapacityBlocks == c && r.Best {
			best = append(best, r)
		}
	}
	names := make([]string, len(best))
	for i, r := range best {
		names[i] = o.routerName(r) + " " + r.Strategy
	}
	b := best[0]
	by, value, ignored := "TTFT p99", o.score(b), "hit ratio, balance"
	switch o.rank {
	case rankHit:
		by, ignored = "hit ratio", "time, balance"
	case rankGoodput:
		by, ignored = "goodput", "hit ratio, balance"
	}
	return fmt.Sprintf("best by %s: %s %s%s\n  vs %s: hit ratio %+.4f, prefill %+.1f%%, TTFT p99 %+.1f%%\n  not weighed: %s; pooled belady (the hit ratio bound) %.4f",
		by, strings.Join(names, ", "), value, o.withoutHints(rs, b), o.baselineName(b),
		b.HitRatioChange, 100*b.PrefillChange, 100*b.TTFTP99Change, ignored, b.PooledBelady)
}

// baselineName is the baseline of r as the table names it: its router and
// strategy, and its hint source with -hints.
func (o *clusterOptions) baselineName(r *clusterRow) string {
	name := strings.Replace(r.Baseline, "/", " ", 1)
	if o.hints != nil {
		name += " (" + o.hints[0].String() + ")"
	}
	return name
}

// withoutHints is the verdict's clause naming the best row without hints
// (hint source none) of best's block, when best has hints; empty
// otherwise, or when -hints has no none.
func (o *clusterOptions) withoutHints(rs []clusterRow, best *clusterRow) string {
	if best.Hints == "" || best.Hints == "none" {
		return ""
	}
	var none []clusterRow
	for _, r := range rs {
		if r.Engines == best.Engines && r.CapacityBlocks == best.CapacityBlocks && r.Hints == "none" {
			none = append(none, r)
		}
	}
	if len(none) == 0 {
		return ""
	}
	r := &none[o.best(none)[0]]
	return fmt.Sprintf("; without hints: %s %s %s", o.routerName(r), r.Strategy, o.score(r))
}

// score is r's figure that -rank ranks by, as the verdict prints it.
func (o *clusterOptions) score(r *clusterRow) string {
	switch o.rank {
	case rankHit:
		return fmt.Sprintf("%.4f", r.HitRatio)
	case rankGoodput:
		return fmt.Sprintf("goodput %.3f", r.Goodput)
	}
	return fmt.Sprintf("%.3f s", r.TTFTP99)
}

// newRouter returns a new router for run, as o configures it, cost
// pricing the ttft router's estimates.
func (o *clusterOptions) newRouter(run clusterRun, w *sim.Workload, cost *tier.Cost) (sim.Router, error) {
	switch run.router {
	case routeRoundRobin:
		return sim.NewRoundRobin(), nil
	case routeLeastLoaded:
		return sim.NewLeastLoaded(), nil
	case routePrefix:
		m, err := newWireMirror(run.engines, o.tiers.totalCapacity(run.capacity), w.BlockTokens)
		if err != nil {
			return nil, err
		}
		if len(o.tiers.specs) > 0 { // llm-d's scorer, over every tier
			return sim.NewTierRouter(m, sim.LLMDTierWeights, run.loadWeight)
		}
		return sim.NewMirrorRouter(m, run.loadWeight)
	case routeTTFT:
		m, err := newWireMirror(run.engines, o.tiers.totalCapacity(run.capacity), w.BlockTokens)
		if err != nil {
			return nil, err
		}
		return sim.NewTTFTRouter(m, cost)
	case routeApprox:
		return sim.NewApproxRouter(o.guess, run.loadWeight)
	case routeDirect:
		return sim.NewDirectRouter(run.loadWeight)
	}
	return nil, fmt.Errorf("unknown router %q", run.router) // parseRouters refuses it first
}

// wireMirror is the prefix router's sim.Mirror: a kvevents.Mirror that
// takes each engine's events through the wire encoding, one batch per
// engine per request, as a vLLM engine's batch reaches a router, so that a
// codec bug shows in the hit ratio.
type wireMirror struct {
	m         *kvevents.Mirror
	blockSize int64
	topics    []string         // per engine, named as llm-d names a pod's
	batch     []kvevents.Event // scratch: one Apply's events
	kv        []kvevents.Hash  // scratch: a request's hashes on the wire
	dec       kvevents.Decoder // the mirror keeps nothing of a batch it applies
}

// newWireMirror returns a mirror of engines engines of capacity blocks
// each, whose blocks hold blockSize tokens.
func newWireMirror(engines, capacity, blockSize int) (*wireMirror, error) {
	// No peer feeds it, and it must hold what the engines hold to route
	// as they do: its memory is the engines' capacity, not a budget's.
	m, err := kvevents.NewMirror(capacity, kvevents.WithMirrorMemory(math.MaxInt64))
	if err != nil {
		return nil, err
	}
	wm := &wireMirror{m: m, blockSize: int64(blockSize)}
	for i := range engines {
		wm.topics = append(wm.topics, fmt.Sprintf("kv@engine-%d@m", i))
	}
	return wm, nil
}

// Apply encodes engine's events as a batch, decodes it and applies it.
func (wm *wireMirror) Apply(engine int, events []prefix.Event) error {
	wm.batch = wm.batch[:0]
	for _, e := range events {
		wm.batch = append(wm.batch, kvevents.FromPrefix(e, wm.blockSize, nil))
	}
	return wm.send(engine)
}

// ApplyTiers does as Apply with the events of the tiers below engine's
// pool, each with its medium, as vLLM's offloading sends them.
func (wm *wireMirror) ApplyTiers(engine int, events []tier.Event) error {
	wm.batch = wm.batch[:0]
	for _, e := range events {
		wm.batch = append(wm.batch, kvevents.FromTier(e, wm.blockSize))
	}
	return wm.send(engine)
}

// HeldOn reports whether the mirror holds block h of engine on medium.
func (wm *wireMirror) HeldOn(engine int, medium tier.Medium, h uint64) bool {
	return wm.m.ResidentOn(wm.topics[engine], string(medium), kvevents.IntHash(h))
}

// send encodes wm.batch, decodes it and applies it to engine's topic.
func (wm *wireMirror) send(engine int) error {
	payload, err := kvevents.Encode(&kvevents.EventBatch{Events: wm.batch}, kvevents.EncodingMixed)
	if err != nil {
		return err
	}
	batch, skipped, err := wm.dec.Decode(payload)
	if err != nil {
		return err
	}
	if skipped.Total() > 0 {
		return fmt.Errorf("the mirror skipped %d of the engine's events", skipped.Total())
	}
	wm.m.Apply(wm.topics[engine], &batch)
	// The mirror holds as many blocks as an engine and its tiers: one it
	// had to evict would be a block it lost, as a lost event would.
	for _, st := range wm.m.Topics() {
		if st.EvictedBlocks > 0 {
			return fmt.Errorf("the mirror of %s evicted %d blocks: it is smaller than the engine", st.Topic, st.EvictedBlocks)
		}
	}
	return nil
}

// CachedPrefix returns the leading blocks of hashes the mirror holds for
// engine.
func (wm *wireMirror) CachedPrefix(engine int, hashes []uint64) int {
	wm.kv = wm.kv[:0]
	for _, h := range hashes {
		wm.kv = append(wm.kv, kvevents.IntHash(h))
	}
	return wm.m.Match(wm.topics[engine], wm.kv)
}
