package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/sim"
)

// TestClusterWireMirror: the prefix router, whose mirror takes the
// engines' events through the wire encoding, routes as direct, which
// reads the engines' pools, on every synthetic workload and on the trace
// excerpt, under a key strategy and Auto: no event is lost or garbled on
// the way. The runs give the same rows on one worker and on three.
func TestClusterWireMirror(t *testing.T) {
	var workloads []*sim.Workload
	names := sim.WorkloadNames()
	if raceEnabled {
		// The detector looks at the three workers sharing a workload, as
		// they share any, so one short workload serves there; the pass
		// without it runs every workload and the excerpt.
		names = []string{"chat"}
	} else {
		w, err := sim.LoadTrace(excerpt)
		if err != nil {
			t.Fatal(err)
		}
		workloads = append(workloads, w)
	}
	for _, name := range names {
		w, err := sim.Synthetic(name, 2, 300)
		if err != nil {
			t.Fatal(err)
		}
		workloads = append(workloads, w)
	}
	for _, w := range workloads {
		o := testClusterOptions()
		o.engines, o.capacities, o.strategies = []int{2, 3}, []int{200}, []kvevict.Strategy{kvevict.LRU, kvevict.Auto}
		o.guess = 0.7
		one, err := runCluster(o, w, io.Discard, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		three, err := runCluster(o, w, io.Discard, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(one, three) {
			t.Fatalf("%s: one worker and three disagree", w.Name)
		}
		if len(one) != len(o.engines)*len(o.strategies)*len(routers) {
			t.Fatalf("%s: %d rows", w.Name, len(one))
		}
		direct := map[string]clusterRow{}
		for _, r := range one {
			if r.Router == routeDirect {
				direct[fmt.Sprint(r.Strategy, r.Engines)] = r
			}
			// No row passes the bound it is set beside.
			if r.HitRatio > r.PooledBelady {
				t.Errorf("%s, %s %s at %d engines: hit ratio %v above the pooled Belady's %v", w.Name, r.Router, r.Strategy, r.Engines, r.HitRatio, r.PooledBelady)
			}
		}
		for _, r := range one {
			if r.Router != routePrefix {
				continue
			}
			d := direct[fmt.Sprint(r.Strategy, r.Engines)]
			if !reflect.DeepEqual(r.ClusterReport, d.ClusterReport) || r.PooledBelady != d.PooledBelady || r.Workload != w.Name {
				t.Errorf("%s, %s at %d engines: prefix %+v, direct %+v", w.Name, r.Strategy, r.Engines, r, d)
			}
		}
	}
}

// testClusterOptions returns cluster's options as its flags' defaults set
// them, every router run.
func testClusterOptions() *clusterOptions {
	o, err := parseClusterFlags(nil, io.Discard)
	if err != nil {
		panic(err)
	}
	return o
}

// TestClusterOutput: the JSON rows carry the fields the issue names, and
// CSV the same columns; the table fits 100 columns.
func TestClusterOutput(t *testing.T) {
	code, out, errOut := runArgs(t, "cluster", "-trace", excerpt, "-engines", "2,4", "-capacity", "300", "-format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2*len(routers) {
		t.Fatalf("%d rows, want %d", len(rows), 2*len(routers))
	}
	for _, f := range []string{"workload", "router", "engines", "capacity_blocks", "strategy", "hit_ratio", "prefill_tokens",
		"load_imbalance", "jain", "mispredicted_per_request", "pooled_belady_hit_ratio", "model", "speedup", "slo_s",
		"ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "within_slo", "busiest_utilization", "baseline", "is_baseline",
		"hit_ratio_change", "prefill_tokens_change", "ttft_p99_change", "rank", "best"} {
		if _, ok := rows[0][f]; !ok {
			t.Errorf("JSON row lacks %q", f)
		}
	}
	// A flag that shapes a row is on the rows it shapes.
	for _, r := range rows {
		_, lw := r["load_weight"]
		_, guess := r["guess"]
		switch name := r["router"].(string); {
		case lw != scoring(name):
			t.Errorf("router %s: load_weight given %v", name, lw)
		case guess != (name == routeApprox):
			t.Errorf("router %s: guess given %v", name, guess)
		}
	}
	code, out, _ = runArgs(t, "cluster", "-trace", excerpt, "-engines", "2", "-capacity", "300", "-format", "csv")
	if header, _, _ := strings.Cut(out, "\n"); code != 0 || !strings.HasPrefix(header, "workload,router,engines,capacity_blocks,strategy,hit_ratio") {
		t.Errorf("exit %d, CSV header %q", code, header)
	}
	for _, decode := range [][]string{nil, {"-decode"}} {
		code, out, _ = runArgs(t, append([]string{"cluster", "-trace", excerpt, "-engines", "2,16", "-capacity", "300", "-strategies", "frequency_cost,lru"}, decode...)...)
		for _, line := range strings.Split(out, "\n") {
			if n := len([]rune(line)); code != 0 || n > 100 {
				t.Errorf("%v: exit %d, a line of %d columns: %q", decode, code, n, line)
			}
		}
	}
}

// TestClusterTiers: with -tier every row carries the engines' tiers
// summed, the GPU's hits under round robin are those of the run without
// tiers (the tiers change no tree), the host's add to them, and no row
// passes the bound at every tier's capacity.
func TestClusterTiers(t *testing.T) {
	args := []string{"cluster", "-trace", excerpt, "-engines", "2", "-capacity", "300", "-routers", "round-robin,ttft,prefix", "-format", "json"}
	decode := func(out string) []clusterRow {
		var rows []clusterRow
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	code, plain, errOut := runArgs(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	code, tiered, errOut := runArgs(t, append(args, "-tier", "cpu:4x:lru", "-write", "back", "-exclusive", "-link", "cpu=pcie4")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	p, q := decode(plain), decode(tiered)
	if len(p) != 3 || len(q) != 3 {
		t.Fatalf("%d and %d rows", len(p), len(q))
	}
	rr := q[0]
	if len(rr.Tiers) != 2 || rr.Tiers[1].CapacityBlocks != 2*1200 || rr.Tiers[0].Hits != p[0].BlockHits ||
		rr.BlockHits != rr.Tiers[0].Hits+rr.Tiers[1].Hits || rr.Tiers[1].Hits == 0 {
		t.Errorf("round robin: without tiers %+v, with %+v", p[0].ClusterReport, rr.ClusterReport)
	}
	for _, r := range q {
		if r.HitRatio > r.PooledBelady || r.PooledBelady < p[0].PooledBelady {
			t.Errorf("%s: hit ratio %v, bound %v (without tiers %v)", r.Router, r.HitRatio, r.PooledBelady, p[0].PooledBelady)
		}
	}
}

// TestClusterFlags: a flag that cannot apply, or a bad value, is refused
// before the run, with exit status 2.
func TestClusterFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-engines", "0"},
		{"-engines", "2,2"},
		{"-engines", "2000"},
		{"-capacity", "0"},
		{"-routers", "random"},
		{"-routers", "prefix,prefix"},
		{"-routers", "direct,oracle"},
		{"-routers", "round-robin", "-guess", "2"},
		{"-routers", "round-robin,least-loaded", "-load-weight", "1"},
		{"-router", "prefix", "-routers", "ttft"},
		{"-guess", "0"},
		{"-load-weight", "-1"},
		{"-load-weight", "1,1"},
		{"-strategies", "arc"},
		{"-speedup", "0"},
		{"-slo", "0s"},
		{"-slo", "2"},
		{"-rank", "p99"},
		{"-baseline", "round-robin"},
		{"-baseline", "oracle/arc"},
		{"-model", "gpt-5"},
		{"-format", "json", "-wide"},
		{"-write", "back"},
		{"-link", "cpu=pcie4"},
		{"-exclusive"},
		{"-tier", "cpu:4x:lru", "-write", "vllm"},
		{"-tier", "cpu:4x:lru", "-exclusive"},
		{"-tier", "gpu:4x:lru"},
		{"-tier", "cpu:4x:lru", "-link", "storage=nvme"},
		{"-format", "yaml"},
		{"-plot", "x.pdf"},
		{"-trace", excerpt, "-requests", "10"},
		{"-trace", excerpt, "-workload", "chat"},
		{"-max-batch", "8"},
		{"-token-budget", "512"},
		{"-loop", "open"},
		{"-tpot-slo", "50ms"},
		{"-decode", "-max-batch", "-1"},
		{"-decode", "-loop", "half"},
		{"-decode", "-tpot-slo", "-1s"},
		{"-decode", "-tier", "cpu:4x:lru", "-write", "vllm"},
		{"-decode", "-loop", "closed", "-workload", "tenants"},
		{"-tier", "cpu:4x:lru", "-format", "csv"},
		{"-gpu", "tpu"},
		{"extra"},
	} {
		code, out, errOut := runArgs(t, append([]string{"cluster"}, args...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, "kvevict cluster -h") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want a usage error", args, code, out, errOut)
		}
	}
}

// TestClusterPlotColours: a cluster's plot gives each series a colour of
// its own, six routers under two strategies included (issue 51: ten
// series drew in two colours, one per strategy), so that the palette
// holds one distinct colour per series.
func TestClusterPlotColours(t *testing.T) {
	o := &clusterOptions{loadWeights: []float64{0.5}}
	var rs []clusterRow
	for hit, s := range []string{"lru", "auto"} {
		for k, r := range routers {
			for _, n := range []int{2, 4} {
				rs = append(rs, clusterRow{Router: r, ClusterReport: sim.ClusterReport{Strategy: s, Engines: n, CapacityBlocks: 500,
					HitRatio: float64(10*hit+k+n) / 100}, PooledBelady: 0.5})
			}
		}
	}
	keys := map[string]bool{}
	series := 0
	for _, c := range clusterCurves(o, rs) {
		if c.style == sim.BeladyName {
			continue
		}
		series++
		if keys[c.color] {
			t.Errorf("two series share colour key %q", c.color)
		}
		keys[c.color] = true
	}
	if series != 2*len(routers) {
		t.Fatalf("%d series, want %d", series, 2*len(routers))
	}
	colours := map[color.RGBA]bool{}
	for _, c := range palette {
		colours[color.RGBAModel.Convert(c).(color.RGBA)] = true
	}
	if len(colours) != len(palette) || len(palette) < series {
		t.Errorf("the palette holds %d distinct colours of %d, for %d series", len(colours), len(palette), series)
	}
}

// TestClusterDecodeIsServe checks the one engine model from the command
// line, as issue 48 words it: a cluster of one engine that decodes, behind
// round robin, and compare's serve mode at block granularity on the same
// GPU, model and caps give the same hit ratio, TTFT p99 and TPOT p99.
func TestClusterDecodeIsServe(t *testing.T) {
	for _, below := range [][]string{nil, {"-tier", "cpu:3x:lru", "-write", "back", "-link", "cpu=pcie4"}} {
		clusterDecodeIsServe(t, below)
	}
}

// clusterDecodeIsServe is TestClusterDecodeIsServe over the tiers of the
// flags below.
func clusterDecodeIsServe(t *testing.T, below []string) {
	caps := append([]string{"-capacity", "400", "-max-batch", "16", "-token-budget", "1024"}, below...)
	code, out, errOut := runArgs(t, append([]string{"cluster", "-workload", "agentic", "-requests", "300", "-engines", "1",
		"-routers", "round-robin", "-decode", "-format", "json"}, caps...)...)
	if code != 0 {
		t.Fatalf("cluster: exit %d: %s", code, errOut)
	}
	var cluster []map[string]any
	if err := json.Unmarshal([]byte(out), &cluster); err != nil || len(cluster) != 1 {
		t.Fatalf("cluster: %d rows, %v", len(cluster), err)
	}
	code, out, errOut = runArgs(t, append([]string{"compare", "-workload", "agentic", "-requests", "300", "-mode", "serve",
		"-granularity", "block", "-strategies", "lru", "-gpu", "h100", "-format", "json"}, caps...)...)
	if code != 0 {
		t.Fatalf("compare: exit %d: %s", code, errOut)
	}
	var serve []map[string]any
	if err := json.Unmarshal([]byte(out), &serve); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(serve, func(r map[string]any) bool { return r["strategy"] == "lru" })
	if i < 0 {
		t.Fatalf("compare has no lru row: %v", serve)
	}
	for _, f := range []string{"hit_ratio", "ttft_p99_s", "tpot_p99_s", "e2e_mean_s", "mean_in_system", "load_seconds"} {
		c, s := cluster[0][f], serve[i][f]
		if c == nil || c != s {
			t.Errorf("%v: %s: cluster %v, compare -mode serve %v", below, f, c, s)
		}
	}
	if !reflect.DeepEqual(cluster[0]["tiers"], serve[i]["tiers"]) || (below != nil) != (serve[i]["load_seconds"] != 0.0) {
		t.Errorf("%v: tiers: cluster %v, compare -mode serve %v, load %v s", below, cluster[0]["tiers"], serve[i]["tiers"], serve[i]["load_seconds"])
	}
	if p, ok := cluster[0]["preemptions"].(float64); !ok || p == 0 {
		t.Errorf("preemptions %v: the pool is too large to test the model under pressure", cluster[0]["preemptions"])
	}
}
