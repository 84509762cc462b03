package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/sagellm/kvevict/sim"
)

func write(out io.Writer, format string, w *sim.Workload, reports []sim.Report) error {
	switch format {
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(reports)
	case "csv":
		return writeCSV(out, reports)
	}
	return writeTable(out, w, reports)
}

var csvHeader = []string{
	"strategy", "mode", "granularity", "capacity_blocks", "hit_ratio", "token_hit_ratio", "reprefill_rate",
	"reprefill_tokens", "prefill_tokens", "unbounded_prefill_tokens", "throughput_impact",
	"utilization", "fairness", "fairness_over", "preemptions", "select_p50_ns", "select_p99_ns",
}

func writeCSV(out io.Writer, reports []sim.Report) error {
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
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func writeTable(out io.Writer, w *sim.Workload, reports []sim.Report) error {
	fmt.Fprintf(out, "workload %s: %d requests, %d-token blocks; fairness over %ss\n",
		w.Name, len(w.Requests), w.BlockTokens, w.GroupKind)
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
