package sim

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/prefix"
)

// exactMirror is a Mirror written from prefix.Event alone: per engine, the
// set of hashes stored and not removed since. It refuses to store a block
// it holds or to remove one it does not, which an event applied twice
// would do.
type exactMirror struct{ held []map[uint64]bool }

func newExactMirror(engines int) *exactMirror {
	m := &exactMirror{}
	for range engines {
		m.held = append(m.held, map[uint64]bool{})
	}
	return m
}

func (m *exactMirror) Apply(engine int, events []prefix.Event) error {
	for _, e := range events {
		for _, h := range e.Hashes {
			if m.held[engine][h] != (e.Kind == prefix.Removed) {
				return fmt.Errorf("engine %d: event %v of block %d, which the mirror holds: %v", engine, e.Kind, h, m.held[engine][h])
			}
			switch e.Kind {
			case prefix.Stored:
				m.held[engine][h] = true
			case prefix.Removed:
				delete(m.held[engine], h)
			}
		}
	}
	return nil
}

func (m *exactMirror) CachedPrefix(engine int, hashes []uint64) int {
	return prefixHits(hashes, func(h uint64) bool { return m.held[engine][h] })
}

// checkingRouter routes as the router it wraps, and checks at every
// request that a mirror fed with the engines' events holds what each
// engine holds: the events a router reads are all there is, each once.
type checkingRouter struct {
	Router
	t      *testing.T
	mirror *exactMirror
	routed int
}

func (r *checkingRouter) Route(req *Request, engines []*Engine) (Choice, error) {
	if r.mirror == nil {
		r.mirror = newExactMirror(len(engines))
	}
	for i, e := range engines {
		if err := r.mirror.Apply(i, e.Events()); err != nil {
			r.t.Fatalf("request %d: %v", r.routed, err)
		}
		if got, want := r.mirror.CachedPrefix(i, req.HashIDs), e.CachedPrefix(req.HashIDs); got != want {
			r.t.Fatalf("request %d, engine %d: the events say %d blocks of the prompt are held, the pool %d", r.routed, i, got, want)
		}
		if e.Capacity() < 1 || e.Load() < 0 || e.Load() > min(r.routed, LoadWindow) {
			r.t.Fatalf("request %d, engine %d: capacity %d, load %d", r.routed, i, e.Capacity(), e.Load())
		}
	}
	r.routed++
	return r.Router.Route(req, engines)
}

// routerNames are the routers of the tests, in the order of newRouter.
var routerNames = []string{"round-robin", "least-loaded", "mirror", "approx", "direct"}

// newRouter returns a new router by name, scoring routers at load weight
// 0.5 and approx at the given guess.
func newRouter(t *testing.T, name string, engines int, guess float64) Router {
	t.Helper()
	var r Router
	var err error
	switch name {
	case "round-robin":
		r = NewRoundRobin()
	case "least-loaded":
		r = NewLeastLoaded()
	case "mirror":
		r, err = NewMirrorRouter(newExactMirror(engines), 0.5)
	case "approx":
		r, err = NewApproxRouter(guess, 0.5)
	case "direct":
		r, err = NewDirectRouter(0.5)
	default:
		t.Fatalf("unknown router %q", name)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func runCluster(t *testing.T, w *Workload, s kvevict.Strategy, r Router, engines, capacity int) ClusterReport {
	t.Helper()
	rep, err := Cluster(w, s, r, ClusterConfig{Config: Config{Capacity: capacity}, Engines: engines})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestClusterConversation replays the conversation trace over engines of
// 2,500 blocks under LRU and checks the numbers the router benchmark
// measured: routing by prefix 0.207 at 4 engines and 0.287 at 8, round
// robin 0.089 and 0.086, within 0.005. A mirror fed by the events routes
// as the direct router. An approximate index sized at half an engine falls well
// below (an independent prototype measured 0.129), and one sized at
// double counts on about two blocks per request that the engine lost.
// Nothing passes the pooled bound.
func TestClusterConversation(t *testing.T) {
	if reduced() {
		t.Skip("long single-threaded replays; run without -race or -short")
	}
	t.Parallel()
	w := loadConversation(t)
	const capacity = 2500
	for _, n := range []int{4, 8} {
		bound, err := PooledBound(w, Config{Capacity: n * capacity})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]ClusterReport{}
		for _, name := range routerNames {
			got[name] = runCluster(t, w, kvevict.LRU, newRouter(t, name, n, 1), n, capacity)
			if h := got[name].HitRatio; h > bound {
				t.Errorf("%s at %d engines: %.4f above the pooled bound %.4f", name, n, h, bound)
			}
		}
		want := map[int][2]float64{4: {0.207, 0.089}, 8: {0.287, 0.086}}[n]
		for i, name := range []string{"direct", "round-robin"} {
			if h := got[name].HitRatio; math.Abs(h-want[i]) > 0.005 {
				t.Errorf("%s at %d engines: hit ratio %.4f, want %.3f +- 0.005", name, n, h, want[i])
			}
		}
		if m, o := got["mirror"], got["direct"]; !reflect.DeepEqual(m, o) || o.MispredictedPerRequest != 0 {
			t.Errorf("%d engines: mirror %+v, direct %+v", n, m, o)
		}
		if n != 4 {
			continue
		}
		for _, tc := range []struct {
			guess              float64
			below              float64 // the hit ratio stays this far under the direct router's at least
			mispredictedWithin [2]float64
		}{
			{0.5, 0.05, [2]float64{0, 0.5}},
			{2, -0.01, [2]float64{1, 3}},
		} {
			a := runCluster(t, w, kvevict.LRU, newRouter(t, "approx", n, tc.guess), n, capacity)
			if a.HitRatio > got["direct"].HitRatio-tc.below {
				t.Errorf("approx at guess %v: %.4f, direct %.4f", tc.guess, a.HitRatio, got["direct"].HitRatio)
			}
			if m := a.MispredictedPerRequest; m < tc.mispredictedWithin[0] || m > tc.mispredictedWithin[1] {
				t.Errorf("approx at guess %v: %.2f mispredicted blocks per request, want %v", tc.guess, m, tc.mispredictedWithin)
			}
		}
	}
}

// TestClusterProperties: on every synthetic workload, under a key strategy
// and Auto, every router sees engines whose events rebuild their pools
// (checkingRouter), a mirror fed by the events routes as the direct router, round
// robin spreads the requests evenly, the hits stay within the references,
// and a run is the same when repeated.
func TestClusterProperties(t *testing.T) {
	skipUnderRace(t)
	t.Parallel()
	for _, name := range WorkloadNames() {
		w, err := Synthetic(name, 2, 300)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []kvevict.Strategy{kvevict.LRU, kvevict.Auto} {
			engines := []int{1, 3}
			if reduced() { // -short keeps the cluster
				engines = engines[1:]
			}
			for _, n := range engines {
				got := map[string]ClusterReport{}
				for _, router := range routerNames {
					r := &checkingRouter{Router: newRouter(t, router, n, 0.7), t: t}
					rep := runCluster(t, w, s, r, n, 200)
					if again := runCluster(t, w, s, newRouter(t, router, n, 0.7), n, 200); !reflect.DeepEqual(again, rep) {
						t.Errorf("%s, %s, %s at %d engines: %+v, then %+v", name, s, router, n, rep, again)
					}
					if rep.BlockHits > rep.BlockRefs || rep.Jain <= 0 || rep.Jain > 1+1e-12 || rep.LoadImbalance < 1-1e-12 ||
						rep.Engines != n || rep.CapacityBlocks != 200 || rep.Strategy != string(s) {
						t.Errorf("%s, %s, %s at %d engines: %+v", name, s, router, n, rep)
					}
					if router == "round-robin" && rep.LoadImbalance > 1.01 {
						t.Errorf("%s, %s at %d engines: round robin's imbalance %.3f", name, s, n, rep.LoadImbalance)
					}
					got[router] = rep
				}
				if !reflect.DeepEqual(got["mirror"], got["direct"]) {
					t.Errorf("%s, %s at %d engines: mirror %+v, direct %+v", name, s, n, got["mirror"], got["direct"])
				}
			}
		}
	}
}

// scriptRouter sends request i to engine script[i], counting on predict
// blocks.
type scriptRouter struct {
	script  []int
	predict int
	err     error
	next    int
}

func (r *scriptRouter) Route(*Request, []*Engine) (Choice, error) {
	c := Choice{Engine: r.script[r.next], Predicted: r.predict}
	r.next++
	return c, r.err
}

// TestClusterScript routes a hand script over two engines of 4 blocks and
// checks the counts by hand: hits on the engine chosen, the prefill past
// them, mispredictions, the load the routers read.
func TestClusterScript(t *testing.T) {
	w := &Workload{Name: "script", BlockTokens: 10, Requests: []Request{
		{HashIDs: []uint64{1, 2, 3}, InputTokens: 25},
		{HashIDs: []uint64{1, 2, 4}, InputTokens: 30}, // engine 1: no hits
		{HashIDs: []uint64{1, 2, 5}, InputTokens: 30}, // engine 0: hits 1, 2
		{HashIDs: []uint64{1, 6}, InputTokens: 20},    // engine 0: hits 1; 3, the older leaf, leaves
	}}
	rep := runCluster(t, w, kvevict.LRU, &scriptRouter{script: []int{0, 1, 0, 0}, predict: 2}, 2, 4)
	want := ClusterReport{
		Engines: 2, CapacityBlocks: 4, Strategy: "lru",
		HitRatio: 3.0 / 11, BlockHits: 3, BlockRefs: 11, PrefillTokens: 25 + 30 + 10 + 10,
		LoadImbalance: 1.5, Jain: 16.0 / (2 * 10),
		MispredictedPerRequest: (2 + 2 + 0 + 1) / 4.0,
	}
	if !reflect.DeepEqual(rep, want) {
		t.Errorf("got %+v\nwant %+v", rep, want)
	}

	var loads [][]int
	probe := &probeRouter{Router: NewLeastLoaded(), loads: &loads}
	w.Requests = append(w.Requests, w.Requests...)
	runCluster(t, w, kvevict.LRU, probe, 3, 4)
	// Least loaded fills the engines in turn; each load counts the
	// requests before this one.
	for i, want := range [][]int{{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {1, 1, 1}, {2, 1, 1}} {
		if got := loads[i]; !equalInts(got, want) {
			t.Errorf("request %d: loads %v, want %v", i, got, want)
		}
	}
}

// probeRouter records the engines' loads at every request.
type probeRouter struct {
	Router
	loads *[][]int
}

func (r *probeRouter) Route(req *Request, engines []*Engine) (Choice, error) {
	var l []int
	for _, e := range engines {
		l = append(l, e.Load())
	}
	*r.loads = append(*r.loads, l)
	return r.Router.Route(req, engines)
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestClusterLoadWindow: an engine's load counts only the last LoadWindow
// requests.
func TestClusterLoadWindow(t *testing.T) {
	w := &Workload{Name: "window", BlockTokens: 1}
	for i := range 3 * LoadWindow {
		w.Requests = append(w.Requests, Request{HashIDs: []uint64{uint64(i)}, InputTokens: 1})
	}
	var loads [][]int
	script := make([]int, len(w.Requests))
	for i := range LoadWindow {
		script[i] = 1 // the first window to engine 1, the rest to engine 0
	}
	probe := &probeRouter{Router: &scriptRouter{script: script}, loads: &loads}
	runCluster(t, w, kvevict.LRU, probe, 2, 8)
	for i, l := range loads {
		want1 := max(0, min(i, LoadWindow)-max(0, i-LoadWindow))
		if want := []int{min(i, LoadWindow) - want1, want1}; !equalInts(l, want) {
			t.Fatalf("request %d: loads %v, want %v", i, l, want)
		}
	}
}

// TestClusterErrors: bad configurations and routers that misbehave stop
// the run with an error naming the request.
func TestClusterErrors(t *testing.T) {
	w, err := Synthetic("chat", 1, 20)
	if err != nil {
		t.Fatal(err)
	}
	ok := ClusterConfig{Config: Config{Capacity: 100}, Engines: 2}
	for _, tc := range []struct {
		name string
		w    *Workload
		s    kvevict.Strategy
		r    Router
		cfg  ClusterConfig
		want string
	}{
		{"no engines", w, kvevict.LRU, NewRoundRobin(), ClusterConfig{Config: Config{Capacity: 100}}, "at least 1 engine"},
		{"no capacity", w, kvevict.LRU, NewRoundRobin(), ClusterConfig{Engines: 2}, "capacity"},
		{"no requests", &Workload{Name: "empty", BlockTokens: 1}, kvevict.LRU, NewRoundRobin(), ok, "no requests"},
		{"nil router", w, kvevict.LRU, nil, ok, "nil router"},
		{"list strategy", w, kvevict.ARC, NewRoundRobin(), ok, "lists of sequences"},
		{"engine out of range", w, kvevict.LRU, &scriptRouter{script: []int{0, 2}}, ok, "request 1: the router chose engine 2 of 2"},
		{"negative prediction", w, kvevict.LRU, &scriptRouter{script: []int{0}, predict: -1}, ok, "request 0: the router chose engine 0 of 2, counting on -1"},
		{"router error", w, kvevict.LRU, &scriptRouter{script: []int{0}, err: errors.New("no route")}, ok, "request 0: no route"},
	} {
		if _, err := Cluster(tc.w, tc.s, tc.r, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	for _, weight := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, err := NewDirectRouter(weight); !errors.Is(err, kvevict.ErrInvalidArgument) {
			t.Errorf("direct at load weight %v: error %v", weight, err)
		}
		if _, err := NewMirrorRouter(newExactMirror(1), weight); !errors.Is(err, kvevict.ErrInvalidArgument) {
			t.Errorf("mirror at load weight %v: error %v", weight, err)
		}
		if _, err := NewApproxRouter(1, weight); !errors.Is(err, kvevict.ErrInvalidArgument) {
			t.Errorf("approx at load weight %v: error %v", weight, err)
		}
	}
	for _, guess := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, err := NewApproxRouter(guess, 0); !errors.Is(err, kvevict.ErrInvalidArgument) {
			t.Errorf("approx at guess %v: error %v", guess, err)
		}
	}
	if _, err := NewMirrorRouter(nil, 0); err == nil {
		t.Error("a nil mirror was accepted")
	}
	huge, err := NewApproxRouter(1e300, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Cluster(w, kvevict.LRU, huge, ok); err == nil || !strings.Contains(err.Error(), "approximate index") {
		t.Errorf("an approximate index of 1e302 blocks: error %v", err)
	}
}
