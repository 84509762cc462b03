package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sagellm/kvevict"
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
	// Hints is what the front end knows of the request's future.
	Hints RequestHints
	// Wait, when the trace gives one, is what a closed loop sends the
	// request after; nil: its session's previous request and the pause
	// the timestamps leave ([Serve]).
	Wait *Wait
}

// The largest values a [Request] may hold, which [TraceReader] refuses
// past and every run checks before it starts: far beyond any real request,
// and small enough that what a run makes of them (a sequence's length in
// tokens, an arrival in nanoseconds, an answer's decode time) cannot
// overflow. A request's hashes are bounded by [MaxLineBytes] in a trace.
const (
	// MaxTimestamp is the latest arrival, in milliseconds from the start
	// of the workload: 2^40, about 35 years.
	MaxTimestamp = 1 << 40
	// MaxTokens is the most tokens of a prompt (InputTokens) or of an
	// answer (OutputTokens): 2^24, 16,777,216.
	MaxTokens = 1 << 24
)

// checkRequest reports a request whose counts are out of their range:
// negative, or above [MaxTimestamp] or [MaxTokens], or whose hints no
// request may carry ([RequestHints]). Its errors name the trace's fields.
func checkRequest(r *Request) error {
	switch {
	case r.Timestamp < 0 || r.Timestamp > MaxTimestamp:
		return fmt.Errorf("timestamp %d is out of range: want 0 to %d milliseconds", r.Timestamp, int64(MaxTimestamp))
	case r.InputTokens < 0 || r.InputTokens > MaxTokens:
		return fmt.Errorf("input_length %d is out of range: want 0 to %d tokens", r.InputTokens, MaxTokens)
	case r.OutputTokens < 0 || r.OutputTokens > MaxTokens:
		return fmt.Errorf("output_length %d is out of range: want 0 to %d tokens", r.OutputTokens, MaxTokens)
	}
	return r.Hints.check()
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
// timestamp is the arrival in milliseconds (0 to [MaxTimestamp]),
// input_length and output_length count tokens (0 to [MaxTokens] each), and
// hash_ids are the prompt's blocks head first. A user's
// own export may add two optional fields:
//
//	{"timestamp": 27490, "input_length": 700, "output_length": 80, "hash_ids": [46, 47, 49], "priority": 2, "session_id": "user-17"}
//
// priority is the request's QoS class as a [kvevict.Priority] (0 low, 1
// normal, 2 high; any integer from -128 to 127), which QoSAware evicts by;
// absent, it is 0. session_id (a string or an integer) names the
// conversation: requests with the same session_id form one fairness group
// ([Request.Group]); see [TraceReader.Next] for requests without one.
// Four optional fields carry hints ([RequestHints], docs/hints.md):
// "final" (true or false), "ttl_ms" (0 to [MaxHintMs]), and
// "retention_priority" (0 to 100) with "retention_ms" (0 to [MaxHintMs]),
// both or neither. Four optional fields of DynoSim's traces say when a
// closed loop sends the request ([Wait], docs/simulator.md):
//
//	{"timestamp": 27900, "input_length": 900, "output_length": 60, "hash_ids": [46, 47, 49, 62], "session_id": "user-17", "request_id": "r2", "wait_for": ["r1"], "delay": 120, "tool_wait_ms": 800.5}
//
// request_id names the request (a non-empty string, once in a trace),
// wait_for the earlier lines' request_ids it waits for, and delay (or
// delay_ms, one or the other) and tool_wait_ms, in milliseconds (0 to
// [MaxHintMs] in all), its pause after them, or after its session's
// previous request without wait_for; a pause on a session's first request
// without wait_for is refused, as DynoSim refuses it. Unknown fields are
// ignored and blank lines skipped. Every error names the line it found.
// Memory is bounded by [MaxLineBytes] per line.
type TraceReader struct {
	sc      *bufio.Scanner
	line    int                  // lines read so far
	derived map[[2]uint64]uint64 // first two hashes -> Group; see Next
	named   map[string]uint64    // session_id -> Group
	ids     map[string]int       // request_id -> the request's index
	n       int                  // requests returned so far
}

// NewTraceReader returns a reader of the JSONL trace in r.
func NewTraceReader(r io.Reader) *TraceReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	return &TraceReader{sc: sc, derived: make(map[[2]uint64]uint64), named: make(map[string]uint64), ids: make(map[string]int)}
}

// traceLine is the JSON shape of one line. Pointers tell a missing field
// from a zero one.
type traceLine struct {
	Timestamp    *int64   `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []uint64 `json:"hash_ids"`
	Priority     *int8    `json:"priority"`
	Final        *bool    `json:"final"`
	TTLMs        *int64   `json:"ttl_ms"`
	Retention    *int64   `json:"retention_priority"`
	RetentionMs  *int64   `json:"retention_ms"`
	// SessionID is raw so that it may be a string or an integer.
	SessionID json.RawMessage `json:"session_id"`
	RequestID *string         `json:"request_id"`
	WaitFor   []string        `json:"wait_for"`
	// DynoSim writes its pauses as numbers that need not be whole.
	Delay      *float64 `json:"delay"`
	DelayMs    *float64 `json:"delay_ms"`
	ToolWaitMs *float64 `json:"tool_wait_ms"`
}

// lineKeys are the names a line gives, which the reader resolves against
// the lines before it.
type lineKeys struct {
	session string   // session_id, "" when absent
	id      string   // request_id, "" when absent
	waitFor []string // wait_for's request_ids
}

// Next returns the next request, or io.EOF after the last one. A malformed
// line returns an error of the form "trace line N: ..." and the reader
// should not be used further.
//
// Requests with a session_id get one Group per distinct id. Mooncake traces
// carry no session ids, so for a request without one Next derives it:
// requests whose first two hashes agree (a shared system prompt followed by
// the same conversation) get the same Group. Groups are numbered in order
// of first appearance, named and derived ones from one count, so they never
// collide.
func (t *TraceReader) Next() (Request, error) {
	for t.sc.Scan() {
		t.line++
		raw := bytes.TrimSpace(t.sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		req, keys, err := parseLine(raw)
		if err == nil {
			err = t.link(&req, keys)
		}
		if err != nil {
			if rerr := t.sc.Err(); rerr != nil {
				// A read that failed cut the line short: the failure, not
				// the partial line, is what went wrong.
				err = rerr
			}
			return Request{}, fmt.Errorf("trace line %d: %w", t.line, err)
		}
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

// link resolves the names of a request's line: its Group, its request_id
// and the earlier requests its wait_for names.
func (t *TraceReader) link(req *Request, k lineKeys) error {
	newGroup := uint64(len(t.derived) + len(t.named))
	req.Group = t.group(req.HashIDs, k.session)
	if _, dup := t.ids[k.id]; dup && k.id != "" {
		return fmt.Errorf(`"request_id" %q is an earlier line's`, k.id)
	}
	if req.Wait != nil && len(k.waitFor) == 0 && req.Wait.Pause != 0 && req.Group == newGroup {
		return errors.New(`a pause ("delay", "tool_wait_ms") on its session's first request without "wait_for": no request before it to follow`)
	}
	if len(k.waitFor) > 0 {
		req.Wait.For = make([]int, len(k.waitFor))
		for i, id := range k.waitFor {
			r, ok := t.ids[id]
			if !ok {
				return fmt.Errorf(`"wait_for" names %q, the request_id of no earlier line`, id)
			}
			req.Wait.For[i] = r
		}
	}
	if k.id != "" {
		t.ids[k.id] = t.n
	}
	t.n++
	return nil
}

// group returns the Group of a request with the given hashes and session
// id ("" when it has none).
func (t *TraceReader) group(hashes []uint64, session string) uint64 {
	next := uint64(len(t.derived) + len(t.named))
	if session != "" {
		g, ok := t.named[session]
		if !ok {
			g = next
			t.named[session] = g
		}
		return g
	}
	var key [2]uint64
	copy(key[:], hashes)
	g, ok := t.derived[key]
	if !ok {
		g = next
		t.derived[key] = g
	}
	return g
}

// parseLine decodes one line into a request and the names it gives.
func parseLine(raw []byte) (Request, lineKeys, error) {
	var l traceLine
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&l); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field == "" {
			return Request{}, lineKeys{}, fmt.Errorf("the line is a JSON %s, not an object", typeErr.Value)
		}
		if errors.As(err, &typeErr) {
			return Request{}, lineKeys{}, fmt.Errorf("%q must be %s, got a JSON %s", typeErr.Field, jsonKind(typeErr.Field), typeErr.Value)
		}
		return Request{}, lineKeys{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if dec.More() {
		return Request{}, lineKeys{}, errors.New("more than one JSON value on the line")
	}
	switch {
	case l.Timestamp == nil:
		return Request{}, lineKeys{}, errors.New(`missing "timestamp"`)
	case l.InputLength == nil:
		return Request{}, lineKeys{}, errors.New(`missing "input_length"`)
	case l.OutputLength == nil:
		return Request{}, lineKeys{}, errors.New(`missing "output_length"`)
	case l.HashIDs == nil:
		return Request{}, lineKeys{}, errors.New(`missing "hash_ids"`)
	}
	session, err := sessionID(l.SessionID)
	if err != nil {
		return Request{}, lineKeys{}, err
	}
	keys := lineKeys{session: session, waitFor: l.WaitFor}
	if l.RequestID != nil {
		if *l.RequestID == "" {
			return Request{}, lineKeys{}, errors.New(`"request_id" must not be empty`)
		}
		keys.id = *l.RequestID
	}
	req := Request{
		Timestamp:    *l.Timestamp,
		InputTokens:  *l.InputLength,
		OutputTokens: *l.OutputLength,
		HashIDs:      l.HashIDs,
	}
	if l.Priority != nil {
		req.Priority = *l.Priority
	}
	if err := readHints(&l, &req.Hints); err != nil {
		return Request{}, lineKeys{}, err
	}
	pause, paused, err := readPause(&l)
	if err != nil {
		return Request{}, lineKeys{}, err
	}
	if paused || len(l.WaitFor) > 0 {
		req.Wait = &Wait{Pause: pause}
	}
	if err := checkRequest(&req); err != nil {
		return Request{}, lineKeys{}, err
	}
	return req, keys, nil
}

// readHints reads the optional hint fields of l into h, refusing a
// retention priority without its duration or the other way round, and one
// that a RequestHints cannot hold; checkRequest checks the rest.
func readHints(l *traceLine, h *RequestHints) error {
	if l.Final != nil {
		h.Final = *l.Final
	}
	if l.TTLMs != nil {
		h.TTLMs = *l.TTLMs
	}
	switch {
	case (l.Retention == nil) != (l.RetentionMs == nil):
		return errors.New(`"retention_priority" and "retention_ms" go together: give both or neither`)
	case l.Retention == nil:
		return nil
	case *l.Retention < 0 || *l.Retention > kvevict.MaxRetention:
		return fmt.Errorf(`"retention_priority" must be 0 to %d, got %d`, kvevict.MaxRetention, *l.Retention)
	}
	h.Retention, h.RetentionMs = uint8(*l.Retention), *l.RetentionMs
	return nil
}

// sessionID returns a session_id's text: a non-empty string, or an
// integer's digits (prefixed so that 7 and "7" stay distinct); "" when the
// field is absent or null.
func sessionID(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if s == "" {
			return "", errors.New(`"session_id" must not be empty`)
		}
		return "s" + s, nil
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err == nil {
		return "n" + strconv.FormatInt(n, 10), nil
	}
	return "", fmt.Errorf(`"session_id" must be a string or an integer, got %s`, raw)
}

// jsonKind says what a trace field holds, for error messages.
func jsonKind(field string) string {
	switch {
	case strings.HasPrefix(field, "hash_ids"):
		return "an array of non-negative integers"
	case field == "priority":
		return "an integer from -128 to 127"
	case field == "final":
		return "true or false"
	case field == "request_id":
		return "a string"
	case strings.HasPrefix(field, "wait_for"):
		return "an array of request_id strings"
	case field == "delay" || field == "delay_ms" || field == "tool_wait_ms":
		return "a number of milliseconds"
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
