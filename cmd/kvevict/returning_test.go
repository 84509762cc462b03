package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCompareReturningColumns: the returning requests' re-prefill
// percentiles reach every output format, and in a pool that holds a few of
// the agentic sessions some sessions return to lost KV, the median no more
// than the 99th percentile.
func TestCompareReturningColumns(t *testing.T) {
	args := []string{"compare", "-workload", "agentic", "-requests", "300", "-mode", "serve",
		"-capacity", "400", "-strategies", "lru", "-format"}
	code, out, errOut := runArgs(t, append(args, "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("%v, %d rows", err, len(rows))
	}
	p50, _ := rows[0]["reprefill_tokens_p50"].(float64)
	p99, _ := rows[0]["reprefill_tokens_p99"].(float64)
	n, _ := rows[0]["returning_requests"].(float64)
	if n < 1 || p50 <= 0 || p50 > p99 {
		t.Errorf("%v returning requests, p50 %v, p99 %v", n, p50, p99)
	}
	_, out, _ = runArgs(t, append(args, "csv")...)
	if header, _, _ := strings.Cut(out, "\n"); !strings.Contains(header, "reprefill_tokens_p50,reprefill_tokens_p99,returning_requests") {
		t.Errorf("CSV header %q", header)
	}
	_, out, _ = runArgs(t, append(args, "table", "-wide")...)
	if !strings.Contains(out, "returning p50") || !strings.Contains(out, "returning p99") {
		t.Errorf("table lacks the returning columns:\n%s", out)
	}
}
