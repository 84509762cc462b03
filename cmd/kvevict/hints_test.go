package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCompareHintsErrors: -hints where no structure honours hints (vLLM's
// host tier), and bad sources, are refused with one line before any work.
func TestCompareHintsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-tier", "cpu:4x:lru", "-write", "vllm", "-hints", "none"}, "-hints with -write vllm"},
		{[]string{"-mode", "serve", "-hints", "oracle"}, `unknown hint source "oracle"`},
		{[]string{"-mode", "serve", "-hints", "hindsight:precision=2"}, "precision must be a number in (0, 1]"},
		{[]string{"-mode", "serve", "-hints", "hindsight:depth=2"}, `unknown parameter "depth"`},
		{[]string{"-mode", "serve", "-hints", "ttl=-5s"}, "ttl: want a duration"},
		{[]string{"-mode", "serve", "-hints", "none,none"}, "hint source none given twice"},
		{[]string{"-mode", "serve", "-requests", "200", "-hints", "hindsight:precision=0.1"}, "precision 0.1 at recall 1 needs"},
	} {
		code, out, errOut := runArgs(t, append([]string{"compare"}, tc.args...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and a line with %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// TestCompareHints: a row per strategy and source, the hints column and
// field, and a best line that names the best row without hints, whose
// figures are the none rows'.
func TestCompareHints(t *testing.T) {
	args := []string{"compare", "-mode", "serve", "-workload", "agentic", "-requests", "400", "-capacity", "300",
		"-strategies", "lru,fifo", "-hints", "none,trace,hindsight:precision=0.9:recall=0.9:seed=2"}
	code, out, errOut := runArgs(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	head, rows, best := tableRows(t, out)
	if len(head) < 3 || head[2] != "hints" {
		t.Fatalf("columns %q, want hints third", head)
	}
	if len(rows) != 7 || rows[2][2] != "hindsight:precision=0.9:recall=0.9:seed=2" || rows[6][2] != "-" {
		t.Fatalf("rows %q: want lru and fifo with each source, then belady", rows)
	}
	code, js, _ := runArgs(t, append(args, "-format", "json")...)
	if code != 0 {
		t.Fatal("json run failed")
	}
	var recs []map[string]any
	if err := json.Unmarshal([]byte(js), &recs); err != nil {
		t.Fatal(err)
	}
	bestNone := ""
	ratio := -1.0
	for _, r := range recs {
		if r["hints"] == "none" && r["hit_ratio"].(float64) > ratio {
			bestNone, ratio = r["strategy"].(string), r["hit_ratio"].(float64)
		}
	}
	if len(best) != 1 || !strings.Contains(best[0], " (") {
		t.Fatalf("best line %q: want the best row with its source", best)
	}
	if !strings.Contains(best[0], "(none)") && !strings.Contains(best[0], "; without hints: "+bestNone) {
		t.Errorf("best line %q does not name the best row without hints, %s", best[0], bestNone)
	}
	// Without -hints, no hints column or field.
	_, plain, _ := runArgs(t, "compare", "-mode", "serve", "-workload", "agentic", "-requests", "400", "-capacity", "300", "-strategies", "lru", "-format", "csv")
	if strings.Contains(plain, "hints") {
		t.Errorf("csv without -hints names hints:\n%s", plain)
	}
}

// TestClusterHints: cluster takes -hints as compare does: bad sources
// refused with one line; a row per router, strategy and source, the none
// row's figures a run's without -hints, whose csv has no hints column;
// the agentic workload's own hints reach the engines (its trace row
// differs) and the verdict names the best row without hints.
func TestClusterHints(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"oracle", `unknown hint source "oracle"`},
		{"ttl=-5s", "ttl: want a duration"},
	} {
		code, out, errOut := runArgs(t, "cluster", "-hints", tc.args)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("-hints %s: exit %d, stdout %q, stderr %q; want exit 2 and a line with %q", tc.args, code, out, errOut, tc.want)
		}
	}
	args := []string{"cluster", "-workload", "agentic", "-requests", "400", "-engines", "2", "-capacity", "500", "-routers", "round-robin"}
	code, plain, errOut := runArgs(t, append(args, "-format", "csv")...)
	if code != 0 || strings.Contains(strings.SplitN(plain, "\n", 2)[0], "hints") {
		t.Fatalf("without -hints: exit %d, %s; header %q, want no hints column", code, errOut, strings.SplitN(plain, "\n", 2)[0])
	}
	records := func(out string) []map[string]any {
		var recs []map[string]any
		if err := json.Unmarshal([]byte(out), &recs); err != nil {
			t.Fatal(err)
		}
		return recs
	}
	_, js, _ := runArgs(t, append(args, "-format", "json")...)
	code, hjs, errOut := runArgs(t, append(args, "-format", "json", "-hints", "none,trace")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	base, hinted := records(js), records(hjs)
	if len(base) != 1 || len(hinted) != 2 || hinted[0]["hints"] != "none" || hinted[1]["hints"] != "trace" {
		t.Fatalf("rows %v and %v: want one, then none and trace", base, hinted)
	}
	for _, f := range []string{"hit_ratio", "prefill_tokens", "ttft_p99_s"} {
		if hinted[0][f] != base[0][f] {
			t.Errorf("%s: none %v, without -hints %v", f, hinted[0][f], base[0][f])
		}
	}
	if hinted[1]["hit_ratio"] == hinted[0]["hit_ratio"] {
		t.Errorf("trace's hit ratio %v is none's: the agentic workload's hints did not reach the engines", hinted[1]["hit_ratio"])
	}
	_, table, _ := runArgs(t, append(args, "-hints", "none,trace", "-rank", "hit")...)
	if !strings.Contains(table, "round-robin (trace)") || !strings.Contains(table, "against round-robin lru (none)") {
		t.Errorf("table names no hint source:\n%s", table)
	}
}

// TestCompareTierHints: compare -tier takes -hints: a row per strategy and
// source, named with it, the none row's figures a run's without -hints,
// and the best line names the best row without hints.
func TestCompareTierHints(t *testing.T) {
	args := []string{"compare", "-workload", "agentic", "-requests", "600", "-capacity", "300", "-strategies", "lru", "-tier", "cpu:2x:lru", "-write", "back", "-format", "json"}
	records := func(out string) []map[string]any {
		var recs []map[string]any
		if err := json.Unmarshal([]byte(out), &recs); err != nil {
			t.Fatal(err)
		}
		return recs
	}
	code, plain, errOut := runArgs(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	code, hinted, errOut := runArgs(t, append(args, "-hints", "none,hindsight")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	base, rows := records(plain), records(hinted)
	if len(rows) != len(base)+1 || rows[0]["hints"] != "none" || rows[1]["hints"] != "hindsight" {
		t.Fatalf("rows %v: want lru with none and hindsight, then the bounds", rows)
	}
	if rows[0]["hit_ratio"] != base[0]["hit_ratio"] || rows[0]["prefill_seconds"] != base[0]["prefill_seconds"] {
		t.Errorf("none: %v, %v; without -hints %v, %v", rows[0]["hit_ratio"], rows[0]["prefill_seconds"], base[0]["hit_ratio"], base[0]["prefill_seconds"])
	}
	_, table, _ := runArgs(t, append(args[:len(args)-2], "-hints", "none,hindsight")...)
	if !strings.Contains(table, "lru (hindsight)") || !strings.Contains(table, "without hints: lru") && !strings.Contains(table, "best at 300 GPU blocks: lru (none)") {
		t.Errorf("table:\n%s", table)
	}
}
