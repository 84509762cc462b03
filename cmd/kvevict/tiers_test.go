package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sagellm/kvevict/sim"
)

// TestCompareTiersErrors: every bad tier flag is refused before any work,
// with a line that says why.
func TestCompareTiersErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-tier", "cpu:0:lru"}, "the size must be 1 to 2147483647 blocks"},
		{[]string{"-tier", "cpu:-3x:lru"}, "whole number from 1 to 65536"},
		{[]string{"-tier", "cpu:9999999999999999x:lru"}, "whole number from 1 to 65536"},
		{[]string{"-tier", "cpu:65536x:lru", "-capacity", "100000"}, "more than a tier holds"},
		{[]string{"-tier", "nvme:100:lru"}, `unknown medium "nvme"`},
		{[]string{"-tier", "gpu:100:lru"}, "-tier names the tiers below the GPU"},
		{[]string{"-tier", "cpu:100:bogus"}, `unknown strategy "bogus"`},
		{[]string{"-tier", "cpu:100"}, "want MEDIUM:BLOCKS:STRATEGY"},
		{[]string{"-tier", "storage:100:lru", "-tier", "cpu:50:lru"}, "list the tiers from the GPU down"},
		{[]string{"-write", "back"}, "-write needs -tier"},
		{[]string{"-exclusive"}, "-exclusive needs -tier"},
		{[]string{"-link", "cpu=pcie5"}, "-link needs -tier"},
		{[]string{"-model", "llama-3-8b"}, "-model needs -tier or -mode serve"},
		{[]string{"-tier", "cpu:100:lru", "-write", "sideways"}, `unknown write policy "sideways"`},
		{[]string{"-tier", "cpu:100:lru", "-write", "selective=0"}, "threshold must be a whole number"},
		{[]string{"-tier", "cpu:100:lru", "-exclusive"}, "-exclusive needs -write back"},
		{[]string{"-tier", "cpu:100:lru", "-write", "back", "-exclusive", "-inclusive"}, "choose one"},
		{[]string{"-tier", "cpu:100:s3fifo", "-write", "vllm"}, "one -tier cpu:BLOCKS:lru or cpu:BLOCKS:arc"},
		{[]string{"-tier", "cpu:100:lru", "-link", "cpu=,10us"}, "-link"},
		{[]string{"-tier", "cpu:100:lru", "-link", "storage=nvme"}, "no -tier on that medium"},
		{[]string{"-tier", "cpu:100:lru", "-link", "cpu=pcie5", "-link", "cpu=pcie4"}, "given twice"},
		{[]string{"-tier", "cpu:100:lru", "-model", "gpt-9"}, "gpt-9"},
		{[]string{"-tier", "cpu:100:lru", "-mode", "serve", "-write", "vllm"}, "serve mode's pool is its own"},
		{[]string{"-tier", "cpu:100:lru", "-mode", "serve", "-link", "cpu=pcie4"}, "-link times the loads"},
		{[]string{"-tier", "cpu:100:lru", "-mode", "serve", "-rank", "prefill"}, "in serve mode a prefill shares its steps"},
		{[]string{"-tier", "cpu:100:lru", "-format", "csv"}, "use -format json"},
		{[]string{"-tier", "cpu:100:lru", "-capacity", "10,20", "-plot", "x.svg"}, "give it in times the GPU's"},
		{[]string{"-tier", "cpu:100:lru", "-sampling", "4", "-strategies", "lru"}, "-sampling and -tier"},
	} {
		code, out, errOut := runArgs(t, append([]string{"compare", "-requests", "50"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 || out != "" ||
			strings.Contains(errOut, ": tier: ") || strings.Contains(errOut, "kvevict: tier: ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and a line with %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// TestCompareTiersJSON: each row carries its tiers and the fields the
// issue names, and a row's GPU is the plain replay's pool: its hits are
// the plain compare's, whatever lies below.
func TestCompareTiersJSON(t *testing.T) {
	common := []string{"compare", "-format", "json", "-requests", "400", "-capacity", "100,300", "-strategies", "lru,arc"}
	code, out, errOut := runArgs(t, common...)
	if code != 0 {
		t.Fatalf("plain: exit %d: %s", code, errOut)
	}
	var plain []sim.Report
	if err := json.Unmarshal([]byte(out), &plain); err != nil {
		t.Fatal(err)
	}
	hits := map[string]int64{}
	for _, r := range plain {
		hits[r.Strategy+"/"+strconv.Itoa(r.CapacityBlocks)] = r.BlockHits
	}
	code, out, errOut = runArgs(t, append(common, "-tier", "cpu:2x:lru", "-tier", "storage:2000:s3fifo", "-write", "back")...)
	if code != 0 {
		t.Fatalf("tiered: exit %d: %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2*4 {
		t.Fatalf("%d rows, want 2 strategies and 2 Belady rows at each of 2 capacities", len(rows))
	}
	for _, r := range rows {
		for _, k := range []string{"gpu_hits", "misses", "block_refs", "prefill_tokens", "prefill_seconds", "tiers", "write", "best", "model"} {
			if _, ok := r[k]; !ok {
				t.Fatalf("row %v lacks %q", r["strategy"], k)
			}
		}
		if r["strategy"] == sim.BeladyName {
			continue
		}
		tiers := r["tiers"].([]any)
		if len(tiers) != 3 {
			t.Fatalf("%d tiers, want GPU, cpu, storage", len(tiers))
		}
		for i, want := range []string{"GPU", "CPU", "STORAGE"} {
			tr := tiers[i].(map[string]any)
			for _, k := range []string{"medium", "capacity_blocks", "strategy", "hits", "stored_blocks", "evicted_blocks", "failed_stores"} {
				if _, ok := tr[k]; !ok {
					t.Fatalf("tier %d lacks %q", i, k)
				}
			}
			if tr["medium"] != want {
				t.Fatalf("tier %d is %v, want %s", i, tr["medium"], want)
			}
		}
		gpu := int(r["gpu_capacity_blocks"].(float64))
		if cpu := tiers[1].(map[string]any)["capacity_blocks"].(float64); int(cpu) != 2*gpu {
			t.Fatalf("cpu:2x beside %d GPU blocks holds %v", gpu, cpu)
		}
		key := r["strategy"].(string) + "/" + strconv.Itoa(gpu)
		if got := int64(r["gpu_hits"].(float64)); got != hits[key] {
			t.Fatalf("%s: GPU hits %d, the plain replay's %d", key, got, hits[key])
		}
		if r["prefill_seconds"].(float64) <= 0 {
			t.Fatalf("%s: no prefill seconds", key)
		}
	}
	code, table, errOut := runArgs(t, "compare", "-requests", "400", "-capacity", "100,300", "-tier", "cpu:4x:lru", "-tier", "storage:8x:lru")
	if code != 0 {
		t.Fatalf("table: exit %d: %s", code, errOut)
	}
	for _, line := range strings.Split(table, "\n") {
		if n := len([]rune(line)); n > 100 {
			t.Fatalf("a line of %d columns:\n%s", n, line)
		}
	}
}

func TestBytesCell(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.00 KiB"}, {64 << 20, "64.0 MiB"}, {1020 << 30, "1020 GiB"}, {3 << 40, "3.00 TiB"}} {
		if got := bytesCell(c.n); got != c.want {
			t.Errorf("bytesCell(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

// TestTierColumnsExplained: -h and docs/tiers.md explain every column of
// compare -tier's table, the docs with -h's text verbatim.
func TestTierColumnsExplained(t *testing.T) {
	_, help, _ := runArgs(t, "compare", "-h")
	doc, err := os.ReadFile("../../docs/tiers.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), strings.Trim(tierColumnHelp, "\n")) {
		t.Error("docs/tiers.md lacks -h's explanation of the tier columns as printed")
	}
	_, out, errOut := runArgs(t, "compare", "-requests", "100", "-capacity", "50", "-strategies", "lru", "-wide",
		"-tier", "cpu:2x:lru", "-tier", "storage:4x:lru")
	lines := strings.Split(out, "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "gpu blocks") })
	if i < 0 {
		t.Fatalf("no header in:\n%s%s", out, errOut)
	}
	for _, col := range regexp.MustCompile(`\S+(?: \S+)*`).FindAllString(lines[i], -1) {
		generic := regexp.MustCompile(`^(cpu|storage)( |$)`).ReplaceAllString(col, "MEDIUM$2")
		if !strings.Contains(help, "\n  "+col) && !strings.Contains(help, "\n  "+generic) && !strings.Contains(help, ", "+col+" ") {
			t.Errorf("-h does not explain the tier table's column %q", col)
		}
	}
}

// FuzzParseTier: -tier's parser never panics, and what it accepts prints
// back as a flag it reads the same.
func FuzzParseTier(f *testing.F) {
	for _, s := range []string{"cpu:10000:lru", "storage:4x:s3fifo", "cpu:0x:lru", "gpu:5:lru", "cpu:9999999999999999999:lru", "cpu:9999999999999999x:lru", "::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := parseTier(s)
		if err != nil {
			return
		}
		again, err := parseTier(spec.String())
		if err != nil || again != spec {
			t.Fatalf("parseTier(%q) = %+v, which prints %q and reads %+v, %v", s, spec, spec.String(), again, err)
		}
		if spec.capacity(1000) < 1 {
			t.Fatalf("parseTier(%q): capacity %d beside 1000 GPU blocks", s, spec.capacity(1000))
		}
	})
}

// TestCompareTiersInterrupt: interrupted, compare -tier writes the GPU
// capacities whose runs all finished, here none, as valid JSON, and says
// which it left out, as compare without -tier does.
func TestCompareTiersInterrupt(t *testing.T) {
	o, err := parseFlags([]string{"-requests", "200", "-capacity", "50,100", "-strategies", "lru", "-format", "json",
		"-tier", "cpu:2x:lru"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	w, err := loadWorkload(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	interrupt := make(chan os.Signal, 1)
	interrupt <- os.Interrupt
	var stdout bytes.Buffer
	err = compareTiers(o, w, &stdout, io.Discard, interrupt, 1)
	if !errors.Is(err, errInterrupted) || !strings.Contains(err.Error(), "left out GPU capacities 50, 100") {
		t.Fatalf("error %v, want the interruption naming both capacities", err)
	}
	var rows []tierRow
	if err := json.Unmarshal(stdout.Bytes(), &rows); err != nil || rows == nil || len(rows) != 0 {
		t.Fatalf("output %q (%v), want []", stdout.String(), err)
	}
}

// TestTierDigitsAndMargin: issue 51's figures, 105,034 and 105,044 hits of
// 288,460 at 5,000 GPU blocks, print alike to 4 decimals; the tier table
// prints them apart, as compare's does, and its best line gives the
// margin over the next.
func TestTierDigitsAndMargin(t *testing.T) {
	const refs = 288_460.0
	tr := func(s string, hits float64, best bool) tierRow {
		return tierRow{TierReport: sim.TierReport{Report: sim.Report{Strategy: s, CapacityBlocks: 5000, HitRatio: hits / refs}},
			GPUCapacity: 5000, Best: best}
	}
	rs := []tierRow{tr("lru", 105_034, false), tr("auto", 105_044, true), tr(sim.BeladyName, 150_000, false)}
	online := tierOnline(rs)
	d := hitDecimals(online)
	lru, auto := strconv.FormatFloat(rs[0].HitRatio, 'f', d, 64), strconv.FormatFloat(rs[1].HitRatio, 'f', d, 64)
	if lru == auto {
		t.Errorf("lru and auto print alike at %d decimals: %s", d, lru)
	}
	line := tierBestLine(rs, online, 5000, rankHit, d)
	if want := "best at 5000 GPU blocks: auto " + auto + ", +"; !strings.HasPrefix(line, want) || !strings.Contains(line, " over lru (hits on any tier)") {
		t.Errorf("best line %q, want %q... over lru", line, want)
	}
}

// TestBestLineTies: when every online strategy run ties, the line says so
// rather than that no other ran; with one strategy run, that none other
// did.
func TestBestLineTies(t *testing.T) {
	r := func(s string, hit float64) row {
		return row{Report: sim.Report{Strategy: s, CapacityBlocks: 100, HitRatio: hit}}
	}
	for _, tc := range []struct {
		rows []row
		want string
	}{
		{[]row{r("lru", 0.5), r("fifo", 0.5), r("arc", 0.5)}, "best at 100 blocks: all 3 online strategies tie at 0.5000"},
		{[]row{r("lru", 0.5)}, "best at 100 blocks: lru 0.5000, no other online strategy run"},
		{[]row{r("lru", 0.5), r("fifo", 0.5), r("arc", 0.25)}, "best at 100 blocks: lru, fifo (tied) 0.5000, +0.2500 over arc"},
	} {
		if got := bestLine(tc.rows, 100, 4, rankHit); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
