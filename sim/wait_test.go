package sim

import (
	"reflect"
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
