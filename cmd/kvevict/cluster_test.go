package main

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/internal/zmtp"
	"github.com/sagellm/kvevict/kvevents"
	"github.com/sagellm/kvevict/prefix"
	"github.com/vmihailenco/msgpack/v5"
)

const clusterTimeout = 10 * time.Second

// rawSub is a SUB socket listening on 127.0.0.1 that keeps every message's
// frames, as a router written from vLLM's docs alone would.
type rawSub struct {
	sock *zmtp.Sub
	mu   sync.Mutex
	msgs [][][]byte
}

func newRawSub(ctx context.Context, t *testing.T) *rawSub {
	t.Helper()
	s := &rawSub{sock: zmtp.NewSub(zmtp.SubOptions{Limits: zmtp.Limits{Frames: []int{1 << 24}}})}
	if err := s.sock.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s.sock.Subscribe("")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			frames, err := s.sock.Recv(ctx)
			if err != nil {
				return // the test ended
			}
			s.mu.Lock()
			s.msgs = append(s.msgs, frames)
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { s.sock.Close(); <-done })
	return s
}

func (s *rawSub) wait(ctx context.Context, t *testing.T, n int) [][][]byte {
	t.Helper()
	for {
		s.mu.Lock()
		got := len(s.msgs)
		if got >= n {
			out := s.msgs
			s.mu.Unlock()
			return out
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			t.Fatalf("received %d messages, want %d", got, n)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// uint64Of reads a msgpack integer decoded into any, of whatever width.
func uint64Of(t *testing.T, v any) uint64 {
	t.Helper()
	switch n := v.(type) {
	case int8:
		return uint64(n)
	case int16:
		return uint64(n)
	case int32:
		return uint64(n)
	case int64:
		return uint64(n)
	case uint8:
		return uint64(n)
	case uint16:
		return uint64(n)
	case uint32:
		return uint64(n)
	case uint64:
		return n
	}
	t.Fatalf("%v (%T) is not an integer", v, v)
	return 0
}

// TestPublishToForeignSubscriber reads what publish sends with a plain
// msgpack decode and nothing of kvevict's, checks it against vLLM's schema,
// and replays it into the resident set vLLM's semantics give.
func TestPublishToForeignSubscriber(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	sub := newRawSub(ctx, t)
	const capacity = 200
	code, out, errOut := runArgs(t, "publish", "-endpoint", "tcp://"+sub.sock.Addr().String(),
		"-trace", excerpt, "-capacity", fmt.Sprint(capacity), "-topic", "kv@pod-0@m", "-format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var sum struct {
		Batches        int `json:"batches"`
		StoredBlocks   int `json:"stored_blocks"`
		RemovedBlocks  int `json:"removed_blocks"`
		ResidentBlocks int `json:"resident_blocks"`
		Sent           int `json:"sent"`
		Dropped        int `json:"dropped"`
		Unsent         int `json:"unsent"`
		Subscribers    []struct {
			Peer                  string
			Sent, Dropped, Unsent int
		} `json:"subscribers"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sum); err != nil || sum.Batches == 0 {
		t.Fatalf("summary %q: %v", out, err)
	}
	if sum.Sent != sum.Batches || sum.Dropped+sum.Unsent != 0 || len(sum.Subscribers) != 1 || sum.Subscribers[0].Sent != sum.Batches {
		t.Fatalf("summary %q: want every batch sent to the one subscriber", out)
	}
	msgs := sub.wait(ctx, t, sum.Batches)
	if len(msgs) != sum.Batches {
		t.Fatalf("%d messages, summary says %d batches", len(msgs), sum.Batches)
	}

	type blockState struct {
		parent   uint64
		orphan   bool // stored without a parent
		children int
	}
	resident := map[uint64]*blockState{}
	stored, removed := 0, 0
	for i, frames := range msgs {
		if len(frames) != 3 || string(frames[0]) != "kv@pod-0@m" || len(frames[1]) != 8 {
			t.Fatalf("message %d: frames %q", i, frames)
		}
		if seq := binary.BigEndian.Uint64(frames[1]); seq != uint64(i) {
			t.Fatalf("message %d has sequence %d", i, seq)
		}
		// Current vLLM's form: [ts, events, data_parallel_rank].
		var batch []any
		if err := msgpack.Unmarshal(frames[2], &batch); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if len(batch) != 3 || uint64Of(t, batch[2]) != 0 {
			t.Fatalf("message %d: batch %v, want ts, events and data_parallel_rank 0", i, batch)
		}
		if _, ok := batch[0].(float64); !ok {
			t.Fatalf("message %d: ts %v, want a float", i, batch[0])
		}
		events, ok := batch[1].([]any)
		if !ok || len(events) == 0 {
			t.Fatalf("message %d: events %v", i, batch[1])
		}
		for _, e := range events {
			ev, ok := e.(map[string]any)
			if !ok {
				t.Fatalf("message %d: event %v is not a map", i, e)
			}
			hashes, ok := ev["block_hashes"].([]any)
			if !ok || len(hashes) == 0 || ev["medium"] != "GPU" {
				t.Fatalf("message %d: event %v", i, ev)
			}
			for _, h := range append(hashes, ev["parent_block_hash"]) {
				// 64-bit hashes as msgpack uint 64, never narrowed, and
				// never 0, which llm-d reads as no parent.
				if n, ok := h.(uint64); h != nil && (!ok || n == 0) {
					t.Fatalf("message %d: hash %v (%T), want a nonzero uint64", i, h, h)
				}
			}
			switch ev["type"] {
			case "BlockStored":
				if len(ev) != 8 || ev["lora_id"] != nil || ev["lora_name"] != nil || uint64Of(t, ev["block_size"]) != 512 {
					t.Fatalf("message %d: BlockStored %v, want the 7 fields without defaults", i, ev)
				}
				if toks, ok := ev["token_ids"].([]any); !ok || len(toks) != 512*len(hashes) {
					t.Fatalf("message %d: %d token_ids for %d blocks of 512", i, len(toks), len(hashes))
				}
				var parent *blockState
				parentHash, orphan := uint64(0), ev["parent_block_hash"] == nil
				if !orphan {
					parentHash = uint64Of(t, ev["parent_block_hash"])
					if parent = resident[parentHash]; parent == nil {
						t.Fatalf("message %d: stored under %d, which is not resident", i, parentHash)
					}
				}
				for _, hv := range hashes {
					h := uint64Of(t, hv)
					if resident[h] != nil {
						t.Fatalf("message %d: %d stored while resident", i, h)
					}
					if parent != nil {
						parent.children++
					}
					parent = &blockState{parent: parentHash, orphan: orphan}
					resident[h] = parent
					parentHash, orphan = h, false
					stored++
				}
			case "BlockRemoved":
				if len(ev) != 3 {
					t.Fatalf("message %d: BlockRemoved %v", i, ev)
				}
				for _, hv := range hashes {
					h := uint64Of(t, hv)
					b := resident[h]
					if b == nil || b.children != 0 {
						t.Fatalf("message %d: removed %d, resident %v, not a leaf", i, h, b != nil)
					}
					if !b.orphan {
						resident[b.parent].children--
					}
					delete(resident, h)
					removed++
				}
			default:
				t.Fatalf("message %d: event type %v", i, ev["type"])
			}
			if len(resident) > capacity {
				t.Fatalf("message %d: %d blocks resident, capacity %d", i, len(resident), capacity)
			}
		}
	}
	if len(resident) != sum.ResidentBlocks || stored != sum.StoredBlocks || removed != sum.RemovedBlocks {
		t.Errorf("subscriber saw %d resident, %d stored, %d removed; summary %+v", len(resident), stored, removed, sum)
	}
}

// TestMirrorCommand feeds mirror, over TCP, frames a vLLM engine would send
// (written by hand, array encoding) for two topics.
func TestMirrorCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	pub := zmtp.NewPub(zmtp.PubOptions{})
	defer pub.Close(0)
	if err := pub.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := runArgs(t, "mirror", "-endpoint", "tcp://"+pub.Addr().String(), "-duration", "3s", "-format", "json")
		done <- result{code, out, errOut}
	}()
	if err := pub.WaitSubscribers(ctx, 1); err != nil {
		t.Fatalf("mirror never subscribed: %v", err)
	}
	stored := "98 ab426c6f636b53746f726564" // ["BlockStored", then 7 fields
	removed := "93 ac426c6f636b52656d6f766564"
	frames := []struct {
		topic string
		seq   uint64
		hex   string
	}{
		// [1.0, [["BlockStored", [1, 2, 3], None, [], 16, None, "GPU", None]]]
		{"a", 0, "92 cb3ff0000000000000 91" + stored + "93010203 c0 90 10 c0 a3475055 c0"},
		// [1.0, [["BlockStored", [7], None, ...], ["BlockRemoved", [7], "GPU"]]]
		{"b", 0, "92 cb3ff0000000000000 92" + stored + "9107 c0 90 10 c0 a3475055 c0" + removed + "9107 a3475055"},
		// [1.0, [["BlockRemoved", [3], "GPU"], ["BlockStored", [4, 5], 2, ...]]]
		{"a", 1, "92 cb3ff0000000000000 92" + removed + "9103 a3475055" + stored + "920405 02 90 10 c0 a3475055 c0"},
		// sequence 1 of b is lost: [1.0, [["BlockStored", [8], None, ...]]]
		{"b", 2, "92 cb3ff0000000000000 91" + stored + "9108 c0 90 10 c0 a3475055 c0"},
	}
	for _, f := range frames {
		payload, err := hex.DecodeString(strings.ReplaceAll(f.hex, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		seq := binary.BigEndian.AppendUint64(nil, f.seq)
		if err := pub.Send([][]byte{[]byte(f.topic), seq, payload}); err != nil {
			t.Fatal(err)
		}
	}
	r := <-done
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(r.out), &rows); err != nil {
		t.Fatalf("%q: %v", r.out, err)
	}
	// a holds 1 2 4 5 (3 removed); b stored and removed 7, then 8 after a gap.
	want := `[map[batches:2 missed_batches:0 resident_blocks:4 resident_by_medium:map[GPU:4] restarts:0 topic:a] ` +
		`map[batches:2 missed_batches:1 resident_blocks:1 resident_by_medium:map[GPU:1] restarts:0 topic:b]]`
	if got := fmt.Sprint(rows); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestClusterErrors: every bad flag is refused before anything starts.
func TestClusterErrors(t *testing.T) {
	ok := []string{"-endpoint", "tcp://127.0.0.1:1", "-trace", excerpt, "-capacity", "10"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"publish", "-trace", excerpt, "-capacity", "10"}, "-endpoint is required"},
		{[]string{"publish", "-endpoint", "127.0.0.1:5557", "-trace", excerpt, "-capacity", "10"}, "must be transport://address"},
		{[]string{"publish", "-endpoint", "carrier://x", "-trace", excerpt, "-capacity", "10"}, "must be transport://address"},
		{[]string{"publish", "-endpoint", "tcp://127.0.0.1:1", "-capacity", "10"}, "-trace is required"},
		{[]string{"publish", "-endpoint", "tcp://127.0.0.1:1", "-trace", excerpt}, "-capacity must be at least 1"},
		{append(ok, "-strategy", "arc"), "ranks by lists of sequences"},
		{append(ok, "-strategy", "nope"), `unknown strategy "nope"`},
		{append(ok, "-warmup", "-1s"), "-warmup must not be negative"},
		{append(ok, "-linger", "-1s"), "-linger must not be negative"},
		{append(ok, "-format", "csv"), "-format must be table or json"},
		{append(ok, "extra"), `unexpected argument "extra"`},
		{[]string{"mirror", "-duration", "1s"}, "-endpoint is required"},
		{[]string{"mirror", "-endpoint", "tcp://127.0.0.1:1"}, "-duration must be positive"},
		{[]string{"mirror", "-endpoint", "tcp://127.0.0.1:1", "-duration", "1s", "-capacity", "0"}, "-capacity must be 1 to 536870912"},
		{[]string{"mirror", "-endpoint", "tcp://127.0.0.1:1", "-duration", "1s", "-capacity", "536870913"}, "-capacity must be 1 to 536870912"},
		{[]string{"mirror", "-endpoint", "tcp://127.0.0.1:1", "-duration", "1s", "-replay-endpoint", "x"}, "must be transport://address"},
		{append(ok, "-block-size", "-1"), "-block-size must be 1 to 65536"},
		{append(ok, "-dp-rank", "-1"), "-dp-rank must not be negative"},
		{append(ok, "-encoding", "json"), "-encoding must be mixed, map or array"},
		{append(ok, "-replay-endpoint", "carrier://x"), "must be transport://address"},
		{[]string{"mirror", "-endpoint", "tcp://127.0.0.1:1", "-duration", "1s", "-format", "xml"}, "-format must be table or json"},
		{[]string{"mirror", "-endpoint", "tcp://127.0.0.1:1", "-duration", "soon"}, `invalid value "soon"`},
	} {
		args := tc.args
		if args[0] != "publish" && args[0] != "mirror" {
			args = append([]string{"publish"}, args...)
		}
		code, _, errOut := runArgs(t, args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 ||
			!strings.Contains(errOut, "see kvevict "+args[0]+" -h") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", args, code, errOut, tc.want)
		}
	}
}

// TestPublishStrategies: publish's tree takes every strategy a prefix tree
// ranks by, auto among them, and its help lists exactly those.
func TestPublishStrategies(t *testing.T) {
	for _, s := range kvevict.Strategies() {
		o, err := parsePublish([]string{"-endpoint", "tcp://127.0.0.1:1", "-trace", excerpt, "-capacity", "10", "-strategy", string(s)}, io.Discard)
		if got, want := err == nil, treeRanks(s); got != want {
			t.Errorf("-strategy %s: error %v, want accepted %v", s, err, want)
		}
		if err == nil && o.strategy != s {
			t.Errorf("-strategy %s: runs %s", s, o.strategy)
		}
		if err == nil {
			// Every strategy the flag accepts builds the pool's tree.
			if _, err := newPoolTree(s, o.capacity, func(prefix.Event) {}); err != nil {
				t.Errorf("-strategy %s -capacity %d: the tree: %v", s, o.capacity, err)
			}
		}
		if got, want := slices.Contains(strings.Split(keyStrategyNames(), ", "), string(s)), treeRanks(s); got != want {
			t.Errorf("help lists %s: %v, want %v", s, got, want)
		}
	}
	if !treeRanks(kvevict.Auto) {
		t.Error("a prefix tree does not rank by auto")
	}
}

// TestPublishRepeatedIDs replays a trace whose requests repeat an id
// within their own prompt, as real traces do: the chained hashes name each
// position apart, so a mirror fed by publish holds what publish's pool
// holds, with nothing missed.
func TestPublishRepeatedIDs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	trace := filepath.Join(t.TempDir(), "repeats.jsonl")
	lines := `{"timestamp": 0, "input_length": 2048, "output_length": 1, "hash_ids": [1, 2, 1, 2]}
{"timestamp": 1, "input_length": 2560, "output_length": 1, "hash_ids": [1, 2, 1, 2, 1]}
{"timestamp": 2, "input_length": 1536, "output_length": 1, "hash_ids": [7, 7, 7]}
`
	if err := os.WriteFile(trace, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := kvevents.NewMirror(100)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := kvevents.NewSubscriber(ctx, "tcp://127.0.0.1:0", kvevents.WithListen())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { sub.Run(ctx, m.Handle); close(done) }()
	code, out, errOut := runArgs(t, "publish", "-endpoint", "tcp://"+sub.Addr().String(), "-trace", trace,
		"-capacity", "100", "-warmup", "500ms", "-block-size", "4", "-format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var sum publishSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	for sub.Stats().Delivered < sum.Sent && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	// By hand: [1 2 1 2] is 4 blocks, [1 2 1 2 1] adds 1, [7 7 7] is 3.
	topics := m.Topics()
	if sum.ResidentBlocks != 8 || sum.Sent != 3 || len(topics) != 1 || topics[0].ResidentBlocks != 8 || topics[0].MissedBatches != 0 {
		t.Errorf("publish holds %d blocks, sent %d batches; mirror %+v; want 8 blocks, 3 batches, none missed", sum.ResidentBlocks, sum.Sent, topics)
	}
}
