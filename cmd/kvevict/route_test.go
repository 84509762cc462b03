package main

import (
	"encoding/json"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/sim"

	"github.com/sagellm/kvevict/internal/tracetest"
)

// loadConversation loads the full Mooncake conversation trace.
func loadConversation(t *testing.T) *sim.Workload {
	t.Helper()
	w, err := sim.LoadTrace(tracetest.Conversation(t))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// clusterAt returns the report of router r with engines engines in rs.
func clusterAt(t *testing.T, rs []clusterReport, router string, engines int) clusterReport {
	t.Helper()
	for _, r := range rs {
		if r.Router == router && r.Engines == engines {
			return r
		}
	}
	t.Fatalf("no %s row at %d engines", router, engines)
	return clusterReport{}
}

// TestClusterConversation runs kvevict cluster's code on the conversation
// trace with engines of 2,500 blocks under LRU and checks the numbers the
// router benchmark measured: routing by prefix on the events' mirror 0.207
// at 4 engines and 0.287 at 8, round robin 0.089 and 0.086, within 0.005.
// An approximate index sized at half an engine falls well below (an
// independent prototype measured 0.129), and one sized at double counts on
// about two blocks per request that the engine lost. The exact mirror knows
// what the engines hold, so prefix routes as the oracle does; nothing
// passes the pooled Belady bound.
func TestClusterConversation(t *testing.T) {
	if raceEnabled {
		t.Skip("a long single-threaded replay; run without -race")
	}
	w := loadConversation(t)
	o := &clusterOptions{engines: []int{4, 8}, capacities: []int{2500}, strategies: []kvevict.Strategy{kvevict.LRU},
		routers: routers, guess: defaultGuess, loadWeight: defaultLoadWeight}
	rs, err := runCluster(o, w, io.Discard, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		router  string
		engines int
		hit     float64
	}{
		{routePrefix, 4, 0.207}, {routeRoundRobin, 4, 0.089},
		{routePrefix, 8, 0.287}, {routeRoundRobin, 8, 0.086},
	} {
		if got := clusterAt(t, rs, want.router, want.engines).HitRatio; math.Abs(got-want.hit) > 0.005 {
			t.Errorf("%s at %d engines: hit ratio %.4f, want %.3f +- 0.005", want.router, want.engines, got, want.hit)
		}
	}
	for _, n := range o.engines {
		prefix, oracle := clusterAt(t, rs, routePrefix, n), clusterAt(t, rs, routeOracle, n)
		if prefix.HitRatio != oracle.HitRatio || prefix.MispredictedPerRequest != 0 {
			t.Errorf("%d engines: prefix %.4f (mispredicting %.3f blocks a request), oracle %.4f: the mirror lost events",
				n, prefix.HitRatio, prefix.MispredictedPerRequest, oracle.HitRatio)
		}
	}
	for _, r := range rs {
		if r.HitRatio > r.PooledBelady {
			t.Errorf("%s at %d engines: %.4f above the pooled Belady bound %.4f", r.Router, r.Engines, r.HitRatio, r.PooledBelady)
		}
	}

	o.engines, o.routers = []int{4}, []string{routeApprox}
	for _, tc := range []struct {
		guess              float64
		below              float64 // the hit ratio stays this far under prefix's at least
		mispredictedWithin [2]float64
	}{
		{0.5, 0.05, [2]float64{0, 0.5}},
		{2, -0.01, [2]float64{1, 3}},
	} {
		o.guess = tc.guess
		approx, err := runCluster(o, w, io.Discard, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		a, prefix := approx[0], clusterAt(t, rs, routePrefix, 4)
		if a.HitRatio > prefix.HitRatio-tc.below {
			t.Errorf("approx at -guess %v: %.4f, prefix %.4f", tc.guess, a.HitRatio, prefix.HitRatio)
		}
		if m := a.MispredictedPerRequest; m < tc.mispredictedWithin[0] || m > tc.mispredictedWithin[1] {
			t.Errorf("approx at -guess %v: %.2f mispredicted blocks per request, want %v", tc.guess, m, tc.mispredictedWithin)
		}
	}
}

// TestClusterDeterministic: the same runs on one worker and on three give
// the same reports, and on every synthetic workload the exact mirror routes
// as the oracle, round robin spreads the requests evenly, and the hits stay
// within the references.
func TestClusterDeterministic(t *testing.T) {
	for _, name := range sim.WorkloadNames() {
		w, err := sim.Synthetic(name, 2, 300)
		if err != nil {
			t.Fatal(err)
		}
		o := &clusterOptions{engines: []int{2, 3}, capacities: []int{200}, strategies: []kvevict.Strategy{kvevict.LRU, kvevict.Auto},
			routers: routers, guess: 0.7, loadWeight: defaultLoadWeight}
		one, err := runCluster(o, w, io.Discard, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		three, err := runCluster(o, w, io.Discard, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(one, three) {
			t.Fatalf("%s: one worker and three disagree", name)
		}
		for _, r := range one {
			if r.BlockHits > r.BlockRefs || r.Jain <= 0 || r.Jain > 1+1e-12 || r.LoadImbalance < 1-1e-12 {
				t.Errorf("%s: %+v", name, r)
			}
			if r.Router == routeRoundRobin && r.LoadImbalance > 1.01 {
				t.Errorf("%s: round robin's imbalance %.3f", name, r.LoadImbalance)
			}
		}
		for _, s := range o.strategies {
			for _, n := range o.engines {
				var prefix, oracle clusterReport
				for _, r := range one {
					if r.Strategy == string(s) && r.Engines == n {
						switch r.Router {
						case routePrefix:
							prefix = r
						case routeOracle:
							oracle = r
						}
					}
				}
				if prefix.BlockHits != oracle.BlockHits || prefix.PrefillTokens != oracle.PrefillTokens {
					t.Errorf("%s, %s at %d engines: prefix %d hits, oracle %d", name, s, n, prefix.BlockHits, oracle.BlockHits)
				}
			}
		}
	}
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
		"load_imbalance", "jain", "mispredicted_per_request", "pooled_belady_hit_ratio"} {
		if _, ok := rows[0][f]; !ok {
			t.Errorf("JSON row lacks %q", f)
		}
	}
	code, out, _ = runArgs(t, "cluster", "-trace", excerpt, "-engines", "2", "-capacity", "300", "-format", "csv")
	if header, _, _ := strings.Cut(out, "\n"); code != 0 || !strings.HasPrefix(header, "workload,router,engines,capacity_blocks,strategy,hit_ratio") {
		t.Errorf("exit %d, CSV header %q", code, header)
	}
	code, out, _ = runArgs(t, "cluster", "-trace", excerpt, "-engines", "2,16", "-capacity", "300", "-strategy", "frequency_cost,lru")
	for _, line := range strings.Split(out, "\n") {
		if n := len([]rune(line)); code != 0 || n > 100 {
			t.Errorf("exit %d, a line of %d columns: %q", code, n, line)
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
		{"-router", "random"},
		{"-router", "prefix,prefix"},
		{"-router", "round-robin", "-guess", "2"},
		{"-router", "round-robin,least-loaded", "-load-weight", "1"},
		{"-guess", "0"},
		{"-load-weight", "-1"},
		{"-strategy", "arc"},
		{"-format", "yaml"},
		{"-plot", "x.pdf"},
		{"-trace", excerpt, "-requests", "10"},
		{"-trace", excerpt, "-workload", "chat"},
		{"extra"},
	} {
		code, out, errOut := runArgs(t, append([]string{"cluster"}, args...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, "kvevict cluster -h") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want a usage error", args, code, out, errOut)
		}
	}
}
