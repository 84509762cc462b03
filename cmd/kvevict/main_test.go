package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/sim"
)

// runArgs runs the command and returns its exit status and output.
func runArgs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

const excerpt = "../../sim/testdata/mooncake_conversation_excerpt.jsonl"

// TestCompareJSON checks the fixed JSON shape: one object per strategy and
// capacity plus Belady per capacity, with every promised field.
func TestCompareJSON(t *testing.T) {
	code, out, errOut := runArgs(t, "compare", "-trace", excerpt, "-capacity", "400,1600",
		"-strategies", "lru,SLRU", "-format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(errOut, "\r") {
		t.Errorf("stderr is not a terminal, yet got a bar: %q", errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("output is not a JSON array: %v\n%s", err, out)
	}
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 2 capacities x (2 strategies + belady)", len(rows))
	}
	fields := []string{"workload", "strategy", "capacity_blocks", "hit_ratio", "token_hit_ratio", "block_reprefill_rate",
		"reprefill_tokens", "prefill_tokens", "utilization", "hit_fairness", "preemptions",
		"eviction_p50_ns", "eviction_p99_ns"}
	var order []string
	for _, row := range rows {
		for _, f := range fields {
			if _, ok := row[f]; !ok {
				t.Errorf("row %v lacks field %q", row["strategy"], f)
			}
		}
		order = append(order, row["strategy"].(string))
		if row["workload"] != filepath.Base(excerpt) {
			t.Errorf("%v row: workload %v, want the trace's file name", row["strategy"], row["workload"])
		}
	}
	if got := strings.Join(order, " "); got != "lru slru belady lru slru belady" {
		t.Errorf("strategies in order %q", got)
	}
	// The excerpt's golden numbers (see sim's TestReplayGoldenExcerpt).
	for _, tc := range []struct {
		row  int
		want float64
	}{{0, 0.0363}, {2, 0.0797}, {3, 0.0416}, {5, 0.1687}} {
		if got := rows[tc.row]["hit_ratio"].(float64); got < tc.want-0.002 || got > tc.want+0.002 {
			t.Errorf("row %d (%v at %v): hit_ratio %.4f, want %.4f", tc.row, rows[tc.row]["strategy"],
				rows[tc.row]["capacity_blocks"], got, tc.want)
		}
	}
}

func TestCompareTableCSVServe(t *testing.T) {
	code, out, errOut := runArgs(t, "compare", "-workload", "scan", "-requests", "300", "-mode", "serve",
		"-capacity", "200", "-strategies", "lru,fifo")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"workload scan", "lru", "fifo", "belady", "serve"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = runArgs(t, "compare", "-workload", "documents", "-requests", "200",
		"-capacity", "100", "-strategies", "lfu", "-format", "csv")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "workload,strategy,mode,granularity,capacity_blocks,hit_ratio") ||
		!strings.HasPrefix(lines[1], "documents,lfu,replay,block,100,") || !strings.HasPrefix(lines[2], "documents,belady,") {
		t.Errorf("csv:\n%s", out)
	}
}

// TestCompareSampling: -sampling reaches the key strategies' policies (the
// hit ratio moves away from exact's) and the rows say which ran sampled.
func TestCompareSampling(t *testing.T) {
	args := []string{"compare", "-workload", "chat", "-requests", "300", "-capacity", "300",
		"-strategies", "lru", "-format", "json"}
	rowsOf := func(args ...string) []map[string]any {
		t.Helper()
		code, out, errOut := runArgs(t, args...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var rows []map[string]any
		if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
			t.Fatalf("want 2 rows (lru, belady), got %d (%v):\n%s", len(rows), err, out)
		}
		return rows
	}
	exact, sampled := rowsOf(args...), rowsOf(append(args, "-sampling", "5")...)
	for i, want := range []float64{5, 0} { // belady stays exact
		if got := sampled[i]["sampling"]; got != want {
			t.Errorf("%v: sampling %v, want %v", sampled[i]["strategy"], got, want)
		}
		if got := exact[i]["sampling"]; got != 0.0 {
			t.Errorf("exact %v: sampling %v, want 0", exact[i]["strategy"], got)
		}
	}
	if exact[0]["hit_ratio"] == sampled[0]["hit_ratio"] {
		t.Errorf("lru: the same hit ratio %v with and without sampling", exact[0]["hit_ratio"])
	}
	code, out, errOut := runArgs(t, "compare", "-workload", "chat", "-requests", "300", "-capacity", "300",
		"-strategies", "lru", "-sampling", "16")
	if code != 0 || !strings.Contains(out, "sampled selection, k=16") {
		t.Errorf("exit %d, stderr %q; table lacks the sampling note:\n%s", code, errOut, out)
	}
	// "all" with -sampling is the key strategies: the adaptive ones have no
	// sampled selection.
	o, err := parseFlags([]string{"-sampling", "8"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range o.strategies {
		if s.Adaptive() {
			t.Errorf("-sampling with all strategies runs %s, which has no sampled selection", s)
		}
	}
}

func TestComparePlot(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"hits.svg", "hits.png"} {
		path := filepath.Join(dir, name)
		code, _, errOut := runArgs(t, "compare", "-requests", "200", "-capacity", "50,100",
			"-strategies", "lru,mru", "-plot", path)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		st, err := os.Stat(path)
		if err != nil || st.Size() < 1000 {
			t.Errorf("%s: %v, %d bytes", name, err, st.Size())
		}
	}
}

// TestCompareErrors: every mistake is one line on stderr and a non-zero
// exit status.
func TestCompareErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{}, 2, "missing command"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"compare", "-strategies", "lru,bogus"}, 2, `unknown strategy "bogus"`},
		{[]string{"compare", "-capacity", "100,-5"}, 2, `bad capacity "-5"`},
		{[]string{"compare", "-capacity", "lots"}, 2, `bad capacity "lots"`},
		{[]string{"compare", "-format", "xml"}, 2, "-format must be"},
		{[]string{"compare", "-mode", "batch"}, 2, "-mode must be"},
		{[]string{"compare", "-plot", "out.gif"}, 2, "-plot file must end"},
		{[]string{"compare", "-plot", "svg"}, 2, "-plot file must end"},
		{[]string{"compare", "-workload", "nope"}, 2, `unknown workload "nope"`},
		{[]string{"compare", "-trace", "x.jsonl", "-workload", "chat"}, 2, "exclusive"},
		{[]string{"compare", "-bogus"}, 2, "flag provided but not defined"},
		{[]string{"compare", "-sampling", "-1"}, 2, "-sampling must be 0 (exact) or a sample size from 1 to 65536"},
		{[]string{"compare", "-sampling", "65537"}, 2, "-sampling must be 0 (exact) or a sample size from 1 to 65536"},
		{[]string{"compare", "-tier", "cpu:4x:lru", "-tier", "cpu:8x:lru"}, 2, "-tier cpu:4x:lru and -tier cpu:8x:lru: a tier is named by its medium"},
		{[]string{"cluster", "-tier", "storage:4x:lru", "-tier", "storage:100:lru"}, 2, "-tier storage:4x:lru and -tier storage:100:lru: a tier is named by its medium"},
		{[]string{"cluster", "-capacity", "100000000", "-tier", "cpu:10x:lru", "-routers", "prefix"}, 2, "more than the mirror of prefix and ttft holds (536870912)"},
		{[]string{"compare", "-requests", "0"}, 2, "-requests must be 1 to 1000000 requests, got 0"},
		{[]string{"compare", "-requests", "100000000", "-strategies", "lru", "-capacity", "1000"}, 2, "-requests must be 1 to 1000000 requests"},
		{[]string{"cluster", "-requests", "1000001"}, 2, "-requests must be 1 to 1000000 requests"},
		{[]string{"compare", "-mode", "serve", "-token-time", "2m"}, 2, "-token-time must be above 0 and at most 1m0s"},
		{[]string{"compare", "-sampling", "five"}, 2, `invalid value "five" for flag -sampling`},
		{[]string{"compare", "-trace", "/does/not/exist.jsonl"}, 1, "no such file"},
		{[]string{"compare", "-mode", "serve", "-granularity", "page"}, 2, `unknown granularity "page"`},
		{[]string{"compare", "-granularity", "sequence"}, 2, "-granularity sequence needs -mode serve"},
		{[]string{"compare", "-mode", "serve", "-granularity", "block", "-sampling", "5"}, 2, "-sampling needs a policy's selection"},
		{[]string{"compare", "-mode", "serve", "-granularity", "block", "-strategies", "lru,arc"}, 2,
			"-granularity block needs a strategy a prefix tree ranks by (a key strategy or auto), and arc ranks by lists of sequences"},
		{[]string{"compare", "-token-time", "5ms"}, 2, "-token-time needs -mode serve"},
		{[]string{"compare", "-strategies", "lru,fifo", "-baseline", "arc"}, 2, "-baseline arc is not among -strategies"},
		{[]string{"compare", "-baseline", "bogus"}, 2, `unknown strategy "bogus"`},
		{[]string{"compare", "-rank", "ttft"}, 2, "compare ranks by hit, by prefill with -tier in replay mode, or by goodput"},
		{[]string{"compare", "-mode", "serve", "-rank", "goodput"}, 2, "-rank goodput ranks by the share of requests within -slo"},
		{[]string{"compare", "-mode", "serve", "-slo", "1s"}, 2, "-slo and -tpot-slo bound times"},
		{[]string{"compare", "-tpot-slo", "1s"}, 2, "-tpot-slo needs -mode serve"},
		{[]string{"compare", "-mode", "serve", "-gpu", "h100", "-slo", "-1s"}, 2, "-slo and -tpot-slo must be 0 or more"},
		{[]string{"compare", "-rank", "prefill"}, 2, "which compare gives with -tier"},
		{[]string{"compare", "-rank", "best"}, 2, "-rank must be hit"},
		{[]string{"compare", "-trace", excerpt, "-requests", "10"}, 2, "-requests sizes a synthetic workload"},
		{[]string{"compare", "-trace", excerpt, "-seed", "2"}, 2, "-seed seeds a synthetic workload"},
		{[]string{"compare", "-sampling", "4", "-strategies", "lru,sieve"}, 2, "-sampling applies to key strategies, and sieve"},
		{[]string{"compare", "-strategies", "lru,LRU"}, 2, "strategy lru is named twice"},
		{[]string{"compare", "-capacity", "100,200,100"}, 2, "capacity 100 is named twice"},
		{[]string{"compare", "-capacity", "100000001"}, 2, `bad capacity "100000001"`},
		{[]string{"compare", "-plot", "/does/not/exist/hits.png"}, 2, "-plot /does/not/exist/hits.png: cannot write there"},
		{[]string{"compare", "-wide", "-format", "csv"}, 2, "-wide widens the table: -format csv carries every column already"},
		{[]string{"compare", "-gpu", "h100"}, 2, "-gpu needs -mode serve"},
		{[]string{"compare", "-max-batch", "8"}, 2, "-max-batch needs -mode serve"},
		{[]string{"compare", "-token-budget", "8"}, 2, "-token-budget needs -mode serve"},
		{[]string{"compare", "-loop", "open"}, 2, "-loop needs -mode serve"},
		{[]string{"compare", "-mode", "serve", "-token-budget", "512"}, 2, "-token-budget needs a clock"},
		{[]string{"compare", "-mode", "serve", "-gpu", "h100", "-token-time", "5ms"}, 2, "-token-time with -gpu or -model"},
		{[]string{"compare", "-mode", "serve", "-gpu", "v100"}, 2, `unknown GPU "v100"`},
		{[]string{"compare", "-mode", "serve", "-max-batch", "-1"}, 2, "-max-batch must be 0 or 1 to"},
		{[]string{"compare", "-mode", "serve", "-gpu", "a100", "-token-budget", "100000000"}, 2, "-token-budget must be 0 or 1 to"},
		{[]string{"compare", "-mode", "serve", "-loop", "half"}, 2, "-loop must be open or closed"},
		{[]string{"compare", "-mode", "serve", "-workload", "tenants", "-loop", "closed"}, 2, "-loop closed needs sessions"},
	} {
		code, out, errOut := runArgs(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) || !strings.HasPrefix(errOut, "kvevict: ") ||
			strings.Count(errOut, "kvevict: ") != 1 || strings.Count(errOut, "\n") != 1 || out != "" ||
			strings.Contains(errOut, "sim: ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and a line with %q",
				tc.args, code, out, errOut, tc.code, tc.want)
		}
	}
}

// TestHelp: -h prints to stdout and exits 0, so that it pages and pipes,
// for the command and for each subcommand.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-h"}, "kvevict compare|cluster|publish|mirror"},
		{[]string{"help"}, "kvevict compare|cluster|publish|mirror"},
		{[]string{"compare", "-h"}, "-strategies"},
		{[]string{"compare", "-help"}, "Table columns"},
		{[]string{"publish", "-h"}, "-endpoint"},
		{[]string{"mirror", "-h"}, "-duration"},
		{[]string{"cluster", "-h"}, "mispredicted"},
	} {
		code, out, errOut := runArgs(t, tc.args...)
		if code != 0 || !strings.Contains(out, tc.want) || errOut != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout lacks %q:\n%s", tc.args, code, errOut, tc.want, out)
		}
	}
}

// TestCompareGzipTrace: a gzip-compressed trace reads as the same workload
// as the plain file, under its own name, and runs; a truncated one fails
// with a line naming the file.
func TestCompareGzipTrace(t *testing.T) {
	plain, err := os.ReadFile(excerpt)
	if err != nil {
		t.Fatal(err)
	}
	gz := gzipped(t, plain)
	path := filepath.Join(t.TempDir(), "excerpt.jsonl.gz")
	if err := os.WriteFile(path, gz, 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := sim.LoadTrace(excerpt)
	if err != nil {
		t.Fatal(err)
	}
	got, err := loadTrace(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "excerpt.jsonl.gz" {
		t.Errorf("workload named %q, want the file's base name", got.Name)
	}
	got.Name = want.Name
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the gzip-compressed excerpt reads as another workload than the plain one")
	}
	if code, _, errOut := runArgs(t, "compare", "-trace", path, "-capacity", "400", "-strategies", "lru"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if err := os.WriteFile(path, gz[:len(gz)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runArgs(t, "compare", "-trace", path)
	if code != 1 || !strings.HasPrefix(errOut, "kvevict: "+path+" (gzip): ") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("truncated gzip: exit %d, stderr %q", code, errOut)
	}
}

// TestUserMessage: the error line drops the names of the packages an error
// passed through, wherever they begin a cause, and keeps the rest.
func TestUserMessage(t *testing.T) {
	for _, tc := range []struct{ err, want string }{
		{`sim: unknown granularity "page" (known: sequence, tail, block)`, `unknown granularity "page" (known: sequence, tail, block)`},
		{"sim: lru, request 5: request at tick 6: kvevict: insufficient evictable blocks",
			"lru, request 5: request at tick 6: insufficient evictable blocks"},
		{"sim: kvevict: capacity must be in [1, 100]", "capacity must be in [1, 100]"},
		{"open x.jsonl: no such file or directory", "open x.jsonl: no such file or directory"},
		{"x.jsonl: trace line 2: unexpected end of JSON input", "x.jsonl: trace line 2: unexpected end of JSON input"},
		{"plot: nothing to draw", "plot: nothing to draw"},
	} {
		if got := userMessage(errors.New(tc.err)); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestCompareMalformedTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.jsonl")
	data := `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n{\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runArgs(t, "compare", "-trace", path)
	if code != 1 || !strings.Contains(errOut, "trace line 2") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// TestCompareGranularity: -granularity reaches the serve runs and the
// output, "all" at block granularity means the key strategies, and a
// replay is block-level by construction.
func TestCompareGranularity(t *testing.T) {
	for _, g := range []string{"sequence", "tail", "block"} {
		code, out, errOut := runArgs(t, "compare", "-workload", "multiturn", "-requests", "40", "-mode", "serve",
			"-granularity", g, "-capacity", "3000", "-strategies", "lru", "-format", "json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", g, code, errOut)
		}
		var rows []map[string]any
		if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
			t.Fatalf("%s: %v, %d rows", g, err, len(rows))
		}
		if rows[0]["granularity"] != g || rows[0]["mode"] != "serve" || rows[1]["granularity"] != "block" {
			t.Errorf("%s: rows say %v/%v and belady %v", g, rows[0]["granularity"], rows[0]["mode"], rows[1]["granularity"])
		}
	}
	o, err := parseFlags([]string{"-mode", "serve", "-granularity", "BLOCK"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range o.strategies {
		if s.Adaptive() && s != kvevict.Auto {
			t.Errorf("-granularity block with all strategies runs %s, which a tree cannot rank by", s)
		}
	}
	if !slices.Contains(o.strategies, kvevict.Auto) {
		t.Errorf("-granularity block with all strategies: %v, want auto among them", o.strategies)
	}
	if len(o.strategies) == 0 || o.granularity != "block" {
		t.Errorf("strategies %v, granularity %q", o.strategies, o.granularity)
	}
	// A replay ranks its blocks with any strategy, adaptive ones included,
	// though its granularity is block: "all" is every strategy there.
	for _, args := range [][]string{nil, {"-mode", "replay", "-granularity", "block"}, {"-mode", "serve"}} {
		o, err := parseFlags(append(args, "-strategies", "all"), nil)
		if err != nil || !slices.Equal(o.strategies, kvevict.Strategies()) {
			t.Errorf("%v -strategies all: %v, err %v; want every strategy", args, o.strategies, err)
		}
		if _, err := parseFlags(append(args, "-strategies", "lru,arc,sieve"), nil); err != nil {
			t.Errorf("%v with adaptive strategies: %v", args, err)
		}
	}
	for _, tc := range []struct{ args, want string }{
		{"-mode serve", "tail"}, {"-mode replay", "block"}, {"-granularity block", "block"},
	} {
		o, err := parseFlags(strings.Fields(tc.args), nil)
		if err != nil || o.granularity != sim.Granularity(tc.want) {
			t.Errorf("%s: granularity %v, err %v; want %s", tc.args, o.granularity, err, tc.want)
		}
	}
}

// TestCompareCase: -format, -mode and the -plot extension ignore case, as
// strategy names do.
func TestCompareCase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hits.PNG")
	code, out, errOut := runArgs(t, "compare", "-requests", "100", "-capacity", "50", "-strategies", "LRU",
		"-format", "CSV", "-mode", "Replay", "-plot", path)
	if code != 0 || !strings.HasPrefix(out, "workload,strategy,") {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	if data, err := os.ReadFile(path); err != nil || !bytes.HasPrefix(data, []byte("\x89PNG")) {
		t.Errorf("%s is not a PNG: %v", path, err)
	}
}

// TestCompareHugeCapacity: the largest capacity runs on a small workload
// (memory follows the workload; sim's TestMemoryFollowsWorkload bounds it)
// and every request hits what an unbounded cache would.
func TestCompareHugeCapacity(t *testing.T) {
	code, out, errOut := runArgs(t, "compare", "-requests", "100", "-capacity", "100000000",
		"-strategies", "lru", "-mode", "serve", "-format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("%v, %d rows", err, len(rows))
	}
	if rows[0]["throughput_impact"] != 0.0 || rows[0]["evicted_blocks"] != 0.0 {
		t.Errorf("an unbounded pool evicted %v blocks, extra prefill %v", rows[0]["evicted_blocks"], rows[0]["throughput_impact"])
	}
}

// TestCompareRejected: a pool smaller than every prompt rejects every
// request, and the table, the CSV and the JSON say so rather than showing a
// bare zero hit ratio.
func TestCompareRejected(t *testing.T) {
	args := []string{"compare", "-workload", "documents", "-requests", "20", "-mode", "serve",
		"-capacity", "2", "-strategies", "lru"}
	code, out, errOut := runArgs(t, append(args, "-format", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("%v, %d rows", err, len(rows))
	}
	if rows[0]["rejected"] != 20.0 {
		t.Errorf("rejected %v of 20 requests whose prompts exceed 2 blocks", rows[0]["rejected"])
	}
	_, out, _ = runArgs(t, append(args, "-format", "csv")...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	head := strings.Split(lines[0], ",")
	col := slices.Index(head, "rejected")
	if col < 0 || len(lines) != 3 || strings.Split(lines[1], ",")[col] != "20" || !slices.Contains(head, "truncated") {
		t.Errorf("csv lacks rejected = 20 or truncated:\n%s", out)
	}
	_, out, _ = runArgs(t, args...)
	if !strings.Contains(out, "rejected") || !strings.Contains(out, "truncated") || !strings.Contains(out, "belady (bound)") {
		t.Errorf("serve table lacks rejected, truncated or the bound's label:\n%s", out)
	}
}

// tableRows returns the table's column names and, per row, its cells
// split on runs of two spaces or more, and its "best at" lines.
func tableRows(t *testing.T, table string) (head []string, rows [][]string, best []string) {
	t.Helper()
	cells := regexp.MustCompile(`\S+( \S+)*`)
	for _, line := range strings.Split(table, "\n") {
		switch {
		case strings.HasPrefix(line, "best at "):
			best = append(best, line)
		case strings.Contains(line, "  capacity  strategy"):
			head = cells.FindAllString(line, -1)
		case head != nil && strings.TrimSpace(line) != "":
			rows = append(rows, cells.FindAllString(line, -1))
		}
	}
	if head == nil {
		t.Fatalf("no header row in\n%s", table)
	}
	return head, rows, best
}

// TestCompareTableLayout: the table fits 100 columns, its header names the
// constants, the best online hit ratio at each capacity is marked and
// named with its margin over the runner-up, and two hit ratios that print
// alike are equal.
func TestCompareTableLayout(t *testing.T) {
	if raceEnabled {
		t.Skip("the layout is written after the runs; TestCompareParallel runs compare's workers under the detector")
	}
	// The widest tables: in time, ranked by goodput, over two tiers.
	for _, args := range [][]string{
		{"-requests", "100", "-capacity", "50", "-mode", "serve", "-gpu", "h100", "-rank", "goodput"},
		{"-requests", "100", "-capacity", "50", "-mode", "serve", "-gpu", "h100", "-rank", "goodput", "-tier", "cpu:4x:lru", "-tier", "storage:100000:lru"},
	} {
		_, table, _ := runArgs(t, append([]string{"compare"}, args...)...)
		for _, line := range strings.Split(table, "\n") {
			if n := utf8.RuneCountInString(line); n > 100 {
				t.Errorf("%v: a line of %d columns:\n%s", args, n, line)
			}
		}
		if !strings.Contains(table, "goodput") {
			t.Errorf("%v: no goodput column:\n%s", args, table)
		}
	}
	for _, args := range [][]string{
		{"-requests", "300", "-capacity", "50,200"},
		{"-requests", "300", "-capacity", "50,200", "-mode", "serve"},
		{"-workload", "documents", "-requests", "20", "-capacity", "2", "-mode", "serve", "-strategies", "lru,fifo"},
		{"-requests", "300", "-capacity", "50", "-mode", "serve", "-granularity", "block"},
		{"-requests", "300", "-capacity", "50,200", "-mode", "serve", "-gpu", "h100"},
		{"-requests", "300", "-capacity", "50", "-mode", "serve", "-tier", "cpu:4x:lru", "-tier", "storage:100000:lru"},
		{"-requests", "300", "-capacity", "50", "-mode", "serve", "-gpu", "h100", "-tier", "cpu:4x:lru", "-tier", "storage:100000:lru"},
	} {
		code, out, errOut := runArgs(t, append([]string{"compare", "-format", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		var reports []sim.Report
		if err := json.Unmarshal([]byte(out), &reports); err != nil {
			t.Fatal(err)
		}
		_, table, _ := runArgs(t, append([]string{"compare"}, args...)...)
		for _, line := range strings.Split(table, "\n") {
			if n := utf8.RuneCountInString(line); n > 100 {
				t.Errorf("%v: a line of %d columns:\n%s", args, n, line)
			}
		}
		head, rows, best := tableRows(t, table)
		if len(rows) != len(reports) {
			t.Fatalf("%v: %d rows in the table, %d in the JSON", args, len(rows), len(reports))
		}
		hit := slices.Index(head, "hit ratio")
		for _, gone := range []string{"mode", "granularity", "evict p50 µs"} {
			if slices.Contains(head, gone) {
				t.Errorf("%v: the default table has the column %q: %v", args, gone, head)
			}
		}
		// Hand-check the marks and the best lines against the JSON.
		byCapacity := map[int][]int{}
		for i, r := range reports {
			byCapacity[r.CapacityBlocks] = append(byCapacity[r.CapacityBlocks], i)
		}
		for c, idx := range byCapacity {
			var top, next float64 = -1, -1
			var winners []string
			for _, i := range idx {
				if r := reports[i]; r.Strategy != sim.BeladyName {
					switch {
					case r.HitRatio > top:
						top, next, winners = r.HitRatio, top, []string{r.Strategy}
					case r.HitRatio == top:
						winners = append(winners, r.Strategy)
					case r.HitRatio > next:
						next = r.HitRatio
					}
				}
			}
			line := ""
			for _, b := range best {
				if strings.HasPrefix(b, fmt.Sprintf("best at %d blocks: %s ", c, strings.Join(winners, ", "))) ||
					(next < 0 && len(winners) > 1 && strings.HasPrefix(b, fmt.Sprintf("best at %d blocks: all %d online strategies tie at ", c, len(winners)))) {
					line = b
				}
			}
			if line == "" {
				t.Errorf("%v: no line names %v best at %d blocks: %q", args, winners, c, best)
			}
			for _, i := range idx {
				r, cell := reports[i], rows[i][hit]
				want := r.Strategy != sim.BeladyName && r.HitRatio == top
				if got := strings.HasSuffix(cell, "*"); got != want {
					t.Errorf("%v: %d blocks, %s (hit %v, best %v): marked %v", args, c, r.Strategy, r.HitRatio, top, got)
				}
				if printed, _ := strconv.ParseFloat(strings.TrimSuffix(cell, "*"), 64); math.Abs(printed-r.HitRatio) > 1e-4 {
					t.Errorf("%v: %s prints %s for %v", args, r.Strategy, cell, r.HitRatio)
				}
				for _, j := range idx {
					if other := rows[j][hit]; r.HitRatio != reports[j].HitRatio && r.HitRatio == top &&
						strings.TrimSuffix(cell, "*") == strings.TrimSuffix(other, "*") {
						t.Errorf("%v: %d blocks: best %s and %s print alike, %s", args, c, r.Strategy, reports[j].Strategy, cell)
					}
				}
			}
			if next >= 0 {
				_, margin, _ := strings.Cut(line, ", +")
				m, _ := strconv.ParseFloat(strings.Fields(margin)[0], 64)
				if m <= 0 || math.Abs(m-(top-next)) > 1e-4 {
					t.Errorf("%v: %q: margin %v, want %v", args, line, m, top-next)
				}
			}
		}
	}
	_, table, _ := runArgs(t, "compare", "-requests", "300", "-capacity", "50,200", "-strategies", "lru,mru,lfu")
	lines := strings.Split(table, "\n")
	if !strings.Contains(lines[1], "mode replay") || !strings.Contains(lines[1], "no preemptions, rejections or truncations") {
		t.Errorf("header lacks the mode's constants: %q", lines[1])
	}
}

// TestCompareWide: -wide shows every column, the latencies in microseconds
// whatever their size.
func TestCompareWide(t *testing.T) {
	for mode, want := range map[string][]string{
		"replay": {"capacity", "strategy", "hit ratio", "token hits", "block re-prefill", "re-prefill tokens",
			"extra prefill", "util", "hit fairness", "evict p50 µs", "evict p99 µs"},
		"serve": {"capacity", "strategy", "hit ratio", "token hits", "block re-prefill", "re-prefill tokens",
			"extra prefill", "util", "hit fairness", "preempt", "rejected", "truncated", "returning p50",
			"returning p99", "evict p50 µs", "evict p99 µs"},
	} {
		_, table, errOut := runArgs(t, "compare", "-requests", "100", "-capacity", "50", "-strategies", "lru",
			"-mode", mode, "-wide")
		head, rows, _ := tableRows(t, table)
		if !slices.Equal(head, want) || len(rows) != 2 {
			t.Errorf("%s -wide: columns %q, want %q; %d rows; stderr %q", mode, head, want, len(rows), errOut)
		}
	}
}

// TestCompareColumnsExplained: every column of the table, CSV and JSON is
// explained in -h and in docs/simulator.md.
func TestCompareColumnsExplained(t *testing.T) {
	_, help, _ := runArgs(t, "compare", "-h")
	doc, err := os.ReadFile("../../docs/simulator.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-mode", "replay"}, {"-mode", "serve"}, {"-mode", "replay", "-wide"}, {"-mode", "serve", "-wide"},
		{"-mode", "serve", "-wide", "-gpu", "h100"}} {
		_, out, _ := runArgs(t, append([]string{"compare", "-requests", "50", "-capacity", "50", "-strategies", "lru"}, args...)...)
		head, _, _ := tableRows(t, out)
		for _, col := range head {
			if !strings.Contains(help, "\n  "+col) {
				t.Errorf("-h does not explain the %v table's column %q", args, col)
			}
			if !strings.Contains(string(doc), col) {
				t.Errorf("docs/simulator.md does not explain the %v table's column %q", args, col)
			}
		}
	}
	// The docs carry -h's explanation of the table's columns verbatim.
	_, cols, _ := strings.Cut(columnHelp, "\n  capacity")
	cols, _, _ = strings.Cut("  capacity"+cols, "\nThe header")
	if !strings.Contains(string(doc), cols) {
		t.Errorf("docs/simulator.md lacks -h's column explanations as printed:\n%s", cols)
	}
	names, _ := csvFields[row]()
	for _, name := range names {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/simulator.md does not explain the CSV and JSON field %q", name)
		}
	}
}

// TestPlotCurves: strategies with identical hit ratios at every capacity
// become one line named after all of them; Belady stays alone even when it
// matches a strategy.
func TestPlotCurves(t *testing.T) {
	rep := func(s string, c int, h float64) sim.Report {
		return sim.Report{Strategy: s, CapacityBlocks: c, HitRatio: h}
	}
	cs := curves([]sim.Report{
		rep("lru", 10, 0.1), rep("mru", 10, 0.1), rep("qos_aware", 10, 0.1), rep("belady", 10, 0.1),
		rep("lru", 20, 0.3), rep("mru", 20, 0.2), rep("qos_aware", 20, 0.3), rep("belady", 20, 0.3),
	})
	var got []string
	for _, c := range cs {
		got = append(got, strings.Join(c.names, " = "))
	}
	if want := []string{"lru = qos_aware", "mru", "belady"}; !slices.Equal(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
}

// TestPlotStyles: every strategy, and every router of kvevict cluster, has
// a look of its own among those drawn with it: no two share a colour and a
// dash, nor a colour and a glyph, and none is Belady's black.
func TestPlotStyles(t *testing.T) {
	type look struct {
		color  color.Color
		dashed bool
	}
	var strategies []string
	for _, s := range kvevict.Strategies() {
		strategies = append(strategies, string(s))
	}
	for _, names := range [][]string{strategies, routers, {tierGPU, tierHost, tierStorage}} {
		seen := map[look]string{}
		glyphs := map[string]string{}
		for _, s := range names {
			st, ok := styles[s]
			if !ok {
				t.Errorf("%s has no style of its own", s)
				continue
			}
			if other, dup := seen[look{st.color, st.dashed}]; dup {
				t.Errorf("%s and %s share a colour and a dash", s, other)
			}
			seen[look{st.color, st.dashed}] = s
			g := fmt.Sprintf("%v %T", st.color, st.glyph)
			if other, dup := glyphs[g]; dup {
				t.Errorf("%s and %s share a colour and a glyph", s, other)
			}
			glyphs[g] = s
			if r, g, b, _ := st.color.RGBA(); r == 0 && g == 0 && b == 0 {
				t.Errorf("%s is drawn in Belady's black", s)
			}
		}
	}
	if len(styles) != len(strategies)+len(routers)+3 {
		t.Errorf("%d styles for %d strategies and %d routers", len(styles), len(strategies), len(routers))
	}
}

// TestPlotYRange: the y axis ends just above the data (on a multiple of
// 0.05), not where a legend would need room, and leaves 0 only for data far
// above it.
func TestPlotYRange(t *testing.T) {
	for _, tc := range []struct{ lo, hi, bottom, top float64 }{
		{0.04, 0.37, 0, 0.40},
		{0.10, 0.80, 0, 0.85},
		{0.80, 0.90, 0.75, 0.95},
		{0, 0, 0, 0.05},
		{0.99, 1, 0.95, 1},
	} {
		b, top := yRange(tc.lo, tc.hi)
		if math.Abs(b-tc.bottom) > 1e-9 || math.Abs(top-tc.top) > 1e-9 {
			t.Errorf("yRange(%v, %v) = %v, %v; want %v, %v", tc.lo, tc.hi, b, top, tc.bottom, tc.top)
		}
	}
}

// TestHitDecimals: 4 decimals, or as many more as print each capacity's
// best apart from the runner-up with a margin that is not zero; equal
// ratios are ties and need none.
func TestHitDecimals(t *testing.T) {
	rep := func(s string, c int, h float64) row {
		return row{Report: sim.Report{Strategy: s, CapacityBlocks: c, HitRatio: h}}
	}
	for _, tc := range []struct {
		rows []row
		want int
	}{
		{[]row{rep("lru", 10, 0.211), rep("fifo", 10, 0.211), rep("belady", 10, 0.3)}, 4},
		{[]row{rep("lru", 10, 0.21131), rep("fifo", 10, 0.2112), rep("belady", 10, 0.21131)}, 4},
		{[]row{rep("lru", 10, 0.211049), rep("fifo", 10, 0.211041)}, 5},
		{[]row{rep("lru", 10, 0.3), rep("fifo", 10, 0.2), rep("lru", 20, 0.4000001), rep("fifo", 20, 0.4)}, 7},
		{[]row{rep("lru", 10, 0.5), rep("belady", 10, 0.50000001)}, 4}, // Belady is no rival
	} {
		if got := hitDecimals(tc.rows); got != tc.want {
			t.Errorf("%v: %d decimals, want %d", tc.rows, got, tc.want)
		}
	}
}

// TestMicros: a latency prints in microseconds whatever its size, so that
// a column keeps its unit from run to run.
func TestMicros(t *testing.T) {
	for ns, want := range map[int64]string{0: "-", 480: "0.48", 4478: "4.48", 10_000: "10.00", 31_100_000: "31100.00"} {
		if got := micros(ns); got != want {
			t.Errorf("micros(%d) = %q, want %q", ns, got, want)
		}
	}
}

// TestCompareBaseline: with -baseline each row carries its change against
// the baseline's row at its capacity, worked out here from the rows' own
// counts, and the best line repeats the best row's; without it the JSON
// carries none. With -tier and -rank prefill the best row is the one with
// the least modelled prefill seconds.
func TestCompareBaseline(t *testing.T) {
	if raceEnabled {
		t.Skip("the changes are worked out after the runs; TestCompareParallel and TestCompareTiersJSON run compare's workers under the detector")
	}
	type rowJSON struct {
		Strategy      string   `json:"strategy"`
		Capacity      int      `json:"capacity_blocks"`
		HitRatio      float64  `json:"hit_ratio"`
		Prefill       int64    `json:"prefill_tokens"`
		Seconds       float64  `json:"prefill_seconds"`
		Best          bool     `json:"best"`
		Baseline      string   `json:"baseline"`
		HitChange     *float64 `json:"hit_ratio_change"`
		PrefillChange *float64 `json:"prefill_tokens_change"`
	}
	decode := func(args ...string) []rowJSON {
		t.Helper()
		code, out, errOut := runArgs(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		var rs []rowJSON
		if err := json.Unmarshal([]byte(out), &rs); err != nil {
			t.Fatal(err)
		}
		return rs
	}
	base := []string{"compare", "-trace", excerpt, "-capacity", "100,300", "-strategies", "lru,fifo,auto", "-format", "json"}
	for _, r := range decode(base...) {
		if r.Baseline != "" || r.HitChange != nil {
			t.Errorf("no -baseline, and %s carries %q %v", r.Strategy, r.Baseline, r.HitChange)
		}
	}
	for _, tiered := range []bool{false, true} {
		args := append(base, "-baseline", "fifo")
		if tiered {
			args = append(args, "-tier", "cpu:2x:lru", "-rank", "prefill")
		}
		rs := decode(args...)
		fifo := map[int]rowJSON{}
		least := map[int]float64{}
		for _, r := range rs {
			if r.Strategy == "fifo" {
				fifo[r.Capacity] = r
			}
			if r.Strategy != "belady" && (least[r.Capacity] == 0 || r.Seconds < least[r.Capacity]) {
				least[r.Capacity] = r.Seconds
			}
		}
		for _, r := range rs {
			b, ok := fifo[r.Capacity]
			if !ok || r.HitChange == nil || r.PrefillChange == nil {
				continue // Belady at every tier's capacity has no fifo row there
			}
			if r.Baseline != "fifo" || math.Abs(*r.HitChange-(r.HitRatio-b.HitRatio)) > 1e-12 ||
				math.Abs(*r.PrefillChange-(float64(r.Prefill)/float64(b.Prefill)-1)) > 1e-12 {
				t.Errorf("tiered %v, %s at %d: %+v against %+v", tiered, r.Strategy, r.Capacity, r, b)
			}
			if tiered && r.Strategy != "belady" && r.Best != (r.Seconds == least[r.Capacity]) {
				t.Errorf("-rank prefill: %s at %d, %v s, best %v; least %v s", r.Strategy, r.Capacity, r.Seconds, r.Best, least[r.Capacity])
			}
		}
	}
	code, out, _ := runArgs(t, "compare", "-trace", excerpt, "-capacity", "100", "-strategies", "lru,fifo", "-baseline", "fifo")
	if code != 0 || !strings.Contains(out, "; vs fifo: hit ratio ") {
		t.Errorf("exit %d, no verdict against fifo on the best line:\n%s", code, out)
	}
}
