package sim

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/sagellm/kvevict"
)

func TestTraceReader(t *testing.T) {
	in := `{"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [0, 1]}

{"timestamp": 7, "input_length": 600, "output_length": 0, "hash_ids": [0, 1], "extra": true}
{"timestamp": 9, "input_length": 10, "output_length": 1, "hash_ids": [0, 2, 3]}
`
	reqs, err := ReadTrace(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 3 {
		t.Fatalf("got %d requests, want 3", len(reqs))
	}
	r := reqs[2]
	if r.Timestamp != 9 || r.InputTokens != 10 || r.OutputTokens != 1 || len(r.HashIDs) != 3 || r.HashIDs[2] != 3 {
		t.Errorf("request 2 = %+v", r)
	}
	if reqs[0].Group != reqs[1].Group || reqs[0].Group == reqs[2].Group {
		t.Errorf("groups = %d %d %d, want the first two equal and the third different",
			reqs[0].Group, reqs[1].Group, reqs[2].Group)
	}
}

// TestTraceReaderOptionalFields: priority and session_id reach Request,
// requests of one session_id share a Group whatever their hashes, and
// requests without one keep the derived Group, distinct from the named ones.
func TestTraceReaderOptionalFields(t *testing.T) {
	in := `{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0, 1], "priority": 2, "session_id": "a"}
{"timestamp": 1, "input_length": 10, "output_length": 1, "hash_ids": [5, 6], "session_id": "a"}
{"timestamp": 2, "input_length": 10, "output_length": 1, "hash_ids": [0, 1], "session_id": 7, "priority": -1}
{"timestamp": 3, "input_length": 10, "output_length": 1, "hash_ids": [0, 1]}
{"timestamp": 4, "input_length": 10, "output_length": 1, "hash_ids": [0, 1], "session_id": "7"}
{"timestamp": 5, "input_length": 10, "output_length": 1, "hash_ids": [0, 1], "session_id": null}
`
	reqs, err := ReadTrace(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var groups []uint64
	var prios []int8
	for _, r := range reqs {
		groups = append(groups, r.Group)
		prios = append(prios, r.Priority)
	}
	// a, a, 7, derived from [0 1], "7" (a string, not the integer 7), derived.
	if want := []uint64{0, 0, 1, 2, 3, 2}; !slices.Equal(groups, want) {
		t.Errorf("groups %v, want %v", groups, want)
	}
	if want := []int8{2, 0, -1, 0, 0, 0}; !slices.Equal(prios, want) {
		t.Errorf("priorities %v, want %v", prios, want)
	}
}

// TestLoadTraceNamesPath: an error names the file's path and the line.
func TestLoadTraceNamesPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mine.jsonl")
	data := `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n" +
		`{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1], "priority": 300}` + "\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadTrace(path)
	want := path + `: trace line 2: "priority" must be an integer from -128 to 127`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("err = %v, want prefix %q", err, want)
	}
	if _, err := LoadTrace(filepath.Join(t.TempDir(), "absent.jsonl")); err == nil || !strings.Contains(err.Error(), "absent.jsonl") {
		t.Errorf("missing file: err = %v, want the path named", err)
	}
}

func TestTraceReaderErrors(t *testing.T) {
	good := `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}` + "\n"
	for _, tc := range []struct{ name, line, want string }{
		{"not json", "{oops", "trace line 2: invalid JSON"},
		{"missing hashes", `{"timestamp": 0, "input_length": 1, "output_length": 1}`, `trace line 2: missing "hash_ids"`},
		{"missing timestamp", `{"input_length": 1, "output_length": 1, "hash_ids": []}`, `trace line 2: missing "timestamp"`},
		{"negative length", `{"timestamp": 0, "input_length": -1, "output_length": 1, "hash_ids": []}`, "trace line 2: input_length -1 is out of range: want 0 to 16777216 tokens"},
		{"huge answer", `{"timestamp": 0, "input_length": 1, "output_length": 9223372036854775000, "hash_ids": [1]}`, "trace line 2: output_length 9223372036854775000 is out of range: want 0 to 16777216 tokens"},
		{"answer past the most", `{"timestamp": 0, "input_length": 1, "output_length": 16777217, "hash_ids": [1]}`, "trace line 2: output_length 16777217 is out of range"},
		{"late arrival", `{"timestamp": 1099511627777, "input_length": 1, "output_length": 1, "hash_ids": [1]}`, "trace line 2: timestamp 1099511627777 is out of range: want 0 to 1099511627776 milliseconds"},
		{"negative timestamp", `{"timestamp": -1, "input_length": 1, "output_length": 1, "hash_ids": [1]}`, "trace line 2: timestamp -1 is out of range"},
		{"an array", `[1, 2, 3]`, "trace line 2: the line is a JSON array, not an object"},
		{"negative hash", `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [-4]}`, `trace line 2: "hash_ids" must be an array of non-negative integers, got a JSON number -4`},
		{"float hash", `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1.5]}`, `trace line 2: "hash_ids" must be`},
		{"string length", `{"timestamp": 0, "input_length": "9", "output_length": 1, "hash_ids": []}`, `trace line 2: "input_length" must be an integer, got a JSON string`},
		{"float priority", `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [], "priority": 1.5}`, `trace line 2: "priority" must be an integer from -128 to 127`},
		{"object session", `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [], "session_id": {}}`, `trace line 2: "session_id" must be a string or an integer, got {}`},
		{"empty session", `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [], "session_id": ""}`, `trace line 2: "session_id" must not be empty`},
		{"two values", good[:len(good)-1] + " {}", "trace line 2: more than one JSON value"},
		{"huge line", `{"hash_ids": [` + strings.Repeat("1,", MaxLineBytes/2) + `1]}`, "trace line 2: longer than 4194304 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadTrace(strings.NewReader(good + tc.line + "\n" + good))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("err = %v, want prefix %q", err, tc.want)
			}
		})
	}
}

func TestTraceReaderEOF(t *testing.T) {
	tr := NewTraceReader(strings.NewReader(""))
	if _, err := tr.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("empty input: err = %v, want io.EOF", err)
	}
	if _, err := ReadWorkload(strings.NewReader("\n\n"), "blank"); err == nil {
		t.Error("a trace without requests loaded without error")
	}
}

// FuzzTraceReader feeds arbitrary bytes to the reader: it must never panic,
// every error must name a line, and every request it returns must be valid.
func FuzzTraceReader(f *testing.F) {
	f.Add([]byte(`{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]}`))
	f.Add([]byte("{\"timestamp\": 1, \"input_length\": 2, \"output_length\": 3, \"hash_ids\": []}\n\n{"))
	f.Add([]byte(`{"timestamp": 1e3, "input_length": 2, "output_length": 3, "hash_ids": [18446744073709551615]}`))
	f.Add([]byte("\xff\x00\n{}"))
	f.Add([]byte(`{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [4], "priority": 2, "session_id": "a"}` + "\n" +
		`{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [4], "session_id": 9}`))
	f.Add([]byte(`{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [4], "session_id": "a", "request_id": "r1"}` + "\n" +
		`{"timestamp": 9, "input_length": 1, "output_length": 1, "hash_ids": [4], "session_id": "a", "delay": 2.5}` + "\n" +
		`{"timestamp": 9, "input_length": 1, "output_length": 1, "hash_ids": [5], "request_id": "r3", "wait_for": ["r1"], "delay_ms": 0, "tool_wait_ms": 1e3}` + "\n" +
		`{"timestamp": 9, "input_length": 1, "output_length": 1, "hash_ids": [6], "wait_for": ["r3", "r1", "r9"], "delay": 2592000000}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := 1 + strings.Count(string(data), "\n")
		whole, err := readTraceFuzz(t, strings.NewReader(string(data)), lines)
		// A file, a pipe or a gzip stream hands the reader its bytes in
		// pieces of any size: one byte at a time, it must read the same.
		pieces, perr := readTraceFuzz(t, iotest.OneByteReader(strings.NewReader(string(data))), lines)
		if fmt.Sprint(perr) != fmt.Sprint(err) || !reflect.DeepEqual(pieces, whole) {
			t.Fatalf("read a byte at a time: %d requests, %v; whole: %d, %v", len(pieces), perr, len(whole), err)
		}
	})
}

// readTraceFuzz reads r's requests until io.EOF (a nil error) or an
// error, checking each, and that there are at most lines of them.
func readTraceFuzz(t *testing.T, r io.Reader, lines int) ([]Request, error) {
	t.Helper()
	tr := NewTraceReader(r)
	groups := map[uint64]bool{}
	var reqs []Request
	for range lines {
		req, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return reqs, nil
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "trace line ") {
				t.Fatalf("error does not name its line: %v", err)
			}
			return reqs, err
		}
		if req.Timestamp < 0 || req.InputTokens < 0 || req.OutputTokens < 0 || req.HashIDs == nil {
			t.Fatalf("invalid request accepted: %+v", req)
		}
		if req.Wait != nil {
			if err := req.Wait.check(len(reqs)); err != nil {
				t.Fatalf("request %d: invalid wait accepted: %v", len(reqs), err)
			}
		}
		// Groups are numbered densely in order of first appearance.
		if !groups[req.Group] && req.Group != uint64(len(groups)) {
			t.Fatalf("new group %d after %d groups", req.Group, len(groups))
		}
		groups[req.Group] = true
		reqs = append(reqs, req)
	}
	if _, err := tr.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("more requests than lines, err = %v", err)
	}
	return reqs, nil
}

// TestTracePriorityReachesQoSAware: a trace's priority field decides
// QoSAware's victim, by hand at capacity 2: block 1 (high priority) is the
// least recent when block 3 arrives, so LRU evicts it and misses it on the
// fourth request, while QoSAware evicts the low-priority block 2 and hits.
func TestTracePriorityReachesQoSAware(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prio.jsonl")
	data := `{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [1], "priority": 2, "session_id": "a"}
{"timestamp": 1, "input_length": 4, "output_length": 1, "hash_ids": [2], "priority": 0, "session_id": "b"}
{"timestamp": 2, "input_length": 4, "output_length": 1, "hash_ids": [3], "priority": 0, "session_id": "b"}
{"timestamp": 3, "input_length": 4, "output_length": 1, "hash_ids": [1], "priority": 2, "session_id": "a"}
`
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := LoadTrace(path)
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[kvevict.Strategy]int64{kvevict.LRU: 0, kvevict.QoSAware: 1} {
		rep, err := Replay(w, s, Config{Capacity: 2})
		if err != nil {
			t.Fatal(err)
		}
		if rep.BlockHits != want {
			t.Errorf("%s: %d hits, want %d", s, rep.BlockHits, want)
		}
	}
}
