// Command kvevict compares KV-cache eviction strategies by replaying a
// workload, beside Belady's MIN.
//
// Usage:
//
//	kvevict compare [-trace FILE | -workload NAME [-requests N] [-seed S]]
//	                [-mode replay|serve] [-granularity sequence|tail|block]
//	                [-token-time D | -gpu NAME -model NAME [-token-budget N]]
//	                [-max-batch N] [-loop open|closed] [-slo D] [-tpot-slo D]
//	                [-capacity LIST] [-strategies LIST]
//	                [-sampling K] [-baseline STRATEGY] [-rank hit|prefill|goodput]
//	                [-format table|csv|json] [-wide] [-plot FILE.svg|.png]
//	                [-tier MEDIUM:BLOCKS:STRATEGY ... [-write through|selective=N|back|vllm]
//	                 [-inclusive|-exclusive] [-model NAME] [-link MEDIUM=BANDWIDTH,LATENCY ...]]
//	kvevict publish -bind ADDR | -connect ADDR -trace FILE -capacity N [-strategy S]
//	                [-tier ... [-write through|selective=N|back] [-inclusive|-exclusive]]
//	                [-topic T] [-replay-bind ADDR] [-warmup D] [-format table|json]
//	kvevict mirror -bind ADDR | -connect ADDR -duration D [-capacity N]
//	               [-replay-connect ADDR] [-allow-gaps] [-format table|json]
//	kvevict cluster [-trace FILE | -workload NAME] [-engines LIST] [-capacity LIST]
//	                [-strategies LIST] [-routers LIST] [-guess F] [-load-weight LIST]
//	                [-model NAME] [-speedup F] [-slo D] [-baseline ROUTER/STRATEGY]
//	                [-rank ttft|hit] [-tier ... [-write W] [-inclusive|-exclusive] [-link L]]
//	                [-format table|csv|json] [-wide] [-plot FILE.svg|.png]
//
// cluster replays a workload over N engines in time behind a router
// (round-robin, least-loaded, prefix on a mirror fed by KV events, ttft on
// the same mirror and each engine's queue, approx on an approximate index,
// direct), each engine a pool evicting by a strategy, with tiers below it
// if asked, and reports the hit ratio, prefill, TTFT, load balance and
// mispredicted blocks of each against a baseline, beside the pooled bound
// on hit ratio (docs/cluster.md).
//
// publish and mirror speak vLLM's KV events (package kvevents): publish
// replays a Mooncake trace through a pool of N blocks and publishes its
// stores and removals as an engine would, with -tier those of the tiers
// below it too, each with its medium (CPU, STORAGE); mirror subscribes, as
// a router would, and reports each topic's resident blocks per medium.
//
// With no flags it replays an embedded default, the synthetic "chat"
// workload (2,000 requests, seed 1), in a few seconds. -trace reads a
// Mooncake JSONL trace (optional fields: docs/simulator.md), plain or
// gzip-compressed, once from its start, so that a pipe or a FIFO serves;
// -trace - reads standard input, and the workload is then named stdin.
// -workload
// generates a synthetic one. -mode replay is the plain prefix-cache replay
// caching papers report; -mode serve runs a paged KV pool with running
// sequences, decode and preemption, evicting whole sequences, sequence tails
// (the default) or single blocks leaf-first (-granularity; a replay is
// block-level by construction). Every report shows Belady (always a plain
// replay) beside the strategies. -sampling K runs the key strategies with
// kvevict.WithSampling(K), the approximate selection, to compare its hit
// ratio with an exact run's.
//
// -tier replays across tiers (package tier, docs/tiers.md): the pool is
// the GPU, and each -tier adds one below it, host memory (cpu) then
// storage, of its own size and strategy; -write says when a lower tier
// gets a block (-write vllm reproduces vLLM's offloading of May 2026) and
// -exclusive keeps each block on one tier. Each row then shows the hits of
// each tier and the prefill's modelled seconds (-model, -link), beside
// Belady's MIN at the GPU's capacity and at every tier's together. In
// serve mode -tier puts the tiers below serve mode's pool: a request's
// hits run on below it, and with a clock it waits for their loads over
// each -link, queued behind the link's earlier loads, before it prefills.
//
// In serve mode -gpu or -model gives the pool a clock (docs/simulator.md,
// "Serve mode in time"): each step of the batch takes the cost model's
// roofline time, prefill in chunks under -token-budget, at most -max-batch
// sequences running (vLLM's defaults for the GPU), and the rows carry
// TTFT, TPOT, E2E, throughput and goodput (-slo, -tpot-slo, -rank
// goodput): modelled, not measured. -loop open sends a session's turns at
// their timestamps rather than after the previous turn's finish.
//
// Every flag is checked before the run starts, every count against its
// maximum (docs/simulator.md, Bounds), and a flag that does not
// apply to the run is refused: -requests and -seed with -trace, -token-time
// in replay mode, -sampling with an adaptive strategy, -granularity block
// with one a prefix tree cannot rank by (arc, s3fifo, sieve).
// A strategy or capacity named twice is refused too. -format, -mode, the
// strategy names and -plot's extension ignore case.
//
// The table fits 100 columns: the decisive ones, in one block per capacity
// closed by a line naming its best online strategy and the margin over the
// next; -wide shows every column (and is refused with csv and json, which
// carry them all).
//
// -format csv and -format json carry every field of sim.Report under its
// JSON name, plus workload (the trace's file name or the synthetic
// workload's), sampling (K on the rows that ran sampled, else 0) and best
// (the best online hit ratio at that capacity). -h explains every flag and
// column on stdout, exit status 0, so that `kvevict compare -h | less` works.
//
// The runs (each strategy at each capacity, and Belady at each) go in
// parallel, one per core (GOMAXPROCS); the output is the same as one at a
// time but for the measured latencies. Progress goes to stderr: a bar on a
// terminal, else a line every few seconds. Ctrl-C (SIGINT) stops starting
// runs, abandons those in progress, writes the capacities whose runs all
// finished (leaving the others out, and saying which on stderr) and exits
// with status 130.
//
// Errors are one line on stderr and a non-zero exit status: 2 for bad
// usage, 1 for a failed run. publish and mirror, stopped by SIGINT or
// SIGTERM, print what they have, flagged partial, and exit 130 or 143.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/prefix"
	"github.com/sagellm/kvevict/sim"
	"github.com/sagellm/kvevict/tier"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Defaults of the embedded workload.
const (
	defaultWorkload   = "chat"
	defaultRequests   = 2000
	defaultCapacities = "250,500,1000,2000,4000"
	traceCapacities   = "1000,2500,5000,10000,20000"
)

// usageError is a mistake on the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// run is the command, reading a -trace of - on stdin: it returns the exit
// status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	err := dispatch(args, stdin, stdout, stderr)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	msg := "kvevict: " + userMessage(err)
	if errors.Is(err, errInterrupted) {
		fmt.Fprintln(stderr, msg)
		return 130
	}
	if errors.Is(err, errTerminated) {
		fmt.Fprintln(stderr, msg)
		return 143
	}
	if ue := (*usageError)(nil); errors.As(err, &ue) {
		fmt.Fprintf(stderr, "%s (see kvevict %s -h)\n", msg, helpFor(args))
		return 2
	}
	fmt.Fprintln(stderr, msg)
	return 1
}

// packageNames matches the names of this module's packages where they
// begin an error or a wrapped cause ("sim: lru, request 5: kvevict: ..."):
// the user ran kvevict, and the line names it once.
var packageNames = regexp.MustCompile(`(^|: )(?:(?:kvevict|sim|prefix|tier): )+`)

// userMessage is err's text without the package names it passed through.
func userMessage(err error) string {
	return packageNames.ReplaceAllString(err.Error(), "$1")
}

func dispatch(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("missing command: try kvevict compare")
	}
	switch args[0] {
	case "compare":
		return compare(args[1:], stdin, stdout, stderr)
	case "publish":
		return publish(args[1:], stdin, stdout, stderr)
	case "mirror":
		return mirror(args[1:], stdout, stderr)
	case "cluster":
		return clusterCommand(args[1:], stdin, stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, "usage: kvevict compare|cluster|publish|mirror [flags]; kvevict <command> -h lists the flags")
		return nil
	}
	return usagef("unknown command %q: try kvevict compare", args[0])
}

// options are compare's parsed flags.
type options struct {
	trace, workload string
	requests        int
	seed            uint64
	mode            string
	granularity     sim.Granularity
	capacities      []int
	strategies      []kvevict.Strategy
	format          string
	wide            bool // the table's every column
	plot            string
	tokenTime       time.Duration
	sampling        int // WithSampling's k; 0: exact selection
	tiers           tierOptions
	baseline        kvevict.Strategy // -baseline: what each row is set against; "" for none
	rank            string           // -rank: what names a capacity's best row
	// hints are -hints' sources, and hinted the workload as each gives
	// it; both nil without -hints.
	hints  []sim.HintSource
	hinted []*sim.Workload
	engine engineOptions
}

// engineOptions are serve mode's engine in time: a clock when -gpu or
// -model gives one, the caps of its steps, and how sessions arrive.
type engineOptions struct {
	gpu         tier.GPUSpec
	clock       bool // -gpu or -model given: the engine has a clock
	maxBatch    int
	tokenBudget int
	loop        sim.Loop
	slo         time.Duration // -slo: goodput's TTFT bound
	tpotSLO     time.Duration // -tpot-slo: goodput's TPOT bound; 0 none
	cost        *tier.Cost    // made once the workload's block size is known
}

// clocked reports whether the runs have a clock, and so times to report.
func (o *options) clocked() bool { return o.engine.clock }

// loadHinted loads the workload src names, as loadWorkload does, and
// applies the hint sources to it: without any it returns the workload
// without its requests' hints (every row then runs as before hints
// existed), else also the workload as each source gives it; a source the
// workload cannot take is a usage error.
func loadHinted(src *options, sources []sim.HintSource, stdin io.Reader) (*sim.Workload, []*sim.Workload, error) {
	w, err := loadWorkload(src, stdin)
	if err != nil {
		return nil, nil, err
	}
	if len(sources) == 0 {
		w, err := (sim.HintSource{Kind: "none"}).Apply(w)
		return w, nil, err
	}
	hinted := make([]*sim.Workload, 0, len(sources))
	for _, h := range sources {
		hw, err := h.Apply(w)
		if err != nil {
			return nil, nil, usagef("-hints: %v", err)
		}
		hinted = append(hinted, hw)
	}
	return w, hinted, nil
}

// parseFlags parses compare's flags; -h prints the usage and the columns'
// explanation to help, stdout, so that it pages and pipes.
func parseFlags(args []string, help io.Writer) (*options, error) {
	fs := flag.NewFlagSet("kvevict compare", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // a mistake is one line, not the whole usage
	o := &options{}
	var capacity, strategies, granularity, write, model, baseline, hints string
	var inclusive bool
	sourceFlags(fs, o)
	fs.StringVar(&o.mode, "mode", "replay", "replay (plain prefix-cache replay) or serve (paged KV pool)")
	fs.StringVar(&granularity, "granularity", "", "serve mode: what one eviction victim is: sequence, tail or block (default "+string(sim.DefaultGranularity)+"; replay is block by construction)")
	fs.StringVar(&capacity, "capacity", "", "comma-separated pool sizes in blocks, each once (default "+defaultCapacities+", or "+traceCapacities+" with -trace)")
	fs.StringVar(&strategies, "strategies", "all", "comma-separated strategies, each once, or all: "+strategyNames())
	fs.StringVar(&o.format, "format", "table", "output: table, csv or json")
	fs.BoolVar(&o.wide, "wide", false, "table: every column, not only the decisive ones (csv and json carry every one)")
	fs.StringVar(&o.plot, "plot", "", "also draw hit ratio against capacity (with -tier in replay mode: stacked by tier, against the first tier's size) to `file`.svg or .png (its directory must exist)")
	fs.IntVar(&o.sampling, "sampling", 0, "pick victims by sampling `k` candidates per round (kvevict.WithSampling), at most "+strconv.Itoa(maxSampling)+"; 0 is exact; key strategies only, so all means those")
	fs.DurationVar(&o.tokenTime, "token-time", sim.DefaultTokenTime, "serve mode without a clock (-gpu, -model): time to decode one token, at most "+sim.MaxTokenTime.String())
	var gpu, loop string
	fs.StringVar(&gpu, "gpu", "h100", "serve mode: the GPU whose peak FLOPs and memory bandwidth time each step (a clock, as -model gives; its seconds are modelled, not measured): "+strings.Join(tier.GPUNames(), ", "))
	fs.IntVar(&o.engine.maxBatch, "max-batch", 0, "serve mode: most sequences running at once (vLLM's max_num_seqs); 0: none without a clock, vLLM's default for -gpu with one")
	fs.IntVar(&o.engine.tokenBudget, "token-budget", 0, "serve mode with a clock: most tokens one step computes (vLLM's max_num_batched_tokens); 0: vLLM's default for -gpu")
	fs.DurationVar(&o.engine.slo, "slo", defaultSLO, "serve mode with a clock: the TTFT a request must keep to count in goodput")
	fs.DurationVar(&o.engine.tpotSLO, "tpot-slo", 0, "serve mode with a clock: the time per output token a request must keep to count in goodput; 0: no bound")
	fs.StringVar(&loop, "loop", "", "serve mode: open (every request at its timestamp) or closed (a session's turn after its previous one's finish plus its pause); default closed where the requests are sessions")
	tierFlags(fs, &o.tiers, &write, &inclusive, true)
	costFlags(fs, &o.tiers, &model, "with -tier, or in serve mode as a clock: the model whose KV bytes and FLOPs price the seconds",
		"with -tier (in serve mode, with a clock)")
	fs.StringVar(&baseline, "baseline", "", "set each row against `STRATEGY` (one of -strategies): its change in hit ratio and prefill tokens, on the best line and in csv and json")
	fs.StringVar(&o.rank, "rank", rankHit, "what names a capacity's best row: hit (highest hit ratio), with -tier in replay mode prefill (least modelled prefill seconds), or in serve mode with a clock goodput (the most requests within -slo and -tpot-slo)")
	fs.StringVar(&hints, "hints", "", "comma-separated hint `sources`, a row per strategy each: none, trace, hindsight[:precision=P:recall=R:seed=S], ttl=DUR[:hard] (docs/hints.md); without it the requests' hints are cleared")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(help)
			fmt.Fprintln(help, "usage: kvevict compare [flags]")
			fs.PrintDefaults()
			fmt.Fprint(help, columnHelp)
			fmt.Fprint(help, tierColumnHelp)
			return nil, err
		}
		return nil, usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o.mode = strings.ToLower(strings.TrimSpace(o.mode))
	o.format = strings.ToLower(strings.TrimSpace(o.format))
	if err := checkSource(o, set); err != nil {
		return nil, err
	}
	switch {
	case o.mode != "replay" && o.mode != "serve":
		return nil, usagef("-mode must be replay or serve, got %q", o.mode)
	case o.mode == "replay" && set["token-time"]:
		return nil, usagef("-token-time needs -mode serve: a replay has no decode")
	case o.format != "table" && o.format != "csv" && o.format != "json":
		return nil, usagef("-format must be table, csv or json, got %q", o.format)
	case o.wide && o.format != "table":
		return nil, usagef("-wide widens the table: -format %s carries every column already", o.format)
	case o.sampling < 0 || o.sampling > maxSampling:
		return nil, usagef("-sampling must be 0 (exact) or a sample size from 1 to %d, got %d", maxSampling, o.sampling)
	case o.tokenTime <= 0 || o.tokenTime > sim.MaxTokenTime:
		return nil, usagef("-token-time must be above 0 and at most %v, got %v", sim.MaxTokenTime, o.tokenTime)
	}
	if err := checkPlotPath(o.plot); err != nil {
		return nil, err
	}
	if capacity == "" {
		capacity = defaultCapacities
		if o.trace != "" {
			capacity = traceCapacities
		}
	}
	var err error
	if o.granularity, err = parseGranularity(granularity, o.mode); err != nil {
		return nil, err
	}
	if o.capacities, err = parseCapacities(capacity); err != nil {
		return nil, err
	}
	// A replay's blocks are its candidates, ranked by any strategy; only the
	// pool's block evictor, a prefix tree, needs a key.
	treeKeys := o.mode == "serve" && o.granularity == sim.GranularityBlock
	if treeKeys && o.sampling > 0 {
		return nil, usagef("-sampling needs a policy's selection: -granularity block evicts a prefix tree's leaves in exact key order")
	}
	treeWhy := ""
	if treeKeys {
		treeWhy = "-granularity block needs a strategy a prefix tree ranks by (a key strategy or auto), and %s ranks by lists of sequences: use -granularity tail or sequence for it"
	}
	if o.strategies, err = parseStrategies(strategies, treeWhy, o.sampling > 0); err != nil {
		return nil, err
	}
	if err := checkTiers(o, set, write, model, inclusive); err != nil {
		return nil, err
	}
	if err := checkEngine(o, set, gpu, model, loop); err != nil {
		return nil, err
	}
	switch o.rank = strings.ToLower(strings.TrimSpace(o.rank)); {
	case o.rank == rankTTFT:
		return nil, usagef("-rank ttft ranks a cluster's rows by time to first token (kvevict cluster); compare ranks by hit, by prefill with -tier in replay mode, or by goodput in serve mode with a clock")
	case o.rank == rankPrefill && (len(o.tiers.specs) == 0 || o.mode == "serve"):
		return nil, usagef("-rank prefill ranks by the modelled prefill seconds, which compare gives with -tier in replay mode (in serve mode a prefill shares its steps: -rank goodput)")
	case o.rank == rankGoodput && !o.engine.clock:
		return nil, usagef("-rank goodput ranks by the share of requests within -slo and -tpot-slo, which serve mode gives with a clock (-gpu or -model)")
	case o.rank != rankHit && o.rank != rankPrefill && o.rank != rankGoodput:
		return nil, usagef("-rank must be hit, prefill (with -tier) or goodput (serve mode with a clock); got %q", o.rank)
	}
	if set["hints"] {
		switch {
		case o.tiers.write == tier.WriteVLLM:
			return nil, usagef("-hints with -write vllm: the reproduction of vLLM's host tier takes no hints (docs/hints.md)")
		}
		if o.hints, err = sim.ParseHintSources(hints); err != nil {
			return nil, usagef("-hints: %v", err)
		}
	}
	if baseline != "" {
		b, err := kvevict.ParseStrategy(baseline)
		if err != nil {
			return nil, usagef("-baseline: %v", err)
		}
		if !slices.Contains(o.strategies, b) {
			return nil, usagef("-baseline %s is not among -strategies: add it, so that its rows are run beside the others", b)
		}
		o.baseline = b
	}
	return o, nil
}

// sourceFlags defines the flags that choose the workload, as compare and
// cluster read them: -trace, or -workload with -requests and -seed.
func sourceFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.trace, "trace", "", "Mooncake JSONL trace `file` to replay, plain or gzip-compressed, read once (a pipe serves); - reads standard input (format: docs/simulator.md)")
	fs.StringVar(&o.workload, "workload", "", "synthetic workload: "+strings.Join(sim.WorkloadNames(), ", ")+" (default "+defaultWorkload+")")
	fs.IntVar(&o.requests, "requests", defaultRequests, "requests in a synthetic workload, 1 to "+strconv.Itoa(maxRequests)+"; not with -trace")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of a synthetic workload; not with -trace")
}

// checkSource refuses a choice of workload that cannot apply; set names
// the flags given.
func checkSource(o *options, set map[string]bool) error {
	switch {
	case o.trace != "" && o.workload != "":
		return usagef("-trace and -workload are exclusive")
	case o.trace != "" && set["requests"]:
		return usagef("-requests sizes a synthetic workload: a trace has its own requests")
	case o.trace != "" && set["seed"]:
		return usagef("-seed seeds a synthetic workload: a trace has no seed")
	}
	return checkCount("requests", o.requests, 1, maxRequests, "requests")
}

// checkPlotPath checks -plot before the run: its extension names a format
// the plot can write and its directory takes a new file.
func checkPlotPath(path string) error {
	if path == "" {
		return nil
	}
	if ext := strings.ToLower(filepath.Ext(path)); ext != ".svg" && ext != ".png" {
		return usagef("-plot file must end in .svg or .png, got %q", path)
	}
	probe, err := os.CreateTemp(filepath.Dir(path), ".kvevict-plot-*")
	if err != nil {
		return usagef("-plot %s: cannot write there: %v", path, errors.Unwrap(err))
	}
	probe.Close()
	return os.Remove(probe.Name())
}

// parseGranularity checks -granularity against -mode: a replay evicts
// single blocks by construction, so only block (or nothing) fits it.
func parseGranularity(name, mode string) (sim.Granularity, error) {
	if name == "" {
		if mode == "serve" {
			return sim.DefaultGranularity, nil
		}
		return sim.GranularityBlock, nil
	}
	g, err := sim.ParseGranularity(name)
	if err != nil {
		return "", usagef("%v", err)
	}
	if mode != "serve" && g != sim.GranularityBlock {
		return "", usagef("-granularity %s needs -mode serve: a replay evicts single blocks", g)
	}
	return g, nil
}

// maxCapacity bounds -capacity: a pool of a hundred million blocks is far
// beyond any GPU.
const maxCapacity = 100_000_000

// parseCapacities parses -capacity, refusing a size named twice (it would
// only repeat a run).
func parseCapacities(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > maxCapacity {
			return nil, usagef("bad capacity %q: want a block count from 1 to %d", f, maxCapacity)
		}
		if slices.Contains(out, n) {
			return nil, usagef("capacity %d is named twice in -capacity", n)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseStrategies parses -strategies, refusing a strategy named twice.
// Where a prefix tree ranks blocks (by a key, or by auto's score), tree
// says why, as a sentence about the strategy named by its %s, and "all"
// means every strategy a tree ranks by; with sampling
// (kvevict.WithSampling, which samples candidates by their keys) every key
// strategy. Naming another is an error.
func parseStrategies(list, tree string, sampling bool) ([]kvevict.Strategy, error) {
	blockKeys := tree != ""
	fits := func(s kvevict.Strategy) bool {
		return !(sampling && s.Adaptive()) && !(blockKeys && prefix.Ranks(s) != nil)
	}
	var out []kvevict.Strategy
	if strings.EqualFold(strings.TrimSpace(list), "all") {
		for _, s := range kvevict.Strategies() {
			if fits(s) {
				out = append(out, s)
			}
		}
		return out, nil
	}
	for _, f := range strings.Split(list, ",") {
		s, err := kvevict.ParseStrategy(f)
		if err != nil {
			return nil, usagef("%v", err)
		}
		switch {
		case slices.Contains(out, s):
			return nil, usagef("strategy %s is named twice in -strategies", s)
		case blockKeys && prefix.Ranks(s) != nil:
			return nil, usagef(tree, s)
		case sampling && s.Adaptive():
			return nil, usagef("-sampling applies to key strategies, and %s ranks by history: run it without -sampling", s)
		}
		out = append(out, s)
	}
	return out, nil
}

func strategyNames() string {
	var names []string
	for _, s := range kvevict.Strategies() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// gzipMagic are the first two bytes of every gzip stream (RFC 1952).
var gzipMagic = []byte{0x1f, 0x8b}

// stdinTrace is the -trace that names standard input, and stdinName the
// workload's name then.
const (
	stdinTrace = "-"
	stdinName  = "stdin"
)

// errTruncatedGzip is a gzip stream that ends before its trailer.
var errTruncatedGzip = errors.New("truncated gzip stream: it ends before its trailer")

// loadTrace reads the Mooncake JSONL trace at path, or on stdin for "-",
// through gzip when the stream is gzip-compressed, as traces are often
// shipped. It reads its source once, from the start, so that a pipe, a
// process substitution or a FIFO serves as well as a file: the gzip magic
// is peeked, not read apart.
func loadTrace(path string, stdin io.Reader) (*sim.Workload, error) {
	name, label, src := filepath.Base(path), path, stdin
	if path == stdinTrace {
		name, label = stdinName, stdinName
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err // *PathError names the path
		}
		defer f.Close()
		src = f
	}
	r := bufio.NewReader(src)
	var in io.Reader = r
	if magic, _ := r.Peek(len(gzipMagic)); bytes.Equal(magic, gzipMagic) {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", label, gzipError(err))
		}
		in, label = gzipReader{zr}, label+" (gzip)"
	}
	w, err := sim.ReadWorkload(in, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	return w, nil
}

// gzipReader reads a gzip stream, saying a truncated one is.
type gzipReader struct{ zr *gzip.Reader }

func (g gzipReader) Read(p []byte) (int, error) {
	n, err := g.zr.Read(p)
	return n, gzipError(err)
}

// gzipError names the truncation that gzip reports as an unexpected EOF.
func gzipError(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errTruncatedGzip
	}
	return err
}

// loadWorkload loads the workload o names: the trace of -trace (stdin's
// for -), or a synthetic one.
func loadWorkload(o *options, stdin io.Reader) (*sim.Workload, error) {
	if o.trace != "" {
		return loadTrace(o.trace, stdin)
	}
	name := o.workload
	if name == "" {
		name = defaultWorkload
	}
	w, err := sim.Synthetic(name, o.seed, o.requests)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return w, nil
}

func compare(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	var w *sim.Workload
	if w, o.hinted, err = loadHinted(o, o.hints, stdin); err != nil {
		return err
	}
	if err := o.engine.checkLoop(w); err != nil {
		return err
	}
	interrupt := make(chan os.Signal, 1)
	signal.Notify(interrupt, os.Interrupt)
	if len(o.tiers.specs) > 0 && o.mode == "replay" {
		defer signal.Stop(interrupt)
		return compareTiers(o, w, stdout, stderr, interrupt, runtime.GOMAXPROCS(0))
	}
	if o.engine.clock {
		if o.engine.cost, err = tier.NewCost(o.tiers.model, w.BlockTokens, o.engine.gpu.Compute(), o.tiers.links); err != nil {
			return usagef("%v", err)
		}
	}
	// Each run only reads the workload: one per core at once.
	reports, err := runAll(o, w, stderr, runtime.GOMAXPROCS(0), interrupt)
	signal.Stop(interrupt) // from here a second Ctrl-C ends the command as usual
	if err != nil && !errors.Is(err, errInterrupted) {
		return err
	}
	if werr := write(stdout, o, w, reports); werr != nil {
		return werr
	}
	if err != nil { // interrupted: what finished is written, and that is all
		return err
	}
	if o.plot != "" {
		var below []string
		for _, sp := range o.tiers.specs {
			below = append(below, sp.String())
		}
		return plotHitRatio(o.plot, w.Name, o.mode, strings.Join(below, ", "), reports)
	}
	return nil
}

// helpFor names the command whose -h explains a usage error in args.
func helpFor(args []string) string {
	if len(args) > 0 && (args[0] == "publish" || args[0] == "mirror" || args[0] == "cluster") {
		return args[0]
	}
	return "compare"
}
