package sim

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sagellm/kvevict"
)

// TestTraceReaderWait: DynoSim's fields reach Request.Wait: wait_for as
// the indices of the lines whose request_id it names, delay (or delay_ms)
// plus tool_wait_ms, fractions of a millisecond kept, as the pause; a
// line without them has no Wait.
func TestTraceReaderWait(t *testing.T) {
	in := `{"timestamp": 0, "input_length": 4, "output_length": 5, "hash_ids": [1], "session_id": "a", "request_id": "a1"}
{"timestamp": 0, "input_length": 4, "output_length": 10, "hash_ids": [2], "session_id": "b", "request_id": "b1"}
{"timestamp": 900, "input_length": 8, "output_length": 1, "hash_ids": [1, 3], "session_id": "a", "delay": 250}
{"timestamp": 900, "input_length": 4, "output_length": 1, "hash_ids": [4], "session_id": "c", "wait_for": ["a1", "b1"], "delay_ms": 20, "tool_wait_ms": 30.5}
{"timestamp": 900, "input_length": 4, "output_length": 1, "hash_ids": [5], "session_id": "d", "delay": 0}
`
	reqs, err := ReadTrace(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []*Wait{nil, nil, {Pause: 250 * time.Millisecond}, {For: []int{0, 1}, Pause: 50500 * time.Microsecond}, {}}
	for i, r := range reqs {
		if !reflect.DeepEqual(r.Wait, want[i]) {
			t.Errorf("request %d: Wait %+v, want %+v", i, r.Wait, want[i])
		}
	}
}

func TestTraceReaderWaitErrors(t *testing.T) {
	line := func(fields string) string {
		return `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1], "session_id": "s"` + fields + "}\n"
	}
	for _, tc := range []struct{ name, in, want string }{
		{"negative delay", line("") + line(`, "delay": -1`), `trace line 2: "delay" must be 0 to 2592000000 milliseconds, got -1`},
		{"huge delay_ms", line("") + line(`, "delay_ms": 1e300`), `trace line 2: "delay_ms" must be 0 to 2592000000 milliseconds, got 1e+300`},
		{"negative tool wait", line("") + line(`, "tool_wait_ms": -0.5`), `trace line 2: "tool_wait_ms" must be 0 to 2592000000 milliseconds, got -0.5`},
		{"pause past the most", line("") + line(`, "delay": 2592000000, "tool_wait_ms": 1`), `trace line 2: "delay" plus "tool_wait_ms" is 720h0m0.001s, more than 720h0m0s`},
		{"delay and delay_ms", line("") + line(`, "delay": 1, "delay_ms": 1`), `trace line 2: "delay" and "delay_ms" are one field`},
		{"string delay", line("") + line(`, "delay": "5"`), `trace line 2: "delay" must be a number of milliseconds, got a JSON string`},
		{"delay on a first request", line(`, "delay": 5, "session_id": "new"`), `trace line 1: a pause ("delay", "tool_wait_ms") on its session's first request without "wait_for"`},
		{"unknown wait_for", line(`, "request_id": "a"`) + line(`, "wait_for": ["a", "x"]`), `trace line 2: "wait_for" names "x", the request_id of no earlier line`},
		{"later wait_for", line("") + line(`, "wait_for": ["c"]`) + line(`, "request_id": "c"`), `trace line 2: "wait_for" names "c", the request_id of no earlier line`},
		{"waits for itself", line(`, "request_id": "a", "wait_for": ["a"]`), `trace line 1: "wait_for" names "a"`},
		{"string wait_for", line(`, "request_id": "a"`) + line(`, "wait_for": "a"`), `trace line 2: "wait_for" must be an array of request_id strings, got a JSON string`},
		{"number in wait_for", line(`, "request_id": "a"`) + line(`, "wait_for": [1]`), `trace line 2: "wait_for`},
		{"repeated request_id", line(`, "request_id": "a"`) + line(`, "request_id": "a"`), `trace line 2: "request_id" "a" is an earlier line's`},
		{"empty request_id", line(`, "request_id": ""`), `trace line 1: "request_id" must not be empty`},
		{"number request_id", line(`, "request_id": 7`), `trace line 1: "request_id" must be a string, got a JSON number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadTrace(strings.NewReader(tc.in))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("err = %v, want prefix %q", err, tc.want)
			}
		})
	}
}

// serveArrivals runs w through a pool of capacity blocks without a clock
// and returns when each request arrived, in ticks (microseconds).
func serveArrivals(t *testing.T, w *Workload, capacity int) []int64 {
	t.Helper()
	arrival := make([]int64, len(w.Requests))
	for i := range arrival {
		arrival[i] = -1
	}
	cfg := ServeConfig{Config: Config{Capacity: capacity}, afterStep: func(p *pool) {
		for _, r := range p.waiting {
			if arrival[r] < 0 {
				arrival[r] = p.now
			}
		}
		for _, s := range p.running {
			if arrival[s.req] < 0 {
				arrival[s.req] = p.now
			}
		}
		checkClosedLoop(t, p)
	}}
	if _, err := Serve(w, kvevict.LRU, cfg); err != nil {
		t.Fatal(err)
	}
	return arrival
}

// TestServeWait: a pool that admits every request at once finishes each
// at its arrival plus OutputTokens x 20 ms (DefaultTokenTime), so by hand:
// a1 and b1 arrive at 0 and finish at 100 and 200 ms; a's next turn, with
// a delay of 250 ms, arrives 250 ms after a1's finish, at 350 ms, though
// its timestamp says 900 (DynoSim's delay replaces the timestamp); c's,
// waiting for a1 and b1 with 20 + 30.5 ms, 50.5 ms after the later of
// them, at 250.5 ms; and e's, waiting for b1 alone with no pause, when b1
// finishes, at 200 ms. Open loop, all arrive at their timestamps.
func TestServeWait(t *testing.T) {
	in := `{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 11], "session_id": "a", "request_id": "a1"}
{"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [2, 12], "session_id": "b", "request_id": "b1"}
{"timestamp": 900, "input_length": 700, "output_length": 1, "hash_ids": [1, 11], "session_id": "a", "delay": 250}
{"timestamp": 900, "input_length": 4, "output_length": 1, "hash_ids": [4], "session_id": "c", "wait_for": ["a1", "b1"], "delay_ms": 20, "tool_wait_ms": 30.5}
{"timestamp": 900, "input_length": 4, "output_length": 1, "hash_ids": [5], "session_id": "e", "wait_for": ["b1"]}
`
	w, err := ReadWorkload(strings.NewReader(in), "wait")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := serveArrivals(t, w, 100), []int64{0, 0, 350_000, 250_500, 200_000}; !slices.Equal(got, want) {
		t.Errorf("closed loop: arrivals %v µs, want %v", got, want)
	}
	// A pool of three blocks holds one of the two-block prompts of a1
	// and b1 at a time: b1 waits for a1 to finish (100 ms) and finishes
	// at 300 ms, which moves c's turn to 350.5 ms and e's to 300 ms; a's
	// next turn still follows a1.
	if got, want := serveArrivals(t, w, 3), []int64{0, 0, 350_000, 350_500, 300_000}; !slices.Equal(got, want) {
		t.Errorf("three blocks: arrivals %v µs, want %v", got, want)
	}
}

// TestServeWaitRefused: a workload built in Go may not wait for a later
// request, or for itself, nor pause out of range.
func TestServeWaitRefused(t *testing.T) {
	req := func(wait *Wait) Request {
		return Request{InputTokens: 4, OutputTokens: 1, HashIDs: []uint64{1}, Wait: wait}
	}
	for _, tc := range []struct {
		name string
		wait *Wait
		want string
	}{
		{"later", &Wait{For: []int{2}}, "request 1: waits for request 2, not an earlier one"},
		{"itself", &Wait{For: []int{1}}, "request 1: waits for request 1, not an earlier one"},
		{"negative", &Wait{For: []int{-1}}, "request 1: waits for request -1"},
		{"negative pause", &Wait{Pause: -time.Millisecond}, "request 1: pause -1ms is out of range: want 0 to 720h0m0s"},
		{"long pause", &Wait{Pause: MaxPause + 1}, "request 1: pause 720h0m0.000000001s is out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &Workload{Name: "go", BlockTokens: 4, GroupKind: "session", Requests: []Request{req(nil), req(tc.wait), req(nil)}}
			_, err := Serve(w, kvevict.LRU, ServeConfig{Config: Config{Capacity: 10}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q in it", err, tc.want)
			}
		})
	}
}
