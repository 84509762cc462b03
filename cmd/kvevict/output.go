package main

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/sim"
)

// columnHelp explains every column of the output; -h prints it, and
// docs/simulator.md carries the same text.
const columnHelp = `
Table columns, in one block per capacity: each strategy's row, Belady's, then
a line naming the best online strategy and its margin over the next. The
default table shows capacity, strategy, hit ratio, token hits, extra prefill,
and block re-prefill (replay) or preempt, rejected and truncated (serve); with
a clock ttft p99 s and tpot p99 s take the place of token hits, extra prefill
and truncated (goodput too with -rank goodput); in serve mode with -tier the
loads of each tier, or with a clock load s, take the place of token hits and
truncated. -wide shows them all:
  capacity           pool size in blocks
  strategy           the eviction strategy; belady is Belady's MIN, the fewest
                     block loads of a plain replay at that capacity: the customary
                     bound on hit ratio, though an order that evicts leaves first
                     can pass it on small pools (in serve mode "belady (bound)":
                     a reference, not a peer of the rows above)
  hints              with -hints: the row's hint source as normalised
                     (docs/hints.md); the best line then names the best
                     row without hints too
  hit ratio          prompt blocks found cached (the longest resident prefix) /
                     prompt blocks, to 4 decimals or as many more as set each
                     capacity's best apart from the rest; * marks the best online
                     strategy at that capacity (Belady excluded; equal ratios are
                     ties, all marked)
  token hits         prompt tokens in hit blocks / prompt tokens
  block re-prefill   re-prefilled blocks / evicted blocks: the share of evictions
                     whose block was needed again and computed twice
  re-prefill tokens  prompt tokens computed again because of evictions
  extra prefill      prompt tokens computed / those an unbounded cache computes,
                     minus 1, in percent: the prefill work the capacity costs
  util               mean fraction of the pool's blocks holding KV
  hit fairness       Jain's index over sessions (or tenants, as the header says)
                     of each one's hit ratio relative to an unbounded cache's: 1
                     when all get the same share of their attainable hits, 1/n
                     when one of n gets them all
  preempt            serve mode: running sequences preempted (and recomputed)
  rejected           serve mode: requests whose prompt alone fills the pool (as
                     many blocks as the capacity or more); never run, counted as
                     misses
  truncated          serve mode: sequences finished early because their prompt
                     and answer could not fit the pool even alone
  returning p50      serve mode, sessions: the median re-prefill tokens of a
                     returning request, one whose session lost KV it needs since
                     its previous turn (sim.Report.RePrefillTokensP50 says which
                     requests exactly); - when none returned
  returning p99      its 99th percentile, likewise
  evict p50 µs       median latency of choosing one eviction's victims, in
                     microseconds: an Index's Evict, the prefix tree's at
                     -granularity block, or SelectVictims with -sampling; - for
                     Belady and for runs that never evicted
  evict p99 µs       its 99th percentile, likewise
  ttft mean s        serve mode with a clock (-gpu, -model), modelled, not
                     measured: mean time to first token in seconds, from a
                     request's arrival to the end of its prefill
  ttft p50 s         its median
  ttft p90 s         its 90th percentile
  ttft p99 s         its 99th percentile
  tpot mean s        mean time per output token after the first: (finish -
                     first token) / (output tokens - 1), over the requests of
                     two tokens or more that finished whole
  tpot p50 s         its median
  tpot p90 s         its 90th percentile
  tpot p99 s         its 99th percentile
  e2e mean s         mean time from arrival to finish
  e2e p50 s          its median
  e2e p90 s          its 90th percentile
  e2e p99 s          its 99th percentile
  tokens/s           output tokens of the requests that finished whole, over
                     the span from the first arrival to the last finish
  arrivals/s         requests over that span
  in system          requests arrived and not finished, averaged over the
                     span as the engine counts them (by Little's law,
                     arrivals/s x e2e mean s)
  running            sequences running, averaged over the span
  busiest util       the share of the span the engine ran a sequence
  session p50 s      sessions: median time from a session's first arrival to
                     its last finish
  session p99 s      its 99th percentile
  goodput            the share of requests within -slo (TTFT) and -tpot-slo
                     (TPOT); with -rank goodput * marks the best here
  MEDIUM loads       serve mode with -tier: the blocks loaded from the tier below
                     the pool (cpu or storage), at every admission, a
                     recomputation's too; a request's hits count blocks found
                     on any tier, at its first admission
  load s             serve mode with -tier and a clock: the loads' transfers
                     over their links, summed; a request waits for its loads,
                     queued on each link, before its prefill (in its TTFT)
The header names what is constant: the workload, the mode and granularity,
the sampling, with -wide the fairness groups, and in replay mode that nothing
is preempted, rejected or truncated.

-format csv and json carry every field of sim.Report under its JSON name, plus
workload (the trace's file name or the synthetic workload's), sampling (the k
a row ran with, 0 for exact) and best (the * above), and with -baseline
baseline, hit_ratio_change and prefill_tokens_change: each row's change against
the baseline's row at its capacity, which the best line repeats for the best;
with -hints, hints: the row's hint source.
`

// row is one line of the output: the workload, a report, the sample size
// it ran with, and whether it is the best online hit ratio at its capacity.
type row struct {
	Workload string `json:"workload"` // the trace's file name or the synthetic workload's
	sim.Report
	Sampling int  `json:"sampling"`
	Best     bool `json:"best"`
	against
}

// against is a row's change against -baseline, when one is given: the
// difference in hit ratio, and the prefill tokens' ratio less 1, beside
// the baseline's row at the same capacity (as kvevict cluster's rows
// carry them). Belady's rows are set against it too.
type against struct {
	Baseline       string   `json:"baseline,omitempty"`
	HitRatioChange *float64 `json:"hit_ratio_change,omitempty"`
	PrefillChange  *float64 `json:"prefill_tokens_change,omitempty"`
}

// setAgainst sets each of n rows against the baseline's row at its
// capacity: report(i) is row i's report, capacity(i) its capacity, and
// set(i) its against to fill. Nothing is set without a baseline.
func setAgainst(baseline kvevict.Strategy, n int, report func(i int) *sim.Report, capacity func(i int) int, set func(i int) *against) {
	if baseline == "" {
		return
	}
	base := map[int]*sim.Report{}
	for i := range n {
		if r := report(i); r.Strategy == string(baseline) {
			base[capacity(i)] = r
		}
	}
	for i := range n {
		b, ok := base[capacity(i)]
		if !ok {
			continue // a capacity whose baseline did not finish
		}
		r := report(i)
		hit, prefill := r.HitRatio-b.HitRatio, change(float64(r.PrefillTokens), float64(b.PrefillTokens))
		*set(i) = against{Baseline: string(baseline), HitRatioChange: &hit, PrefillChange: &prefill}
	}
}

// line is the best line's part that sets the best row against the
// baseline; empty without one.
func (a *against) line() string {
	if a.Baseline == "" {
		return ""
	}
	return fmt.Sprintf("; vs %s: hit ratio %+.4f, prefill %+.1f%%", a.Baseline, *a.HitRatioChange, 100**a.PrefillChange)
}

// score is what names a capacity's best rows: the hit ratio, or the
// goodput under -rank goodput.
type score func(*sim.Report) float64

func byHit(r *sim.Report) float64     { return r.HitRatio }
func byGoodput(r *sim.Report) float64 { return r.Goodput }

// scoreOf returns the score -rank names: goodput, or the hit ratio.
func scoreOf(rank string) score {
	if rank == rankGoodput {
		return byGoodput
	}
	return byHit
}

// rows pairs each report with its workload and sampling and marks, per
// capacity, the online strategies with the highest score rank names.
func rows(reports []sim.Report, workload string, sampling int, rank string) []row {
	score := scoreOf(rank)
	best := map[int]float64{}
	for i := range reports {
		r := &reports[i]
		if r.Strategy == sim.BeladyName {
			continue
		}
		if b, ok := best[r.CapacityBlocks]; !ok || score(r) > b {
			best[r.CapacityBlocks] = score(r)
		}
	}
	out := make([]row, len(reports))
	for i := range reports {
		r := &reports[i]
		out[i].Workload, out[i].Report = workload, *r
		if r.Strategy != sim.BeladyName {
			out[i].Sampling = sampling
			out[i].Best = score(r) == best[r.CapacityBlocks]
		}
	}
	return out
}

// write prints the reports in -format o.format.
func write(out io.Writer, o *options, w *sim.Workload, reports []sim.Report) error {
	rs := rows(reports, w.Name, o.sampling, o.rank)
	setAgainst(o.baseline, len(rs), func(i int) *sim.Report { return &rs[i].Report },
		func(i int) int { return rs[i].CapacityBlocks }, func(i int) *against { return &rs[i].against })
	if o.format == "table" {
		return writeTable(out, o, w, rs)
	}
	if o.format == "csv" {
		omit := []string{"tiers"} // refused with -tier, empty without
		if o.hints == nil {
			omit = append(omit, hintFields...)
		}
		if !slices.ContainsFunc(rs, func(r row) bool { return r.Times != nil }) {
			omit = append(omit, timeFields()...) // no run had a clock
		}
		return writeCSV(out, rs, omit...)
	}
	return writeRecords(out, o.format, rs)
}

// hintFields are the fields that -hints adds to the csv (and json, where
// they are omitted when empty).
var hintFields = []string{"hints", "released_evicted_blocks", "leased_evicted_blocks", "leases_honoured", "leases_wasted"}

// timeFields are the fields of a run in time (sim.Times), which the csv
// carries only when the runs have a clock.
func timeFields() []string {
	names, _ := csvFields[sim.Times]()
	return names
}

// writeRecords writes rs as a JSON array or as CSV, the formats that carry
// every field.
func writeRecords[T any](out io.Writer, format string, rs []T) error {
	if format == "csv" {
		return writeCSV(out, rs)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(rs)
}

// csvFields are the fields of T in order, by their JSON names: the CSV
// columns are the JSON object's keys, so the two formats cannot drift apart.
func csvFields[T any]() (names []string, index [][]int) {
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			at := append(append([]int(nil), prefix...), i)
			if f.Anonymous {
				t := f.Type
				if t.Kind() == reflect.Pointer {
					t = t.Elem() // its fields, empty where it is nil
				}
				walk(t, at)
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			names = append(names, name)
			index = append(index, at)
		}
	}
	walk(reflect.TypeFor[T](), nil)
	return names, index
}

// writeCSV writes rs as CSV, a header of csvFields and a record per row,
// without the columns named in omit.
func writeCSV[T any](out io.Writer, rs []T, omit ...string) error {
	names, index := csvFields[T]()
	for _, name := range omit {
		if i := slices.Index(names, name); i >= 0 {
			names, index = slices.Delete(names, i, i+1), slices.Delete(index, i, i+1)
		}
	}
	cw := csv.NewWriter(out)
	if err := cw.Write(names); err != nil {
		return err
	}
	rec := make([]string, len(names))
	for _, r := range rs {
		v := reflect.ValueOf(r)
		for i, at := range index {
			f, err := v.FieldByIndexErr(at)
			if err != nil { // a field of a nil embedded pointer, as JSON omits it
				rec[i] = ""
				continue
			}
			rec[i] = csvValue(f)
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// csvValue writes a field: a nil pointer (a field JSON omits) as an empty
// cell.
func csvValue(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return ""
		}
		return csvValue(v.Elem())
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'f', 6, 64)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	}
	return v.String()
}

// Where a column of the table appears: its modes, and whether the default
// table shows it or only -wide.
const (
	inReplay = 1 << iota
	inServe
	inBoth = inReplay | inServe
)

// column is one column of the table: its header, the modes it exists in,
// those whose default table shows it, and its cell for a row.
type column struct {
	name         string
	modes, brief int
	cell         func(r *row, t *tableFormat) string
}

// tableFormat is what a cell's text depends on beyond its row.
type tableFormat struct {
	hitDecimals int // enough to tell each capacity's best from the rest
	nameWidth   int // the longest strategy name: names align left
	serve       bool
	goodput     bool // -rank goodput: the best are marked by goodput
}

// columns are the table's columns, in order: the decisive ones first.
var columns = []column{
	{"capacity", inBoth, inBoth, func(r *row, _ *tableFormat) string { return strconv.Itoa(r.CapacityBlocks) }},
	{"strategy", inBoth, inBoth, func(r *row, t *tableFormat) string {
		return fmt.Sprintf("%-*s", t.nameWidth, strategyLabel(r.Strategy, t.serve))
	}},
	{"hints", inBoth, inBoth, func(r *row, _ *tableFormat) string { return cmp.Or(r.Hints, "-") }},
	{"hit ratio", inBoth, inBoth, func(r *row, t *tableFormat) string {
		return strconv.FormatFloat(r.HitRatio, 'f', t.hitDecimals, 64) + bestMark(r, !t.goodput)
	}},
	{"token hits", inBoth, inBoth, func(r *row, _ *tableFormat) string { return ratioCell(r.TokenHitRatio) }},
	{"block re-prefill", inBoth, inReplay, func(r *row, _ *tableFormat) string { return ratioCell(r.BlockRePrefillRate) }},
	{"re-prefill tokens", inBoth, 0, func(r *row, _ *tableFormat) string { return strconv.FormatInt(r.RePrefillTokens, 10) }},
	{"extra prefill", inBoth, inBoth, func(r *row, _ *tableFormat) string {
		return fmt.Sprintf("%+.1f%%", 100*r.ThroughputImpact)
	}},
	{"util", inBoth, 0, func(r *row, _ *tableFormat) string { return ratioCell(r.Utilization) }},
	{"hit fairness", inBoth, 0, func(r *row, _ *tableFormat) string { return ratioCell(r.HitFairness) }},
	{"preempt", inServe, inServe, serveCell(func(r *row) string { return strconv.Itoa(r.Preemptions) })},
	{"rejected", inServe, inServe, serveCell(func(r *row) string { return strconv.Itoa(r.Rejected) })},
	{"truncated", inServe, inServe, serveCell(func(r *row) string { return strconv.Itoa(r.Truncated) })},
	{"returning p50", inServe, 0, serveCell(func(r *row) string { return returningTokens(&r.Report, r.RePrefillTokensP50) })},
	{"returning p99", inServe, 0, serveCell(func(r *row) string { return returningTokens(&r.Report, r.RePrefillTokensP99) })},
	{"evict p50 µs", inBoth, 0, func(r *row, _ *tableFormat) string { return micros(r.EvictionP50) }},
	{"evict p99 µs", inBoth, 0, func(r *row, _ *tableFormat) string { return micros(r.EvictionP99) }},
}

// timeColumns are the columns of the figures in time, after the others
// when the runs have a clock.
var timeColumns = []column{
	timeColumn("ttft mean s", 0, func(t *sim.Times) float64 { return t.TTFTMean }),
	timeColumn("ttft p50 s", 0, func(t *sim.Times) float64 { return t.TTFTP50 }),
	timeColumn("ttft p90 s", 0, func(t *sim.Times) float64 { return t.TTFTP90 }),
	timeColumn("ttft p99 s", inServe, func(t *sim.Times) float64 { return t.TTFTP99 }),
	timeColumn("tpot mean s", 0, func(t *sim.Times) float64 { return t.TPOTMean }),
	timeColumn("tpot p50 s", 0, func(t *sim.Times) float64 { return t.TPOTP50 }),
	timeColumn("tpot p90 s", 0, func(t *sim.Times) float64 { return t.TPOTP90 }),
	timeColumn("tpot p99 s", inServe, func(t *sim.Times) float64 { return t.TPOTP99 }),
	timeColumn("e2e mean s", 0, func(t *sim.Times) float64 { return t.E2EMean }),
	timeColumn("e2e p50 s", 0, func(t *sim.Times) float64 { return t.E2EP50 }),
	timeColumn("e2e p90 s", 0, func(t *sim.Times) float64 { return t.E2EP90 }),
	timeColumn("e2e p99 s", 0, func(t *sim.Times) float64 { return t.E2EP99 }),
	timeColumn("tokens/s", 0, func(t *sim.Times) float64 { return t.ThroughputTokensPerS }),
	timeColumn("arrivals/s", 0, func(t *sim.Times) float64 { return t.ArrivalRatePerS }),
	timeColumn("in system", 0, func(t *sim.Times) float64 { return t.MeanInSystem }),
	timeColumn("running", 0, func(t *sim.Times) float64 { return t.MeanRunning }),
	timeColumn("busiest util", 0, func(t *sim.Times) float64 { return t.BusiestUtilization }),
	timeColumn("session p50 s", 0, func(t *sim.Times) float64 { return t.SessionCompletionP50 }),
	timeColumn("session p99 s", 0, func(t *sim.Times) float64 { return t.SessionCompletionP99 }),
	{"goodput", inServe, 0, func(r *row, t *tableFormat) string {
		if r.Times == nil {
			return "-"
		}
		return ratioCell(r.Goodput) + bestMark(r, t.goodput)
	}},
}

// tierColumns are the columns of serve mode's tiers below the pool: the
// blocks loaded from each, in the default table without a clock, and with
// one the loads' seconds, in the default table.
func tierColumns(t *tierOptions, clocked bool) []column {
	var cols []column
	brief := inServe
	if clocked {
		brief = 0
	}
	for i, sp := range t.specs {
		cols = append(cols, column{strings.ToLower(string(sp.medium)) + " loads", inServe, brief, serveCell(func(r *row) string {
			return strconv.FormatInt(r.Tiers[1+i].Hits, 10)
		})})
	}
	if clocked {
		cols = append(cols, timeColumn("load s", inServe, func(t *sim.Times) float64 { return t.LoadSeconds }))
	}
	return cols
}

// capText is a cap of the engine's steps as the header names it: 0 is
// none.
func capText(n int) string {
	if n == 0 {
		return "none"
	}
	return strconv.Itoa(n)
}

// bestMark is the * of a best row in the column that ranks, else a space.
func bestMark(r *row, ranks bool) string {
	if ranks && r.Best {
		return "*"
	}
	return " "
}

// timeColumn is a serve-mode column of a figure in time, shown by the
// default table when brief says so, to 4 decimals; "-" on a row without
// times (Belady's, a replay).
func timeColumn(name string, brief int, v func(t *sim.Times) float64) column {
	return column{name: name, modes: inServe, brief: brief, cell: func(r *row, _ *tableFormat) string {
		if r.Times == nil {
			return "-"
		}
		return ratioCell(v(r.Times))
	}}
}

// serveCell is a serve-mode column's cell: "-" on Belady's row, a replay.
func serveCell(cell func(r *row) string) func(r *row, _ *tableFormat) string {
	return func(r *row, _ *tableFormat) string {
		if r.Strategy == sim.BeladyName {
			return "-"
		}
		return cell(r)
	}
}

func ratioCell(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }

// strategyLabel names a row's strategy; in serve mode Belady's row is a
// plain replay's, a bound rather than a peer.
func strategyLabel(name string, serve bool) string {
	if serve && name == sim.BeladyName {
		return name + " (bound)"
	}
	return name
}

// writeTable writes the table: a header naming what is constant, then one
// block of rows per capacity, each closed by a line naming its best online
// strategy and its margin over the runner-up. The default table shows the
// decisive columns; -wide every column.
func writeTable(out io.Writer, o *options, w *sim.Workload, rs []row) error {
	serve := o.mode == "serve"
	fmt.Fprintf(out, "workload %s: %d requests, %d-token blocks", w.Name, len(w.Requests), w.BlockTokens)
	if o.wide {
		fmt.Fprintf(out, "; hit fairness over %ss", w.GroupKind)
	}
	fmt.Fprintln(out)
	switch e := &o.engine; {
	case serve && e.clock:
		fmt.Fprintf(out, "mode serve, %s granularity, in time: %s on %s, max batch %s, token budget %s\n",
			o.granularity, o.tiers.model.Name, e.gpu.Name, capText(e.maxBatch), capText(e.tokenBudget))
		fmt.Fprintln(out, "seconds are modelled, not measured (docs/simulator.md)")
	case serve:
		fmt.Fprintf(out, "mode serve, %s granularity, %v per decoded token\n", o.granularity, o.tokenTime)
	}
	tiered := serve && len(o.tiers.specs) > 0
	switch {
	case tiered:
		writeTiersLine(out, &o.tiers, o.engine.cost)
		fmt.Fprintln(out, "belady is Belady's MIN of a plain replay at the GPU's capacity: the tiers below can pass it")
	case serve:
		fmt.Fprintln(out, "belady (bound) is Belady's MIN of a plain replay: a bound, not a peer")
	default:
		fmt.Fprintln(out, "mode replay (block granularity): no preemptions, rejections or truncations")
		fmt.Fprintln(out, "belady is Belady's MIN: the fewest block loads")
	}
	if o.sampling > 0 {
		fmt.Fprintf(out, "sampled selection, k=%d\n", o.sampling)
	}
	mode := inReplay
	if serve {
		mode = inServe
	}
	// Over tiers Belady's row is no bound: it is labelled as a peer's.
	t := &tableFormat{hitDecimals: hitDecimals(rs), serve: serve && !tiered, nameWidth: len("strategy"), goodput: o.rank == rankGoodput}
	for i := range rs {
		t.nameWidth = max(t.nameWidth, len(strategyLabel(rs[i].Strategy, t.serve)))
	}
	var cols []column
	all := columns
	if tiered {
		all = append(slices.Clone(columns), tierColumns(&o.tiers, o.clocked())...)
	}
	if o.clocked() {
		all = append(slices.Clone(all), timeColumns...)
	}
	// The default table keeps to 100 columns: in time, the times show
	// what token hits, extra prefill and truncations cost; over tiers, the
	// loads show what they add.
	wideOnly := map[string]bool{}
	if o.clocked() || tiered {
		wideOnly["token hits"], wideOnly["truncated"] = true, true
	}
	if o.clocked() {
		wideOnly["extra prefill"] = true
	}
	for _, c := range all {
		if c.name == "hints" && o.hints == nil {
			continue // a column of -hints
		}
		if c.modes&mode != 0 && (o.wide || c.brief&mode != 0 && !wideOnly[c.name] || c.name == "goodput" && t.goodput) {
			cols = append(cols, c)
		}
	}
	// One tabwriter for every row, so that the blocks share their widths;
	// the lines between the blocks go in afterwards.
	var grid bytes.Buffer
	tw := tabwriter.NewWriter(&grid, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, c := range cols {
		name := c.name
		if c.name == "strategy" {
			name = fmt.Sprintf("%-*s", t.nameWidth, name)
		}
		fmt.Fprint(tw, name+"\t")
	}
	fmt.Fprintln(tw)
	for i := range rs {
		for _, c := range cols {
			fmt.Fprint(tw, c.cell(&rs[i], t)+"\t")
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeBlocks(out, grid.String(), len(rs), func(i int) bool { return rs[i].CapacityBlocks == rs[i-1].CapacityBlocks },
		func(i int) string { return bestLine(rs, rs[i].CapacityBlocks, t.hitDecimals, o.rank) })
	return nil
}

// writeBlocks writes a table's grid, its header line then one line per
// row, in blocks of consecutive rows (same(i): row i continues row i-1's
// block), each closed by its closing line and the blocks apart by an empty
// line: the lines between the blocks go in after a tabwriter has aligned
// every row.
func writeBlocks(out io.Writer, grid string, rows int, same func(i int) bool, closing func(last int) string) {
	lines := strings.SplitAfter(grid, "\n")
	fmt.Fprint(out, "\n"+lines[0])
	for i := range rows {
		fmt.Fprint(out, lines[1+i])
		if i+1 == rows || !same(i+1) {
			fmt.Fprintln(out, closing(i))
			if i+1 < rows {
				fmt.Fprintln(out)
			}
		}
	}
}

// onlineAt returns the rows of the online strategies at capacity c, best
// by score first (ties in the order run).
func onlineAt(rs []row, c int, score score) []row {
	var out []row
	for _, r := range rs {
		if r.CapacityBlocks == c && r.Strategy != sim.BeladyName {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b row) int { return cmp.Compare(score(&b.Report), score(&a.Report)) })
	return out
}

// bestLine names capacity c's best online strategies (those tied for the
// highest score rank names) and their margin over the next.
func bestLine(rs []row, c, decimals int, rank string) string {
	score, head := scoreOf(rank), fmt.Sprintf("best at %d blocks", c)
	if rank == rankGoodput {
		head = fmt.Sprintf("best goodput at %d blocks", c)
	}
	online := onlineAt(rs, c, score)
	if len(online) == 0 {
		return fmt.Sprintf("at %d blocks: no online strategy", c)
	}
	return bestOf(online, head, decimals, withoutHints(rs, c, online[0], decimals, score), score)
}

// bestOf is a best line over online, best by score first: head, the
// strategies tied for the best (counted, past four, so that the line fits
// 100 columns) and their score, their margin over the next (or that all
// tie, or that no other ran), note, and the first's change against the
// baseline.
func bestOf(online []row, head string, decimals int, note string, score score) string {
	first, run := online[0], len(online)
	// tied takes the leading strategies with the first's score off online.
	tied := func() (names []string, ratio float64) {
		ratio = score(&online[0].Report)
		for len(online) > 0 && score(&online[0].Report) == ratio {
			names, online = append(names, online[0].name()), online[1:]
		}
		return names, ratio
	}
	names, best := tied()
	line := fmt.Sprintf("%s: %s %.*f", head, tiedNames(names), decimals, best)
	switch {
	case len(online) > 0:
		next, ratio := tied()
		line += fmt.Sprintf(", +%.*f over %s", decimals, best-ratio, strategyList(next))
	case run > 1:
		line = fmt.Sprintf("%s: all %d online strategies tie at %.*f", head, run, decimals, best)
	default:
		line += ", no other online strategy run"
	}
	return line + note + first.line()
}

// strategyList lists strategy names, counted past four so that a best
// line fits 100 columns.
func strategyList(names []string) string {
	if len(names) > 4 {
		return fmt.Sprintf("%d strategies", len(names))
	}
	return strings.Join(names, ", ")
}

// tiedNames lists the strategies tied for the best, saying they tie.
func tiedNames(names []string) string {
	if len(names) > 1 {
		return strategyList(names) + " (tied)"
	}
	return names[0]
}

// name is a row's strategy, with its hint source when -hints gave one.
func (r *row) name() string {
	if r.Hints == "" {
		return r.Strategy
	}
	return r.Strategy + " (" + r.Hints + ")"
}

// withoutHints is the best line's clause naming capacity c's best row
// without hints (hint source none) when the best, first, has some; empty
// otherwise.
func withoutHints(rs []row, c int, first row, decimals int, score score) string {
	if first.Hints == "" || first.Hints == "none" {
		return ""
	}
	for _, r := range onlineAt(rs, c, score) {
		if r.Hints == "none" {
			return fmt.Sprintf("; without hints: %s %.*f", r.Strategy, decimals, score(&r.Report))
		}
	}
	return ""
}

// hitDecimals is how many decimals the hit ratios need, at least 4: at
// every capacity the best prints apart from every other online strategy,
// and its margin over the runner-up is not zero. Equal ratios print alike:
// they are ties, marked alike.
func hitDecimals(rs []row) int {
	rs = slices.DeleteFunc(slices.Clone(rs), func(r row) bool { return r.Strategy == sim.BeladyName })
	const least, most = 4, 12 // a ratio of block counts differs from another in fewer
	fits := func(d int) bool {
		for i, r := range rs {
			if i > 0 && rs[i-1].CapacityBlocks == r.CapacityBlocks {
				continue // rows come in blocks per capacity
			}
			online := onlineAt(rs, r.CapacityBlocks, byHit)
			for _, o := range online[1:] {
				if o.HitRatio == online[0].HitRatio {
					continue
				}
				f := func(v float64) string { return strconv.FormatFloat(v, 'f', d, 64) }
				if f(o.HitRatio) == f(online[0].HitRatio) || f(online[0].HitRatio-o.HitRatio) == f(0) {
					return false
				}
				break // the runner-up differs most narrowly
			}
		}
		return true
	}
	d := least
	for d < most && !fits(d) {
		d++
	}
	return d
}

// micros prints a latency in nanoseconds as microseconds with two
// decimals, one unit for every run so that scripts can read the column;
// "-" when there is no measurement.
func micros(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(ns)/1e3, 'f', 2, 64)
}

// returningTokens formats a percentile of the returning requests'
// re-prefill tokens, "-" when no request returned.
func returningTokens(r *sim.Report, tokens int64) string {
	if r.ReturningRequests == 0 {
		return "-"
	}
	return strconv.FormatInt(tokens, 10)
}
