package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sagellm/kvevict/sim"
)

// columnHelp explains every column of the output; -h prints it, and
// docs/simulator.md carries the same text.
const columnHelp = `
Table columns (one row per strategy and capacity, then Belady):
  capacity           pool size in blocks
  strategy           the eviction strategy; belady is Belady's MIN, the fewest
                     block loads of a plain replay at that capacity: the customary
                     bound on hit ratio, though an order that evicts leaves first
                     can pass it on small pools (in serve mode "belady (replay
                     bound)": a reference, not a peer of the rows above)
  hit ratio          prompt blocks found cached (the longest resident prefix) /
                     prompt blocks; * marks the best online strategy at that
                     capacity (highest hit ratio, Belady excluded; ties all marked)
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
  select p50         median of Policy.SelectVictims' latency, in the unit the
                     header names; - for Belady and for runs that never evicted
  select p99         its 99th percentile, likewise
The header names what is constant: the workload, the mode and granularity, the
fairness groups, the sampling, and in replay mode that nothing is preempted,
rejected or truncated.

-format csv and json carry every field of sim.Report under its JSON name, plus
workload (the trace's file name or the synthetic workload's), sampling (the k
a row ran with, 0 for exact) and best (the * above).
`

// row is one line of the output: the workload, a report, the sample size
// it ran with, and whether it is the best online hit ratio at its capacity.
type row struct {
	Workload string `json:"workload"` // the trace's file name or the synthetic workload's
	sim.Report
	Sampling int  `json:"sampling"`
	Best     bool `json:"best"`
}

// rows pairs each report with its workload and sampling and marks, per
// capacity, the online strategies with the highest hit ratio.
func rows(reports []sim.Report, workload string, sampling int) []row {
	best := map[int]float64{}
	for _, r := range reports {
		if r.Strategy == sim.BeladyName {
			continue
		}
		if b, ok := best[r.CapacityBlocks]; !ok || r.HitRatio > b {
			best[r.CapacityBlocks] = r.HitRatio
		}
	}
	out := make([]row, len(reports))
	for i, r := range reports {
		out[i].Workload, out[i].Report = workload, r
		if r.Strategy != sim.BeladyName {
			out[i].Sampling = sampling
			out[i].Best = r.HitRatio == best[r.CapacityBlocks]
		}
	}
	return out
}

// write prints the reports in -format o.format.
func write(out io.Writer, o *options, w *sim.Workload, reports []sim.Report) error {
	rs := rows(reports, w.Name, o.sampling)
	switch o.format {
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rs)
	case "csv":
		return writeCSV(out, rs)
	}
	return writeTable(out, o, w, rs)
}

// csvFields are the fields of row in order, by their JSON names: the CSV
// columns are the JSON object's keys, so the two formats cannot drift apart.
func csvFields() (names []string, index [][]int) {
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			at := append(append([]int(nil), prefix...), i)
			if f.Anonymous {
				walk(f.Type, at)
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
	walk(reflect.TypeFor[row](), nil)
	return names, index
}

func writeCSV(out io.Writer, rs []row) error {
	names, index := csvFields()
	cw := csv.NewWriter(out)
	if err := cw.Write(names); err != nil {
		return err
	}
	rec := make([]string, len(names))
	for _, r := range rs {
		v := reflect.ValueOf(r)
		for i, at := range index {
			rec[i] = csvValue(v.FieldByIndex(at))
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func csvValue(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'f', 6, 64)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	}
	return v.String()
}

func writeTable(out io.Writer, o *options, w *sim.Workload, rs []row) error {
	serve := o.mode == "serve"
	fmt.Fprintf(out, "workload %s: %d requests, %d-token blocks; fairness over %ss\n",
		w.Name, len(w.Requests), w.BlockTokens, w.GroupKind)
	if serve {
		fmt.Fprintf(out, "mode serve, %s granularity, %v per decoded token; belady is a plain replay: a bound, not a peer\n",
			o.granularity, o.tokenTime)
	} else {
		fmt.Fprintln(out, "mode replay (block granularity): no preemptions, rejections or truncations; belady is Belady's MIN (fewest block loads)")
	}
	if o.sampling > 0 {
		fmt.Fprintf(out, "sampled selection, k=%d\n", o.sampling)
	}
	p50, p99 := latencyUnit(rs, func(r *sim.Report) int64 { return r.SelectP50 }),
		latencyUnit(rs, func(r *sim.Report) int64 { return r.SelectP99 })
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "capacity\tstrategy\thit ratio\ttoken hits\tblock re-prefill\tre-prefill tokens\textra prefill\tutil\thit fairness\t"
	if serve {
		head += "preempt\trejected\ttruncated\treturning p50\treturning p99\t"
	}
	fmt.Fprintf(tw, "%sselect p50 %s\tselect p99 %s\t\n", head, p50.name, p99.name)
	for _, r := range rs {
		name, mark := r.Strategy, " "
		if r.Best {
			mark = "*"
		}
		if serve && name == sim.BeladyName {
			name = "belady (replay bound)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%.3f%s\t%.3f\t%.3f\t%d\t%+.1f%%\t%.3f\t%.3f\t",
			r.CapacityBlocks, name, r.HitRatio, mark, r.TokenHitRatio, r.BlockRePrefillRate,
			r.RePrefillTokens, 100*r.ThroughputImpact, r.Utilization, r.HitFairness)
		if serve {
			if r.Strategy == sim.BeladyName {
				fmt.Fprint(tw, "-\t-\t-\t-\t-\t")
			} else {
				fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t", r.Preemptions, r.Rejected, r.Truncated,
					returningTokens(&r.Report, r.RePrefillTokensP50), returningTokens(&r.Report, r.RePrefillTokensP99))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t\n", p50.format(r.SelectP50), p99.format(r.SelectP99))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(out, "* the best online hit ratio at that capacity")
	return err
}

// unit is one latency column's unit: every value in the column is printed
// in it.
type unit struct {
	name string
	ns   int64 // nanoseconds per unit
}

// latencyUnit picks the column's unit from its smallest measurement, so
// that every value keeps at least two significant digits: ns below a
// microsecond, us below a millisecond, else ms.
func latencyUnit(rs []row, get func(*sim.Report) int64) unit {
	var least int64
	for i := range rs {
		if v := get(&rs[i].Report); v > 0 && (least == 0 || v < least) {
			least = v
		}
	}
	switch {
	case least < 1_000:
		return unit{"ns", 1}
	case least < 1_000_000:
		return unit{"us", 1_000}
	}
	return unit{"ms", 1_000_000}
}

// format prints ns in u, with one decimal below 100 units, "-" when there
// is no measurement.
func (u unit) format(ns int64) string {
	if ns == 0 {
		return "-"
	}
	v := float64(ns) / float64(u.ns)
	if u.ns == 1 || v >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// returningTokens formats a percentile of the returning requests'
// re-prefill tokens, "-" when no request returned.
func returningTokens(r *sim.Report, tokens int64) string {
	if r.ReturningRequests == 0 {
		return "-"
	}
	return strconv.FormatInt(tokens, 10)
}
