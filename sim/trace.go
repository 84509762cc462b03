package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Request is one inference request of a workload: when it arrives, how long
// its prompt and its answer are, and the prompt's KV blocks as content
// hashes, head (prefix) first. Two requests that share a leading run of
// hashes share that prompt prefix.
type Request struct {
	Timestamp    int64    // arrival, in milliseconds from the start of the workload
	InputTokens  int      // prompt length in tokens
	OutputTokens int      // tokens the request generates
	HashIDs      []uint64 // the prompt's blocks, head first
	// Group is the session or tenant the request belongs to, for fairness
	// and QoS; see [Workload.GroupKind] for which.
	Group    uint64
	Priority int8 // QoS class, as kvevict.Priority
}

// MaxLineBytes is the longest JSONL line [TraceReader] accepts: 4 MiB, more
// than half a million block hashes. A longer line is reported as an error
// that names it rather than read into memory without bound.
const MaxLineBytes = 4 << 20

// TraceReader streams [Request]s from a Mooncake JSONL trace, one JSON object
// per line:
//
//	{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48]}
//
// Unknown fields are ignored and blank lines skipped. Every error names the
// line it found. Memory is bounded by [MaxLineBytes] per line.
type TraceReader struct {
	sc       *bufio.Scanner
	line     int                  // lines read so far
	sessions map[[2]uint64]uint64 // first two hashes -> Group; see Next
}

// NewTraceReader returns a reader of the JSONL trace in r.
func NewTraceReader(r io.Reader) *TraceReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	return &TraceReader{sc: sc, sessions: make(map[[2]uint64]uint64)}
}

// traceLine is the JSON shape of one line. Pointers tell a missing field
// from a zero one.
type traceLine struct {
	Timestamp    *int64   `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []uint64 `json:"hash_ids"`
}

// Next returns the next request, or io.EOF after the last one. A malformed
// line returns an error of the form "trace line N: ..." and the reader
// should not be used further.
//
// Mooncake traces carry no session ids, so Next derives one: requests whose
// first two hashes agree (a shared system prompt followed by the same
// conversation) get the same Group, numbered in order of first appearance.
func (t *TraceReader) Next() (Request, error) {
	for t.sc.Scan() {
		t.line++
		raw := bytes.TrimSpace(t.sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		req, err := parseLine(raw)
		if err != nil {
			return Request{}, fmt.Errorf("trace line %d: %w", t.line, err)
		}
		var key [2]uint64
		copy(key[:], req.HashIDs)
		g, ok := t.sessions[key]
		if !ok {
			g = uint64(len(t.sessions))
			t.sessions[key] = g
		}
		req.Group = g
		return req, nil
	}
	if err := t.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Request{}, fmt.Errorf("trace line %d: longer than %d bytes", t.line+1, MaxLineBytes)
		}
		return Request{}, fmt.Errorf("trace line %d: %w", t.line+1, err)
	}
	return Request{}, io.EOF
}

func parseLine(raw []byte) (Request, error) {
	var l traceLine
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&l); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return Request{}, fmt.Errorf("%q must be %s, got a JSON %s", typeErr.Field, jsonKind(typeErr.Field), typeErr.Value)
		}
		return Request{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if dec.More() {
		return Request{}, errors.New("more than one JSON value on the line")
	}
	switch {
	case l.Timestamp == nil:
		return Request{}, errors.New(`missing "timestamp"`)
	case l.InputLength == nil:
		return Request{}, errors.New(`missing "input_length"`)
	case l.OutputLength == nil:
		return Request{}, errors.New(`missing "output_length"`)
	case l.HashIDs == nil:
		return Request{}, errors.New(`missing "hash_ids"`)
	case *l.Timestamp < 0:
		return Request{}, fmt.Errorf("negative timestamp %d", *l.Timestamp)
	case *l.InputLength < 0:
		return Request{}, fmt.Errorf("negative input_length %d", *l.InputLength)
	case *l.OutputLength < 0:
		return Request{}, fmt.Errorf("negative output_length %d", *l.OutputLength)
	}
	return Request{
		Timestamp:    *l.Timestamp,
		InputTokens:  *l.InputLength,
		OutputTokens: *l.OutputLength,
		HashIDs:      l.HashIDs,
	}, nil
}

// jsonKind says what a trace field holds, for error messages.
func jsonKind(field string) string {
	if strings.HasPrefix(field, "hash_ids") {
		return "an array of non-negative integers"
	}
	return "an integer"
}

// ReadTrace reads a whole JSONL trace, stopping at the first malformed line.
// It holds every request in memory: about 8 bytes per block reference.
func ReadTrace(r io.Reader) ([]Request, error) {
	tr := NewTraceReader(r)
	var reqs []Request
	for {
		req, err := tr.Next()
		if err == io.EOF {
			return reqs, nil
		}
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, req)
	}
}
