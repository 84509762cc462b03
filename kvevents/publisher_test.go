package kvevents

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sagellm/kvevict/kvevents/internal/zmtp"
)

// TestBinds checks the rule on the endpoints vLLM's docs and llm-d use,
// and on addresses that only look like wildcards.
func TestBinds(t *testing.T) {
	for ep, want := range map[string]bool{
		"tcp://*:5557":              true,
		"tcp://[::]:5557":           true,
		"tcp://0.0.0.0:5557":        true,
		"tcp://127.0.0.1:*":         true,
		"ipc:///tmp/kv.ipc":         true,
		"inproc://cache":            true,
		"tcp://127.0.0.1:5557":      false,
		"tcp://[::1]:5557":          false,
		"tcp://[fe80::1]:5557":      false,
		"tcp://vllm-pod-0:5557":     false,
		"tcp://kv-indexer.svc:5557": false,
		"tcp://x*y":                 false, // no port: not an address at all
	} {
		if got := Binds(ep); got != want {
			t.Errorf("Binds(%q) = %v, want %v", ep, got, want)
		}
	}
}

// TestReplayBufferBounded publishes more batches than the buffer holds and
// checks that the latest ones, in order, are what replay would send.
func TestReplayBufferBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p, err := NewPublisher(ctx, "inproc://kvevents-buffer", WithReplay("inproc://kvevents-buffer-replay", 3), WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for range 5 {
		if _, err := p.Publish(&EventBatch{Events: []Event{&AllBlocksCleared{}}}); err != nil {
			t.Fatal(err)
		}
	}
	for start, want := range map[int64]string{0: "[2 3 4]", 3: "[3 4]", 5: "[]", -1 << 62: "[2 3 4]"} {
		var seqs []int64
		for next := start; ; {
			b, ok := p.buffered(next, p.Published())
			if !ok {
				break
			}
			seqs, next = append(seqs, b.seq), b.seq+1
		}
		if got := fmt.Sprint(seqs); got != want {
			t.Errorf("from %d: %s, want %s", start, got, want)
		}
	}
	if p.Published() != 5 {
		t.Errorf("Published() = %d, want 5", p.Published())
	}
	for _, bad := range []PublisherOption{WithReplay("inproc://x", 0), WithEncoding(Encoding(9)), WithLinger(-1), WithHighWaterMark(0), WithDataParallelRank(-1)} {
		if _, err := NewPublisher(ctx, "inproc://kvevents-bad", bad); err == nil {
			t.Error("a bad option was accepted")
		}
	}
}

// sinkPublisher starts a publisher that connects, as a publisher to
// 127.0.0.1 does by Binds, to a SUB socket that subscribes to nothing:
// for tests of what the publisher does beside sending.
func sinkPublisher(ctx context.Context, t *testing.T, opts ...PublisherOption) *Publisher {
	t.Helper()
	sink := sinkSub(t)
	p, err := NewPublisher(ctx, "tcp://"+sink.Addr().String(), append(opts, WithLinger(0))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// replayAnswer reads one message of a replay answer on a DEALER
// connection: as current vLLM sends it, the ROUTER's empty delimiter, the
// topic, the sequence frame and the payload.
func replayAnswer(t *testing.T, d *zmtp.Conn, topic string) (int64, []byte) {
	t.Helper()
	f, err := d.ReadMsg()
	if err != nil {
		t.Fatalf("replay answer: %v", err)
	}
	if len(f) != 4 || len(f[0]) != 0 || string(f[1]) != topic || len(f[2]) != 8 {
		t.Fatalf("replay answer of frames %x, want empty, topic %q, 8-byte sequence, payload", f, topic)
	}
	return int64(binary.BigEndian.Uint64(f[2])), f[3]
}

// dialReplay connects a DEALER to p's replay socket.
func dialReplay(ctx context.Context, t *testing.T, p *Publisher) *zmtp.Conn {
	t.Helper()
	d, err := zmtp.Dial(ctx, "tcp://"+p.ReplayAddr().String(), zmtp.Dealer, []byte("replay-test"), zmtp.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	d.SetDeadline(time.Now().Add(testTimeout))
	return d
}

// TestPublisherLogsBadReplayRequests sends malformed replay requests, each
// a way a client can get the frames wrong, then a good one: the logger
// given by WithPublisherLogger gets one warning, each is counted, and the
// publisher goes on answering, with the buffered batches and the end
// marker, to the same client. Requests whose frames break the replay
// socket's limits (no empty delimiter, a frame too many) end their
// connection instead; the client asks again on a new one.
func TestPublisherLogsBadReplayRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{&logs, &logMu}, nil))
	p := sinkPublisher(ctx, t, WithReplay("tcp://127.0.0.1:0", 10), WithPublisherLogger(logger), WithTopic("kv@p@m"))
	var payloads [][]byte
	for i := range 2 {
		b := EventBatch{TS: float64(i), Events: []Event{&AllBlocksCleared{}}}
		b.DataParallelRank = ptr(int64(0))
		payload, err := Encode(&b, EncodingMixed)
		if err != nil {
			t.Fatal(err)
		}
		payloads = append(payloads, payload)
		if _, err := p.Publish(&b); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range [][][]byte{
		{{1}, seqBytes(0)},      // no empty delimiter
		{nil, seqBytes(0), nil}, // a frame too many
		{seqBytes(0)},           // start alone
	} {
		d := dialReplay(ctx, t, p)
		if err := d.WriteMsg(bad); err != nil {
			t.Fatal(err)
		}
		if f, err := d.ReadMsg(); err == nil {
			t.Errorf("request %x answered with %x, want the connection closed", bad, f)
		}
	}
	d := dialReplay(ctx, t, p)
	for range 2 {
		if err := d.WriteMsg([][]byte{nil, {0, 0, 0, 1}}); err != nil { // a 4-byte start
			t.Fatal(err)
		}
	}
	if err := d.WriteMsg([][]byte{nil, seqBytes(1)}); err != nil {
		t.Fatal(err)
	}
	if seq, payload := replayAnswer(t, d, "kv@p@m"); seq != 1 || !bytes.Equal(payload, payloads[1]) {
		t.Errorf("replay from 1 sent seq %d payload %x, want 1 and %x", seq, payload, payloads[1])
	}
	if seq, payload := replayAnswer(t, d, "kv@p@m"); seq != -1 || len(payload) != 0 {
		t.Errorf("replay ended with seq %d payload %x, want -1 and nothing", seq, payload)
	}
	logMu.Lock()
	got := logs.String()
	logMu.Unlock()
	if strings.Count(got, "level=WARN") != 1 || !strings.Contains(got, "replay request") {
		t.Errorf("log %q, want one warning of malformed replay requests", got)
	}
	// The publisher counts an answer once it is written: the end marker
	// may reach the test first.
	st := p.Stats()
	for st.ReplayRequests < 1 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
		st = p.Stats()
	}
	if st.ReplayRequests != 1 || st.ReplayFailures != 5 {
		t.Errorf("replay requests %d answered, %d failed; want 1 and 5", st.ReplayRequests, st.ReplayFailures)
	}
}

// TestPublisherAddrs checks Addr and ReplayAddr against their docs: a
// publisher that connects has no address, one that binds (here an ipc
// socket, a local file) has its own, and ReplayAddr is nil without
// WithReplay.
func TestPublisherAddrs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p := sinkPublisher(ctx, t)
	if a, r := p.Addr(), p.ReplayAddr(); a != nil || r != nil {
		t.Errorf("connecting publisher without replay: Addr %v, ReplayAddr %v, want nil and nil", a, r)
	}
	path := filepath.Join(t.TempDir(), "kv.ipc")
	b, err := NewPublisher(ctx, "ipc://"+path, WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a := b.Addr(); a == nil || a.String() != path {
		t.Errorf("binding publisher: Addr %v, want %s", a, path)
	}
}

// TestPublishRefusesBadBatch checks that a batch Encode refuses is an
// error from Publish and costs no sequence number: a subscriber would
// otherwise count the unsent number as a gap.
func TestPublishRefusesBadBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p := sinkPublisher(ctx, t)
	if seq, err := p.Publish(&EventBatch{Events: []Event{nil}}); err == nil {
		t.Fatalf("a nil event was published as %d", seq)
	}
	if n := p.Published(); n != 0 {
		t.Errorf("Published() = %d after a refused batch, want 0", n)
	}
	if seq, err := p.Publish(&EventBatch{}); err != nil || seq != 0 {
		t.Errorf("next Publish: seq %d, %v, want 0", seq, err)
	}
}

// TestNewPublisherErrors checks that sockets NewPublisher cannot open are
// errors, not a publisher that sends nowhere: an unknown transport, and a
// replay endpoint another socket already holds.
func TestNewPublisherErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if p, err := NewPublisher(ctx, "carrier-pigeon://127.0.0.1:1"); err == nil {
		p.Close()
		t.Error("an unknown transport was accepted")
	}
	held := sinkPublisher(ctx, t, WithReplay("tcp://127.0.0.1:0", 1))
	taken := "tcp://" + held.ReplayAddr().String()
	if p, err := NewPublisher(ctx, "inproc://kvevents-taken", WithReplay(taken, 1), WithLinger(0)); err == nil {
		p.Close()
		t.Errorf("replay on %s, which another publisher holds, was accepted", taken)
	}
}

// TestCloseLingers checks that the batches published just before Close
// reach a subscriber, within the linger time, and that the publisher's
// counts say so.
func TestCloseLingers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	_, c, addr := listeningSubscriber(ctx, t)
	p, err := NewPublisher(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	waitSubscribed(ctx, t, p.pub)
	batches := testBatches(false)
	for i := range batches {
		if _, err := p.Publish(&batches[i]); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(start); d > DefaultLinger+time.Second {
		t.Errorf("Close returned after %v, want within the linger, %v", d, DefaultLinger)
	}
	c.wait(ctx, t, len(batches))
	n := int64(len(batches))
	if st := p.Stats(); st.Published != n || st.Sent != n || st.Dropped != 0 || st.Unsent != 0 || len(st.Subscribers) != 1 {
		t.Errorf("stats %+v, want %d published and sent to one subscriber", st, n)
	}
	if _, err := p.Publish(&batches[0]); !errors.Is(err, ErrClosed) {
		t.Errorf("Publish after Close: %v, want ErrClosed", err)
	}
}

// TestCloseAnswersReplayUnderWay starts a replay answer far larger than a
// unix socket's buffer, then closes the publisher: Close waits, within the
// linger, until the answer is written whole, answers a request that comes
// meanwhile (a late joiner catching up asks again), and then closes.
func TestCloseAnswersReplayUnderWay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	const batches = 600
	replay := "ipc://" + filepath.Join(t.TempDir(), "replay.ipc")
	p, err := NewPublisher(ctx, "tcp://"+sinkSub(t).Addr().String(), WithReplay(replay, batches), WithLinger(testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range batches {
		tokens := make([]int64, 4096)
		for j := range tokens {
			tokens[j] = int64(i + j)
		}
		if _, err := p.Publish(&EventBatch{Events: []Event{&BlockStored{BlockHashes: []Hash{IntHash(uint64(i + 1))}, TokenIDs: tokens, BlockSize: 4096}}}); err != nil {
			t.Fatal(err)
		}
	}
	ask := func() (*zmtp.Conn, error) {
		d, err := zmtp.Dial(ctx, replay, zmtp.Dealer, nil, zmtp.Limits{Frames: []int{0, 1 << 20}, MaxFrames: 4}, nil)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { d.Close() })
		d.SetDeadline(time.Now().Add(2 * testTimeout))
		return d, d.WriteMsg([][]byte{nil, seqBytes(0)})
	}
	whole := func(d *zmtp.Conn, from int64) {
		t.Helper()
		for want := from; ; want++ {
			seq, _ := replayAnswer(t, d, "")
			if seq == -1 {
				if want != batches {
					t.Fatalf("the answer ended after %d batches, want %d", want, batches)
				}
				return
			}
			if seq != want {
				t.Fatalf("batch %d of the answer is %d", want, seq)
			}
		}
	}
	first, err := ask()
	if err != nil {
		t.Fatal(err)
	}
	if seq, _ := replayAnswer(t, first, ""); seq != 0 {
		t.Fatalf("the answer starts at %d, want 0", seq)
	}
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	for closing := false; !closing; time.Sleep(time.Millisecond) {
		p.mu.Lock()
		closing = p.closed
		p.mu.Unlock()
	}
	second, err := ask()
	if err != nil {
		t.Fatal(err)
	}
	whole(second, 0)
	select {
	case <-closed:
		t.Fatal("Close returned with an answer under way")
	default:
	}
	whole(first, 1)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if d, err := ask(); err == nil {
		if f, err := d.ReadMsg(); err == nil {
			t.Errorf("a request after Close was answered with %d frames", len(f))
		}
	}
	if st := p.Stats(); st.ReplayRequests != 2 || st.ReplayFailures != 0 {
		t.Errorf("replay requests %d answered, %d failed; want 2 and 0", st.ReplayRequests, st.ReplayFailures)
	}
}

// TestKeptPayloadsFit: a payload the encoder left with spare room is kept
// at its length, so the replay buffer's byte budget, which counts
// lengths, bounds what it holds.
func TestKeptPayloadsFit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p := sinkPublisher(ctx, t, WithReplay("tcp://127.0.0.1:0", 10))
	for _, tokens := range []int{0, 1 << 10, 100_000, 300_000} {
		if _, err := p.Publish(&EventBatch{Events: []Event{&BlockStored{BlockHashes: IntHashes([]uint64{1}), TokenIDs: make([]int64, tokens)}}}); err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		kept := p.buf[len(p.buf)-1].payload
		p.mu.Unlock()
		if cap(kept)-len(kept) > len(kept)/8 {
			t.Errorf("%d token ids: a payload of %d bytes kept in %d", tokens, len(kept), cap(kept))
		}
	}
}

// TestReplayReached counts a replay connection once it was answered with
// a batch, once however many it asked for; one answered with none is not
// counted.
func TestReplayReached(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p := sinkPublisher(ctx, t, WithReplay("tcp://127.0.0.1:0", 10))
	for range 3 {
		if _, err := p.Publish(&EventBatch{Events: []Event{&AllBlocksCleared{}}}); err != nil {
			t.Fatal(err)
		}
	}
	ask := func(d *zmtp.Conn, start int64) (n int) {
		t.Helper()
		if err := d.WriteMsg([][]byte{nil, seqBytes(start)}); err != nil {
			t.Fatal(err)
		}
		for {
			if seq, _ := replayAnswer(t, d, ""); seq == endSeq {
				return n
			}
			n++
		}
	}
	empty := dialReplay(ctx, t, p)
	if n := ask(empty, 3); n != 0 {
		t.Fatalf("%d batches from 3", n)
	}
	d := dialReplay(ctx, t, p)
	if n := ask(d, 0) + ask(d, 1); n != 5 {
		t.Fatalf("%d batches from 0 and from 1, want 5", n)
	}
	// The server counts a request once its answer is written, which the
	// client may have read already.
	st := waitStats(ctx, p.Stats, func(st PublisherStats) bool { return st.ReplayRequests >= 3 })
	if st.ReplayReached != 1 || st.ReplayRequests != 3 {
		t.Errorf("%d replay connections reached, %d requests; want 1 and 3", st.ReplayReached, st.ReplayRequests)
	}
}
