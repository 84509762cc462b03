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

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/kvevents"
	"github.com/sagellm/kvevict/prefix"
	"github.com/sagellm/kvevict/sim"
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
	// routeApprox scores each engine by the same prefix on an approximate
	// index (sim.NewApproxRouter) sized at -guess times the engine's
	// capacity.
	routeApprox = "approx"
	// routeOracle scores each engine by the prefix it really holds, read
	// from its pool without events: what perfect knowledge gives the
	// same load term.
	routeOracle = "oracle"
)

// routers lists the routers in the order of the output.
var routers = []string{routeRoundRobin, routeLeastLoaded, routePrefix, routeApprox, routeOracle}

// Defaults of kvevict cluster.
const (
	defaultClusterEngines       = "2,4,8,16"
	defaultClusterCapacity      = "500"  // per engine, synthetic workloads
	defaultClusterTraceCapacity = "2500" // per engine, with -trace
	maxEngines                  = 1024
	// defaultLoadWeight is the blocks of prefix one request of load costs
	// an engine's score.
	defaultLoadWeight = 0.5
	// defaultGuess is the approximate index's size over the engine's.
	defaultGuess = 1.0
)

// clusterOptions are cluster's parsed flags.
type clusterOptions struct {
	source     options // -trace, -workload, -requests, -seed: as compare reads them
	engines    []int
	capacities []int
	strategies []kvevict.Strategy
	routers    []string
	guess      float64
	loadWeight float64
	format     string
	plot       string
}

const clusterUsage = "kvevict cluster [-trace FILE | -workload NAME [-requests N] [-seed S]] [-engines LIST] [-capacity LIST] [-strategy LIST] [-router LIST] [-guess F] [-load-weight W] [-format table|csv|json] [-plot FILE]"

// clusterHelp explains cluster's output; -h prints it after the flags.
const clusterHelp = `
kvevict cluster replays the requests in arrival order over N engines, each a
pool of -capacity blocks (a prefix tree evicting leaves first by -strategy),
and routes each request with each router of -router:
  round-robin    request r to engine r mod N
  least-loaded   the engine with the fewest of the last 64 requests
  prefix         the longest resident prefix per engine on an exact mirror,
                 fed by the engines' KV events encoded and decoded as on the
                 wire, less -load-weight blocks per request of that load
  approx         the same score on an approximate index per engine: an LRU of
                 block hashes filled head first with the prompts routed there,
                 sized at -guess x the engine's capacity (llm-d's approximate
                 indexer)
  oracle         the same score on the prefix each engine really holds, read
                 without events: prefix equals it unless events are lost
Table columns, one block per engine count and capacity, closed by a line with
the best router and the pooled bound:
  engines        engines in the cluster
  blocks         each engine's pool, in blocks
  strategy       each engine's eviction strategy
  router         how requests were routed
  hit ratio      prompt blocks found on the engine chosen (its longest
                 resident prefix) / prompt blocks
  prefill Mtok   prompt tokens the engines computed, in millions
  imbalance      most requests an engine received / the mean
  jain           Jain's index of the requests per engine (1: even)
  mispredicted   blocks per request a scoring router counted on, on the engine
                 it chose, that the engine did not hold
The closing line's pooled belady is Belady's MIN on one cache of engines x
blocks: the customary bound on hit ratio (see kvevict compare -h).
-format csv and json carry every field, pooled_belady_hit_ratio on each row.
`

func parseClusterFlags(args []string, help io.Writer) (*clusterOptions, error) {
	fs := newFlagSet("cluster")
	o := &clusterOptions{}
	var engines, capacity, strategies, routerList string
	sourceFlags(fs, &o.source)
	fs.StringVar(&engines, "engines", defaultClusterEngines, "comma-separated engine counts, each once")
	fs.StringVar(&capacity, "capacity", "", "comma-separated pool sizes per engine in blocks, each once (default "+defaultClusterCapacity+", or "+defaultClusterTraceCapacity+" with -trace)")
	fs.StringVar(&strategies, "strategy", string(kvevict.LRU), "comma-separated eviction strategies a prefix tree ranks by, each once, or all")
	fs.StringVar(&routerList, "router", "all", "comma-separated routers, each once, or all: "+strings.Join(routers, ", "))
	fs.Float64Var(&o.guess, "guess", defaultGuess, "approx: the approximate index's size over an engine's capacity")
	fs.Float64Var(&o.loadWeight, "load-weight", defaultLoadWeight, "prefix, approx, oracle: blocks of score one request of an engine's recent load costs")
	fs.StringVar(&o.format, "format", "table", "output: table, csv or json")
	fs.StringVar(&o.plot, "plot", "", "also draw hit ratio against engines to `file`.svg or .png")
	if err := parseFlagSet(fs, args, clusterUsage, help); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(help, clusterHelp)
		}
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o.format = strings.ToLower(strings.TrimSpace(o.format))
	if err := checkSource(&o.source, set); err != nil {
		return nil, err
	}
	switch {
	case o.format != "table" && o.format != "csv" && o.format != "json":
		return nil, usagef("-format must be table, csv or json, got %q", o.format)
	case !(o.guess > 0 && o.guess <= 100):
		return nil, usagef("-guess must be above 0 and at most 100 (times an engine's capacity), got %v", o.guess)
	case !(o.loadWeight >= 0 && o.loadWeight <= 1e6):
		return nil, usagef("-load-weight must be from 0 to 1e6 blocks per request, got %v", o.loadWeight)
	}
	if err := checkPlotPath(o.plot); err != nil {
		return nil, err
	}
	var err error
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
	if o.strategies, err = parseStrategies(strategies, true, false); err != nil {
		return nil, err
	}
	if o.routers, err = parseRouters(routerList); err != nil {
		return nil, err
	}
	scoring := slices.ContainsFunc(o.routers, func(r string) bool { return r == routePrefix || r == routeApprox || r == routeOracle })
	switch {
	case set["guess"] && !slices.Contains(o.routers, routeApprox):
		return nil, usagef("-guess sizes the approx router's index, and -router does not name approx")
	case set["load-weight"] && !scoring:
		return nil, usagef("-load-weight weighs the scoring routers (prefix, approx, oracle), and -router names none")
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

// parseRouters parses -router: known routers, each once, or all.
func parseRouters(list string) ([]string, error) {
	if strings.EqualFold(strings.TrimSpace(list), "all") {
		return slices.Clone(routers), nil
	}
	var out []string
	for _, f := range strings.Split(list, ",") {
		r := strings.ToLower(strings.TrimSpace(f))
		switch {
		case !slices.Contains(routers, r):
			return nil, usagef("unknown router %q (known: %s)", f, strings.Join(routers, ", "))
		case slices.Contains(out, r):
			return nil, usagef("router %s is named twice in -router", r)
		}
		out = append(out, r)
	}
	return out, nil
}

// clusterRun is one run of kvevict cluster.
type clusterRun struct {
	engines, capacity int
	strategy          kvevict.Strategy
	router            string
}

// clusterRow is a row of kvevict cluster's output, as -format json prints
// it: the workload, the router, how the cluster did, and the bound.
type clusterRow struct {
	Workload string `json:"workload"`
	Router   string `json:"router"`
	sim.ClusterReport
	// PooledBelady is the hit ratio of Belady's MIN on one pooled cache of
	// engines x capacity blocks: the customary bound (see compare -h).
	PooledBelady float64 `json:"pooled_belady_hit_ratio"`
}

// jobs lists the runs in the order of the output: per engine count and
// capacity, the pooled bound (a run without a router), then each
// strategy's routers.
func (o *clusterOptions) jobs() []clusterRun {
	var out []clusterRun
	for _, n := range o.engines {
		for _, c := range o.capacities {
			out = append(out, clusterRun{engines: n, capacity: c})
			for _, s := range o.strategies {
				for _, r := range o.routers {
					out = append(out, clusterRun{n, c, s, r})
				}
			}
		}
	}
	return out
}

func clusterCommand(args []string, stdout, stderr io.Writer) error {
	o, err := parseClusterFlags(args, stdout)
	if err != nil {
		return err
	}
	w, err := loadWorkload(&o.source)
	if err != nil {
		return err
	}
	interrupt := make(chan os.Signal, 1)
	signal.Notify(interrupt, os.Interrupt)
	reports, err := runCluster(o, w, stderr, runtime.GOMAXPROCS(0), interrupt)
	signal.Stop(interrupt)
	if err != nil {
		return err
	}
	if o.format == "table" {
		err = writeClusterTable(stdout, o, w, reports)
	} else {
		err = writeRecords(stdout, o.format, reports)
	}
	if err != nil || o.plot == "" {
		return err
	}
	return plotCluster(o.plot, w.Name, reports)
}

// runCluster runs o's jobs on w, workers at once, and returns the routers'
// reports in the order of jobs, each with its pooled bound. The bound of
// an engine count and capacity is its first job, so every report after it
// finds it. Ctrl-C stops the command with nothing written: a cluster's
// rows make sense beside their bound and their peers.
func runCluster(o *clusterOptions, w *sim.Workload, stderr io.Writer, workers int, interrupt <-chan os.Signal) ([]clusterRow, error) {
	js := o.jobs()
	bar := newProgress(stderr, len(js), len(js)*len(w.Requests))
	results, _, err := runJobs(len(js), workers, func(i int) (clusterRow, error) {
		defer bar.finished()
		run := js[i]
		if run.router == "" {
			rep, err := sim.Belady(w, sim.Config{Capacity: run.engines * run.capacity, Progress: bar.callback()})
			return clusterRow{PooledBelady: rep.HitRatio}, err
		}
		r, err := o.newRouter(run, w)
		if err != nil {
			return clusterRow{}, err
		}
		cfg := sim.ClusterConfig{Config: sim.Config{Capacity: run.capacity, Progress: bar.callback()}, Engines: run.engines}
		rep, err := sim.Cluster(w, run.strategy, r, cfg)
		if err != nil {
			return clusterRow{}, fmt.Errorf("%s router: %w", run.router, err)
		}
		return clusterRow{Workload: w.Name, Router: run.router, ClusterReport: rep}, nil
	}, interrupt)
	bar.stop()
	if err != nil {
		return nil, err
	}
	var out []clusterRow
	var bound float64
	for i, run := range js {
		if run.router == "" {
			bound = results[i].PooledBelady
			continue
		}
		results[i].PooledBelady = bound
		out = append(out, results[i])
	}
	return out, nil
}

// writeClusterTable writes one block per engine count and capacity, each
// closed by its best router and the pooled bound.
func writeClusterTable(out io.Writer, o *clusterOptions, w *sim.Workload, rs []clusterRow) error {
	fmt.Fprintf(out, "workload %s: %d requests, %d-token blocks\n", w.Name, len(w.Requests), w.BlockTokens)
	if slices.ContainsFunc(o.routers, func(r string) bool { return r != routeRoundRobin && r != routeLeastLoaded }) {
		fmt.Fprintf(out, "load term %v blocks per request of the last %d", o.loadWeight, sim.LoadWindow)
		if slices.Contains(o.routers, routeApprox) {
			fmt.Fprintf(out, "; approx index %v x an engine's blocks", o.guess)
		}
		fmt.Fprintln(out)
	}
	// Names align left, in columns as wide as the longest.
	sw, rw := len("strategy"), len("router")
	for _, r := range rs {
		sw, rw = max(sw, len(r.Strategy)), max(rw, len(r.Router))
	}
	var grid bytes.Buffer
	tw := tabwriter.NewWriter(&grid, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "engines\tblocks\t%-*s\t%-*s\thit ratio\tprefill Mtok\timbalance\tjain\tmispredicted\t\n", sw, "strategy", rw, "router")
	for _, r := range rs {
		fmt.Fprintf(tw, "%d\t%d\t%-*s\t%-*s\t%.4f\t%.1f\t%.3f\t%.3f\t%.2f\t\n", r.Engines, r.CapacityBlocks, sw, r.Strategy, rw, r.Router,
			r.HitRatio, float64(r.PrefillTokens)/1e6, r.LoadImbalance, r.Jain, r.MispredictedPerRequest)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	lines := strings.SplitAfter(grid.String(), "\n")
	fmt.Fprint(out, "\n"+lines[0])
	for i, r := range rs {
		fmt.Fprint(out, lines[1+i])
		if i+1 < len(rs) && rs[i+1].Engines == r.Engines && rs[i+1].CapacityBlocks == r.CapacityBlocks {
			continue
		}
		top := math.Inf(-1)
		var best []string
		for _, q := range rs {
			switch {
			case q.Engines != r.Engines || q.CapacityBlocks != r.CapacityBlocks || q.HitRatio < top:
			case q.HitRatio > top:
				top, best = q.HitRatio, []string{q.Router + " " + q.Strategy}
			default: // a tie: every one is named
				best = append(best, q.Router+" "+q.Strategy)
			}
		}
		tied := ""
		if len(best) > 1 {
			tied = fmt.Sprintf(" (tied with %d more)", len(best)-1)
		}
		fmt.Fprintf(out, "best at %d x %d blocks: %s %.4f%s; pooled belady %.4f\n",
			r.Engines, r.CapacityBlocks, best[0], top, tied, r.PooledBelady)
		if i+1 < len(rs) {
			fmt.Fprintln(out)
		}
	}
	return nil
}

// newRouter returns a new router for run, as o configures it.
func (o *clusterOptions) newRouter(run clusterRun, w *sim.Workload) (sim.Router, error) {
	switch run.router {
	case routeRoundRobin:
		return sim.NewRoundRobin(), nil
	case routeLeastLoaded:
		return sim.NewLeastLoaded(), nil
	case routePrefix:
		m, err := newWireMirror(run.engines, run.capacity, w.BlockTokens)
		if err != nil {
			return nil, err
		}
		return sim.NewMirrorRouter(m, o.loadWeight)
	case routeApprox:
		return sim.NewApproxRouter(o.guess, o.loadWeight)
	case routeOracle:
		return sim.NewOracleRouter(o.loadWeight)
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
}

// newWireMirror returns a mirror of engines engines of capacity blocks
// each, whose blocks hold blockSize tokens.
func newWireMirror(engines, capacity, blockSize int) (*wireMirror, error) {
	m, err := kvevents.NewMirror(capacity)
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
	payload, err := kvevents.Encode(&kvevents.EventBatch{Events: wm.batch}, kvevents.EncodingMixed)
	if err != nil {
		return err
	}
	batch, skipped, err := kvevents.Decode(payload)
	if err != nil {
		return err
	}
	if skipped.Total() > 0 {
		return fmt.Errorf("the mirror skipped %d of the engine's events", skipped.Total())
	}
	wm.m.Apply(wm.topics[engine], &batch)
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
