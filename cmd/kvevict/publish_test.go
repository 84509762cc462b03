package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/kvevents"
	"github.com/sagellm/kvevict/prefix"
	"github.com/vmihailenco/msgpack/v5"
)

const socketTimeout = 10 * time.Second

// rawSub is a SUB socket listening on 127.0.0.1 that keeps every message's
// frames, as a router written from vLLM's docs alone would: it takes one
// publisher's connection and subscribes to every topic.
type rawSub struct {
	ln   net.Listener
	mu   sync.Mutex
	conn net.Conn // the publisher's, once it connected
	msgs [][][]byte
}

func newRawSub(t *testing.T) *rawSub {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawSub{ln: ln}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return // the test ended
		}
		s.mu.Lock()
		s.conn = c
		s.mu.Unlock()
		// Then a subscription to every topic: ZMTP 3.0's message of the
		// byte 1 and an empty prefix.
		if _, err := c.Write(append(handshake("SUB"), frames([]byte{1})...)); err != nil {
			return
		}
		r := bufio.NewReader(c)
		if readGreeting(r) != nil {
			return
		}
		for {
			msg, err := readMsg(r)
			if err != nil {
				return // the publisher left, or the test ended
			}
			s.mu.Lock()
			s.msgs = append(s.msgs, msg)
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		if s.conn != nil {
			s.conn.Close()
		}
		s.mu.Unlock()
		<-done
	})
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
	ctx, cancel := context.WithTimeout(context.Background(), socketTimeout)
	defer cancel()
	sub := newRawSub(t)
	const capacity = 200
	code, out, errOut := runArgs(t, "publish", "-endpoint", "tcp://"+sub.ln.Addr().String(),
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
		Connections   int `json:"connections"`
		Reached       int `json:"reached"`
		ReplayReached int `json:"replay_reached"`
		Lossy         int `json:"lossy"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sum); err != nil || sum.Batches == 0 {
		t.Fatalf("summary %q: %v", out, err)
	}
	if sum.Sent != sum.Batches || sum.Dropped+sum.Unsent != 0 || len(sum.Subscribers) != 1 || sum.Subscribers[0].Sent != sum.Batches || sum.Connections != 1 || sum.Reached != 1 || sum.Lossy != 0 {
		t.Fatalf("summary %q: want every batch sent to the one subscriber", out)
	}
	msgs := sub.wait(ctx, t, sum.Batches)
	if len(msgs) != sum.Batches {
		t.Fatalf("%d messages, summary says %d batches", len(msgs), sum.Batches)
	}
	if raceEnabled {
		// What follows decodes and replays the messages on this goroutine
		// alone; the pass without the detector checks them.
		return
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

// TestPublishStrategies: publish's tree takes every strategy a prefix tree
// ranks by (as prefix.New answers), auto among them, and its help lists
// exactly those.
func TestPublishStrategies(t *testing.T) {
	for _, s := range kvevict.Strategies() {
		_, treeErr := prefix.New(s, 10)
		ranks := treeErr == nil
		o, err := parsePublish([]string{"-endpoint", "tcp://127.0.0.1:1", "-trace", excerpt, "-capacity", "10", "-strategy", string(s)}, io.Discard)
		if got := err == nil; got != ranks {
			t.Errorf("-strategy %s: error %v, want accepted %v (prefix.New: %v)", s, err, ranks, treeErr)
		}
		if err == nil && o.strategy != s {
			t.Errorf("-strategy %s: runs %s", s, o.strategy)
		}
		if err == nil {
			if _, err := newPool(o, func(prefix.Event) {}, nil); err != nil {
				t.Errorf("-strategy %s -capacity %d: the tree: %v", s, o.capacity, err)
			}
		}
		if got := slices.Contains(strings.Split(keyStrategyNames(), ", "), string(s)); got != ranks {
			t.Errorf("help lists %s: %v, want %v", s, got, ranks)
		}
	}
	if _, err := prefix.New(kvevict.Auto, 10); err != nil {
		t.Errorf("a prefix tree does not rank by auto: %v", err)
	}
}

// TestPublishRepeatedIDs replays a trace whose requests repeat an id
// within their own prompt, as real traces do: the chained hashes name each
// position apart, so a mirror fed by publish holds what publish's pool
// holds, with nothing missed.
func TestPublishRepeatedIDs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), socketTimeout)
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
	sum := publishInto(ctx, t, m.Handle, "-trace", trace, "-capacity", "100", "-warmup", "500ms", "-block-size", "4")
	// By hand: [1 2 1 2] is 4 blocks, [1 2 1 2 1] adds 1, [7 7 7] is 3.
	topics := m.Topics()
	if sum.ResidentBlocks != 8 || sum.Sent != 3 || len(topics) != 1 || topics[0].ResidentBlocks != 8 || topics[0].MissedBatches != 0 {
		t.Errorf("publish holds %d blocks, sent %d batches; mirror %+v; want 8 blocks, 3 batches, none missed", sum.ResidentBlocks, sum.Sent, topics)
	}
}

// publishInto runs publish with args, connecting to a subscriber that
// listens on loopback and hands each message to handle, and returns once
// the subscriber has delivered every batch publish says it sent (or ctx
// ends), with publish's summary; the subscriber has stopped by then.
func publishInto(ctx context.Context, t *testing.T, handle func(kvevents.Message), args ...string) publishSummary {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub, err := kvevents.NewSubscriber(ctx, "tcp://127.0.0.1:0", kvevents.WithListen())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { sub.Run(ctx, handle); close(done) }()
	defer func() { cancel(); <-done }()
	args = append([]string{"publish", "-connect", "tcp://" + sub.Addr().String(), "-format", "json"}, args...)
	code, out, errOut := runArgs(t, args...)
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
	return sum
}

// dialSub connects to the PUB socket that binds addr (host:port), retrying
// while it comes up, does the handshake as a SUB socket and subscribes to
// prefix: a peer written from ZMTP 3.0 alone, which sends no heartbeat
// and is held to none. The test closes it at its end.
func dialSub(t *testing.T, addr, prefix string) (net.Conn, *bufio.Reader) {
	t.Helper()
	deadline := time.Now().Add(socketTimeout)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			t.Cleanup(func() { c.Close() })
			if _, err := c.Write(append(handshake("SUB"), frames(append([]byte{1}, prefix...))...)); err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(c)
			if err := readGreeting(r); err != nil {
				t.Fatal(err)
			}
			return c, r
		}
		if time.Now().After(deadline) {
			t.Fatalf("no PUB socket on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPublishCountsReceivers: -require-subscribers counts the subscribers
// that received batches of the topic. One subscribed to another topic, or
// one that did its handshake and left, received none, and publish exits 1
// saying so; one that received batches but lost some (it stopped reading,
// and -linger 0s gave up on its queue) fails the run too.
func TestPublishCountsReceivers(t *testing.T) {
	for _, tc := range []struct {
		name, prefix, act string
		blockSize         string
		want              string
	}{
		{"another topic", "other", "read", "4", "0 subscribers received batches of topic \"kv\""},
		{"handshake and leave", "", "leave", "4", "0 subscribers received batches of topic \"kv\""},
		// Blocks of 1,024 token ids make tens of megabytes of batches,
		// past what the kernel's buffers take for a peer that reads nothing.
		{"never reads", "", "stall", "1024", "1 of the 1 subscribers that received batches lost some"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := freePort(t, "127.0.0.1")
			done := start(t, "publish", "-bind", "tcp://"+addr, "-trace", excerpt, "-capacity", "200", "-block-size", tc.blockSize,
				"-topic", "kv", "-warmup", "1s", "-linger", "0s", "-format", "json")
			c, r := dialSub(t, addr, tc.prefix)
			switch tc.act {
			case "read":
				go io.Copy(io.Discard, r)
			case "leave":
				c.Close()
			}
			res := <-done
			var sum publishSummary
			if err := json.Unmarshal([]byte(res.out), &sum); err != nil {
				t.Fatalf("summary %q: %v", res.out, err)
			}
			if res.code != 1 || !strings.Contains(res.err, tc.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", res.code, res.err, tc.want)
			}
			if sum.Connections != 1 || (tc.act == "stall") != (sum.Reached == 1 && sum.Lossy == 1) {
				t.Errorf("%d connections, %d reached, %d lossy", sum.Connections, sum.Reached, sum.Lossy)
			}
		})
	}
}

// TestPublishSignal stops publish, in a child process, with SIGTERM while
// it waits for subscribers: it prints its summary, flagged partial, and
// exits 143, as a shell reports a command that SIGTERM ended.
func TestPublishSignal(t *testing.T) {
	res := startChild(t, "publish", "-bind", "tcp://127.0.0.1:0", "-trace", excerpt, "-capacity", "200", "-warmup", "1m",
		"-linger", "0s", "-format", "json").signalUntilExit(syscall.SIGTERM)
	var sum publishSummary
	if err := json.Unmarshal([]byte(res.out), &sum); err != nil {
		t.Fatalf("summary %q: %v", res.out, err)
	}
	if res.code != 143 || !sum.Partial || !strings.Contains(res.err, "terminated by SIGTERM: published the events of 0 of") {
		t.Errorf("exit %d, stderr %q, summary %+v; want 143, the summary flagged partial and what was published", res.code, res.err, sum)
	}
}
