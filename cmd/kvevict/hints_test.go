package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCompareHintsErrors: -hints where no structure honours hints, and bad
// sources, are refused with one line before any work.
func TestCompareHintsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-hints", "none"}, "-hints needs -mode serve"},
		{[]string{"-tier", "cpu:4x:lru", "-hints", "none"}, "-hints needs -mode serve"},
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
