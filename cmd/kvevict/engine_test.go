package main

import (
	"encoding/csv"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestCompareServeInTime: with a clock (-gpu, -model) serve mode's rows
// carry the times under one set of names in json, csv and the table,
// Belady's replay rows none; Little's law holds on each row, and vLLM's
// defaults for the GPU are the caps the header names.
func TestCompareServeInTime(t *testing.T) {
	args := []string{"compare", "-mode", "serve", "-workload", "chat", "-requests", "300", "-capacity", "400",
		"-strategies", "lru,fifo", "-gpu", "a100", "-model", "llama-3-8b"}
	code, out, errOut := runArgs(t, append(args, "-format", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	names := []string{"ttft_mean_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_mean_s", "tpot_p50_s", "tpot_p90_s",
		"tpot_p99_s", "e2e_mean_s", "e2e_p50_s", "e2e_p90_s", "e2e_p99_s", "throughput_tokens_per_s", "arrival_rate_per_s",
		"mean_in_system", "mean_running", "busiest_utilization", "session_completion_p50_s", "session_completion_p99_s", "goodput"}
	for _, r := range rows {
		for _, n := range names {
			_, ok := r[n]
			if belady := r["strategy"] == "belady"; ok == belady {
				t.Errorf("%v: field %s present %v", r["strategy"], n, ok)
			}
		}
		if r["strategy"] == "belady" {
			continue
		}
		l, lw := r["mean_in_system"].(float64), r["arrival_rate_per_s"].(float64)*r["e2e_mean_s"].(float64)
		if math.Abs(l-lw) > 0.02*l {
			t.Errorf("%v: Little's law: mean in system %v, arrival rate x mean E2E %v", r["strategy"], l, lw)
		}
	}
	code, out, errOut = runArgs(t, append(args, "-format", "csv")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if !strings.Contains(strings.Join(recs[0], ","), n) {
			t.Errorf("csv header lacks %s", n)
		}
	}
	code, out, errOut = runArgs(t, append(args, "-wide")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// A100: vLLM's caps for a GPU under 70 GiB or named A100.
	for _, want := range []string{"in time: llama-3-8b on a100, max batch 256, token budget 2048", "not measured", "ttft p99 s", "tpot p99 s", "in system"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// -rank goodput marks the rows of the highest goodput.
	code, out, errOut = runArgs(t, append(args, "-format", "json", "-rank", "goodput", "-slo", "30ms")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	top := 0.0
	for _, r := range rows {
		if r["strategy"] != "belady" {
			top = math.Max(top, r["goodput"].(float64))
		}
	}
	for _, r := range rows {
		if r["strategy"] != "belady" && r["best"].(bool) != (r["goodput"].(float64) == top) {
			t.Errorf("-rank goodput: %v has goodput %v, best %v; the highest is %v", r["strategy"], r["goodput"], r["best"], top)
		}
	}
	// Without a clock nothing of time shows.
	code, out, _ = runArgs(t, "compare", "-mode", "serve", "-workload", "chat", "-requests", "100", "-capacity", "400", "-strategies", "lru", "-format", "csv")
	if code != 0 || strings.Contains(out, "ttft") {
		t.Errorf("without a clock: exit %d, csv %q", code, out)
	}
}
