package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/sim"
)

// write prints the reports; sampling is -sampling's k (0: exact).
func write(out io.Writer, format string, w *sim.Workload, reports []sim.Report, sampling int) error {
	switch format {
	case "json":
		rows := make([]jsonRow, len(reports))
		for i, r := range reports {
			rows[i] = jsonRow{r, sampledBy(r.Strategy, sampling)}
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	case "csv":
		return writeCSV(out, reports, sampling)
	}
	return writeTable(out, w, reports, sampling)
}

// jsonRow is one object of -format json: the report's fields and sampling.
type jsonRow struct {
	sim.Report
	Sampling int `json:"sampling"`
}

// sampledBy is the sample size a report's strategy ran with: k for the key
// strategies, 0 (exact) for Belady and for the adaptive strategies, which
// ignore kvevict.WithSampling.
func sampledBy(strategy string, k int) int {
	switch kvevict.Strategy(strategy) {
	case sim.BeladyName, kvevict.ARC, kvevict.S3FIFO, kvevict.SIEVE, kvevict.Auto:
		return 0
	}
	return k
}

var csvHeader = []string{
	"strategy", "mode", "granularity", "capacity_blocks", "hit_ratio", "token_hit_ratio", "reprefill_rate",
	"reprefill_tokens", "prefill_tokens", "unbounded_prefill_tokens", "throughput_impact",
	"utilization", "fairness", "fairness_over", "preemptions", "select_p50_ns", "select_p99_ns",
	"sampling",
}

func writeCSV(out io.Writer, reports []sim.Report, sampling int) error {
	cw := csv.NewWriter(out)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, r := range reports {
		row := []string{
			r.Strategy, r.Mode, r.Granularity, i(int64(r.CapacityBlocks)), f(r.HitRatio), f(r.TokenHitRatio), f(r.ReprefillRate),
			i(r.ReprefillTokens), i(r.PrefillTokens), i(r.UnboundedPrefillTokens), f(r.ThroughputImpact),
			f(r.Utilization), f(r.Fairness), r.FairnessOver, i(int64(r.Preemptions)), i(r.SelectP50), i(r.SelectP99),
			i(int64(sampledBy(r.Strategy, sampling))),
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func writeTable(out io.Writer, w *sim.Workload, reports []sim.Report, sampling int) error {
	fmt.Fprintf(out, "workload %s: %d requests, %d-token blocks; fairness over %ss",
		w.Name, len(w.Requests), w.BlockTokens, w.GroupKind)
	if sampling > 0 {
		fmt.Fprintf(out, "; sampled selection, k=%d (arc, s3fifo, sieve exact)", sampling)
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tmode\tgranularity\tcapacity\thit ratio\ttoken hits\tre-prefill\tre-prefill tokens\textra prefill\tutil\tfairness\tpreempt\tp50\tp99\t")
	for _, r := range reports {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.3f\t%.3f\t%.3f\t%d\t%+.1f%%\t%.3f\t%.3f\t%d\t%s\t%s\t\n",
			r.Strategy, r.Mode, r.Granularity, r.CapacityBlocks, r.HitRatio, r.TokenHitRatio, r.ReprefillRate,
			r.ReprefillTokens, 100*r.ThroughputImpact, r.Utilization, r.Fairness, r.Preemptions, nanos(r.SelectP50), nanos(r.SelectP99))
	}
	return tw.Flush()
}

// nanos formats a latency compactly, "-" when there is none.
func nanos(ns int64) string {
	switch {
	case ns == 0:
		return "-"
	case ns < 10_000:
		return fmt.Sprintf("%dns", ns)
	case ns < 10_000_000:
		return fmt.Sprintf("%dus", ns/1000)
	}
	return fmt.Sprintf("%dms", ns/1_000_000)
}
