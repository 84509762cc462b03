package kvevents

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sagellm/kvevict/kvevents/internal/zmtp"
)

// testTimeout bounds every socket test; they finish in milliseconds when
// nothing is wrong.
const testTimeout = 5 * time.Second

// collector gathers a subscriber's messages.
type collector struct {
	mu   sync.Mutex
	msgs []Message
	more chan struct{}
}

func newCollector() *collector { return &collector{more: make(chan struct{}, 1)} }

func (c *collector) handle(m Message) {
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	c.mu.Unlock()
	select {
	case c.more <- struct{}{}:
	default:
	}
}

// wait returns the first n messages, failing the test if they do not come
// in time.
func (c *collector) wait(ctx context.Context, t *testing.T, n int) []Message {
	t.Helper()
	for {
		c.mu.Lock()
		if len(c.msgs) >= n {
			out := append([]Message(nil), c.msgs[:n]...)
			c.mu.Unlock()
			return out
		}
		got := len(c.msgs)
		c.mu.Unlock()
		select {
		case <-c.more:
		case <-ctx.Done():
			t.Fatalf("got %d messages before the timeout, want %d", got, n)
		}
	}
}

// listeningSubscriber starts a subscriber bound to a free port of
// 127.0.0.1, running until the test ends.
func listeningSubscriber(ctx context.Context, t *testing.T, opts ...SubscriberOption) (*Subscriber, *collector, string) {
	t.Helper()
	s, err := NewSubscriber(ctx, "tcp://127.0.0.1:0", append(opts, WithListen())...)
	if err != nil {
		t.Fatal(err)
	}
	return s, runSubscriber(ctx, t, s, nil), "tcp://" + s.Addr().String()
}

// runSubscriber runs s until the test ends, handing every message to also
// (if not nil) and to the collector it returns.
func runSubscriber(ctx context.Context, t *testing.T, s *Subscriber, also func(Message)) *collector {
	t.Helper()
	c := newCollector()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		s.Run(runCtx, func(m Message) {
			if also != nil {
				also(m)
			}
			c.handle(m)
		})
		close(done)
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
	return c
}

// waitSubscribed waits until a subscription reached pub, so that what it
// sends next is not dropped.
func waitSubscribed(ctx context.Context, t *testing.T, pub *zmtp.Pub) {
	t.Helper()
	if err := pub.WaitSubscribers(ctx, 1); err != nil {
		t.Fatalf("no subscription reached the publisher: %v", err)
	}
}

// rawPub is a PUB socket connected to addr, for frames a Publisher never
// sends, once a subscription has reached it.
func rawPub(ctx context.Context, t *testing.T, addr string) *zmtp.Pub {
	t.Helper()
	pub := zmtp.NewPub(zmtp.PubOptions{})
	t.Cleanup(func() { pub.Close(0) })
	if err := pub.Dial(addr); err != nil {
		t.Fatal(err)
	}
	waitSubscribed(ctx, t, pub)
	return pub
}

// sendRaw sends frames on pub, failing the test on an error.
func sendRaw(t *testing.T, pub *zmtp.Pub, frames ...[]byte) {
	t.Helper()
	if err := pub.Send(frames); err != nil {
		t.Fatal(err)
	}
}

// sinkSub is a SUB socket that listens on 127.0.0.1 and subscribes to
// nothing, so a Publisher connected to it sends into the void.
func sinkSub(t *testing.T) *zmtp.Sub {
	t.Helper()
	sink := zmtp.NewSub(zmtp.SubOptions{})
	t.Cleanup(func() { sink.Close() })
	if err := sink.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	return sink
}

func testBatches(bytesHashes bool) []EventBatch {
	h := func(n uint64) Hash {
		if bytesHashes {
			return BytesHash([]byte{byte(n), 0xff})
		}
		return IntHash(n<<60 | n) // above MaxInt64 from 8 on
	}
	gpu := MediumGPU
	var out []EventBatch
	for i := range uint64(12) {
		b := EventBatch{TS: float64(i), Events: []Event{
			&BlockStored{BlockHashes: []Hash{h(i)}, ParentBlockHash: ptr(h(i + 100)), TokenIDs: []int64{int64(i)}, BlockSize: 16, Medium: &gpu},
			&BlockRemoved{BlockHashes: []Hash{h(i + 200)}, Medium: &gpu},
		}}
		out = append(out, b)
	}
	return out
}

// TestPublishSubscribe sends batches of int and bytes hashes in both
// encodings over TCP and checks they arrive whole, numbered from 0.
func TestPublishSubscribe(t *testing.T) {
	for _, enc := range []Encoding{EncodingMixed, EncodingMap, EncodingArray} {
		for _, bytesHashes := range []bool{false, true} {
			t.Run(enc.String()+map[bool]string{false: "/int", true: "/bytes"}[bytesHashes], func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				defer cancel()
				_, c, addr := listeningSubscriber(ctx, t)
				p, err := NewPublisher(ctx, addr, WithTopic("kv@pod@model"), WithEncoding(enc), WithLinger(0))
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				waitSubscribed(ctx, t, p.pub)
				want := testBatches(bytesHashes)
				for i := range want {
					if seq, err := p.Publish(&want[i]); err != nil || seq != int64(i) {
						t.Fatalf("Publish %d: seq %d, %v", i, seq, err)
					}
				}
				for i := range want {
					want[i].DataParallelRank = ptr(int64(0)) // as Publish fills it in
				}
				for i, m := range c.wait(ctx, t, len(want)) {
					if m.Topic != "kv@pod@model" || m.Seq != int64(i) || m.Missed != 0 || m.Replayed {
						t.Errorf("message %d: topic %q seq %d missed %d replayed %v", i, m.Topic, m.Seq, m.Missed, m.Replayed)
					}
					if !reflect.DeepEqual(m.Batch, want[i]) {
						t.Errorf("batch %d: got %+v, want %+v", i, m.Batch, want[i])
					}
				}
			})
		}
	}
}

// gapSetup loses batches 0, 1 and 2 of a stream: a Publisher (with a
// replay buffer of buffer batches, or none without one) sends 0 to 3 while
// only an unsubscribed peer listens, so the subscriber first hears of the
// stream when a raw PUB socket sends it batch 3 with the same payload.
// Every batch is in the buffer before that, so what replay holds is fixed.
// It returns the first want messages and the stats.
func gapSetup(ctx context.Context, t *testing.T, buffer, want int) ([]Message, Stats) {
	t.Helper()
	batches := testBatches(false)[:4]
	sopts := []SubscriberOption{WithSubscriberLogger(slog.New(slog.DiscardHandler))}
	var p *Publisher
	if buffer > 0 {
		sink := sinkSub(t)
		var err error
		p, err = NewPublisher(ctx, "tcp://"+sink.Addr().String(), WithReplay("tcp://127.0.0.1:0", buffer), WithLinger(0))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		sopts = append(sopts, WithReplayEndpoint("tcp://"+p.ReplayAddr().String(), testTimeout))
	}
	s, c, addr := listeningSubscriber(ctx, t, sopts...)
	// The subscription reaches the live socket once the subscriber's
	// start-up replay has found the buffer empty; the batches go into it
	// after that, so only the gap can bring them.
	live := rawPub(ctx, t, addr)
	if p != nil {
		for i := range batches {
			if _, err := p.Publish(&batches[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range batches {
		batches[i].DataParallelRank = ptr(int64(0)) // as Publish filled it in
	}
	payload, err := Encode(&batches[3], EncodingMixed)
	if err != nil {
		t.Fatal(err)
	}
	sendRaw(t, live, nil, seqBytes(3), payload)
	msgs := c.wait(ctx, t, want)
	for _, m := range msgs {
		if !reflect.DeepEqual(m.Batch, batches[m.Seq]) {
			t.Errorf("seq %d: wrong batch %+v", m.Seq, m.Batch)
		}
	}
	return msgs, s.Stats()
}

// describe lists messages as seq/replayed/missed, for comparison.
func describe(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "%d", m.Seq)
		if m.Replayed {
			b.WriteString("r")
		}
		if m.Missed > 0 {
			fmt.Fprintf(&b, "(missed %d)", m.Missed)
		}
		b.WriteString(" ")
	}
	return b.String()
}

// TestGaps loses batches 0, 1 and 2 and recovers what the replay buffer
// still holds: all of them, the last (a buffer of 2 holds 2 and 3), or
// none without replay.
func TestGaps(t *testing.T) {
	for _, tc := range []struct {
		name          string
		buffer, count int
		want          string
		gaps, missed  int64
	}{
		{"replay holds the gap", 100, 4, "0r 1r 2r 3 ", 0, 0},
		{"replay holds part of it", 2, 2, "2r(missed 2) 3 ", 1, 2},
		{"no replay", 0, 1, "3(missed 3) ", 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			msgs, st := gapSetup(ctx, t, tc.buffer, tc.count)
			if got := describe(msgs); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if st.Gaps != tc.gaps || st.Missed != tc.missed {
				t.Errorf("stats %+v, want %d gaps of %d batches", st, tc.gaps, tc.missed)
			}
		})
	}
}

// TestBadInputOverSockets sends every kind of bad input from a raw PUB
// socket, checks each is counted and logged once, and that good batches
// after them still arrive.
func TestBadInputOverSockets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{&logs, &logMu}, nil))
	s, c, addr := listeningSubscriber(ctx, t, WithMaxPayload(64), WithSubscriberLogger(logger))
	pub := rawPub(ctx, t, addr)
	good := unhex(t, `92 01 91 91 b0416c6c426c6f636b73436c6561726564`) // [1, [["AllBlocksCleared"]]]
	unknown := unhex(t, `92 01 92 91 a3585858 91 b0416c6c426c6f636b73436c6561726564`)
	wrongType := unhex(t, `92 01 91 92 ac426c6f636b52656d6f766564 a178`)
	send := func(frames ...[]byte) {
		t.Helper()
		sendRaw(t, pub, frames...)
	}
	send([]byte("t"), seqBytes(0), good)
	send([]byte("t"), seqBytes(1), []byte{0xc1}) // not msgpack
	send([]byte("t"), seqBytes(2), []byte{0xc1}) // again: counted, not logged
	send([]byte("t"), []byte{1, 2}, good)        // short sequence frame
	send([]byte("t"), seqBytes(3), unknown)      // one unknown event, one good
	send([]byte("t"), seqBytes(4), wrongType)    // a string for block_hashes
	send([]byte("t"), seqBytes(7), good)         // seqs 5 and 6 lost
	send([]byte("t"), seqBytes(7), good)         // duplicate
	send([]byte("t"), seqBytes(8), good)
	// A payload frame over the limit ends its connection as its header
	// arrives: it goes last, from a connection of its own.
	sendRaw(t, rawPub(ctx, t, addr), []byte("u"), seqBytes(0), bytes.Repeat([]byte{0x90}, 65))
	msgs := c.wait(ctx, t, 5) // seqs 0, 3, 4 (no events left), 7, 8
	var seqs []int64
	for _, m := range msgs {
		seqs = append(seqs, m.Seq)
	}
	if !reflect.DeepEqual(seqs, []int64{0, 3, 4, 7, 8}) || len(msgs[1].Batch.Events) != 1 || msgs[3].Missed != 2 {
		t.Errorf("delivered seqs %v, events of 3: %d, missed before 7: %d", seqs, len(msgs[1].Batch.Events), msgs[3].Missed)
	}
	want := Stats{Delivered: 5, Missed: 2, Stale: 1, Malformed: 3, Oversized: 1, UnknownEvent: 1, FieldType: 1, Gaps: 1}
	logLines := func() int {
		logMu.Lock()
		defer logMu.Unlock()
		return strings.Count(logs.String(), "\n")
	}
	// The oversized frame's count comes from its own connection, and each
	// kind's line is logged just after it is counted.
	st, lines := s.Stats(), logLines()
	for deadline := time.Now().Add(testTimeout); (st != want || lines < 5) && time.Now().Before(deadline); st, lines = s.Stats(), logLines() {
		time.Sleep(10 * time.Millisecond)
	}
	if st != want {
		t.Errorf("stats\n got %+v\nwant %+v", st, want)
	}
	if lines != 5 { // malformed, unknown event, field type, oversized, gap
		t.Errorf("%d log lines, want one per kind (5):\n%s", lines, logs.String())
	}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
