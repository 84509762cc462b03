package kvevents

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sagellm/kvevict/kvevents/internal/zmtp"
)

// waitTopics waits until every one of topics has reached pub. A SUB socket
// sends one subscription per prefix, so a publisher that has the first may
// still drop the topics of the next.
func waitTopics(ctx context.Context, t *testing.T, pub *zmtp.Pub, topics ...string) {
	t.Helper()
	for !reflect.DeepEqual(pub.Subscriptions(), topics) {
		select {
		case <-ctx.Done():
			t.Fatalf("subscriptions %q reached the publisher, want %q", pub.Subscriptions(), topics)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestWithSubscription checks that a subscriber given the prefixes "a"
// and "c" receives the topics that start with either and no other, "ba"
// included, which holds "a" but does not start with it. Publishers of
// unwanted topics send first and linger before closing, so that their
// batches, were the filter wrong, would be on the wire before the wanted
// ones are sent. A raw socket then sends wanted and unwanted topics over
// one connection, whose messages arrive in order: had an unwanted one got
// through, it would be among the first five delivered.
func TestWithSubscription(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s, c, addr := listeningSubscriber(ctx, t, WithSubscription("a"), WithSubscription("c"))
	publisher := func(topic string, linger time.Duration) *Publisher {
		t.Helper()
		p, err := NewPublisher(ctx, addr, WithTopic(topic), WithLinger(linger))
		if err != nil {
			t.Fatal(err)
		}
		waitTopics(ctx, t, p.pub, "a", "c")
		if _, err := p.Publish(&EventBatch{Events: []Event{&AllBlocksCleared{}}}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, topic := range []string{"b", "ba"} {
		if err := publisher(topic, 100*time.Millisecond).Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, topic := range []string{"a", "a@pod-0@m", "c1"} {
		defer publisher(topic, 0).Close() // after the wait below: the batch is sent by then
	}
	raw := rawPub(ctx, t, addr)
	waitTopics(ctx, t, raw, "a", "c")
	payload, err := Encode(&EventBatch{Events: []Event{&AllBlocksCleared{}}}, EncodingMap)
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"b", "ab", "", "B", "ca"} {
		sendRaw(t, raw, []byte(topic), seqBytes(0), payload)
	}
	msgs := c.wait(ctx, t, 5)
	got := make(map[string]bool)
	for _, m := range msgs {
		got[m.Topic] = true
	}
	for _, topic := range []string{"a", "a@pod-0@m", "c1", "ab", "ca"} {
		if !got[topic] {
			t.Errorf("topic %q not received", topic)
		}
	}
	c.mu.Lock()
	for _, m := range c.msgs {
		if !strings.HasPrefix(m.Topic, "a") && !strings.HasPrefix(m.Topic, "c") {
			t.Errorf("received topic %q, which starts with neither prefix", m.Topic)
		}
	}
	c.mu.Unlock()
	if st := s.Stats(); st.Delivered != 5 {
		t.Errorf("%d batches delivered, want the 5 of the subscribed topics", st.Delivered)
	}
}

// TestSubscriberStops checks the two ways to end Run besides its own
// context that the docs promise: Close, and the end of the context given
// to NewSubscriber. A Run that missed either would spin on a closed socket
// or never return.
func TestSubscriberStops(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(*Subscriber, context.CancelFunc)
	}{
		{"Close", func(s *Subscriber, _ context.CancelFunc) {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}},
		{"socket context ends", func(_ *Subscriber, cancel context.CancelFunc) { cancel() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			socketCtx, cancelSocket := context.WithTimeout(context.Background(), testTimeout)
			defer cancelSocket()
			s, err := NewSubscriber(socketCtx, "tcp://127.0.0.1:0", WithListen())
			if err != nil {
				t.Fatal(err)
			}
			runCtx, stopRun := context.WithCancel(context.Background())
			defer stopRun()
			done := make(chan struct{})
			go func() { s.Run(runCtx, func(Message) {}); close(done) }()
			tc.stop(s, cancelSocket)
			select {
			case <-done:
			case <-time.After(testTimeout):
				t.Fatal("Run did not return")
			}
		})
	}
}

// TestNewSubscriberErrors checks that NewSubscriber refuses the options
// their docs bound and an endpoint it cannot open, returning an error
// rather than a subscriber that never receives.
func TestNewSubscriberErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for name, opt := range map[string]SubscriberOption{
		"replay timeout 0":   WithReplayEndpoint("tcp://127.0.0.1:1", 0),
		"replay timeout < 0": WithReplayEndpoint("tcp://127.0.0.1:1", -time.Second),
		"max payload 0":      WithMaxPayload(0),
		"max payload < 0":    WithMaxPayload(-1),
		"max topic length":   WithMaxTopicLength(-1),
		"max topics":         WithMaxTopics(0),
		"max gap":            WithMaxGap(0),
	} {
		if s, err := NewSubscriber(ctx, "tcp://127.0.0.1:0", opt, WithListen()); err == nil {
			s.Close()
			t.Errorf("%s: accepted", name)
		}
	}
	if s, err := NewSubscriber(ctx, "carrier-pigeon://127.0.0.1:1"); err == nil {
		s.Close()
		t.Error("an unknown transport was accepted")
	}
}

// TestSubscriberFollowsRestart connects a subscriber, as NewSubscriber
// does for an ipc:// endpoint, to a publisher that binds, then replaces
// the publisher with a new one on the same endpoint. The subscriber must
// reconnect by itself, keep running, and mark the new sequence from 0 as
// a restart; a Mirror fed by it must then drop what the old publisher
// stored, as vLLM's engine lost that cache.
func TestSubscriberFollowsRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	endpoint := "ipc://" + filepath.Join(t.TempDir(), "kv.ipc")
	const topic = "kv@pod-0@m"
	first, err := NewPublisher(ctx, endpoint, WithTopic(topic), WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	s, err := NewSubscriber(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if a := s.Addr(); a != nil {
		t.Errorf("connecting subscriber: Addr %v, want nil", a)
	}
	m, err := NewMirror(100)
	if err != nil {
		t.Fatal(err)
	}
	c := runSubscriber(ctx, t, s, m.Handle)

	waitSubscribed(ctx, t, first.pub)
	for _, b := range []*EventBatch{
		{Events: []Event{stored(nil, 1, 2)}},
		{Events: []Event{stored(ptr(IntHash(2)), 3)}},
	} {
		if _, err := first.Publish(b); err != nil {
			t.Fatal(err)
		}
	}
	c.wait(ctx, t, 2)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	second, err := NewPublisher(ctx, endpoint, WithTopic(topic), WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	waitSubscribed(ctx, t, second.pub)
	if _, err := second.Publish(&EventBatch{Events: []Event{stored(nil, 7)}}); err != nil {
		t.Fatal(err)
	}
	msgs := c.wait(ctx, t, 3)
	if last := msgs[2]; last.Seq != 0 || !last.Restart || last.Missed != 0 {
		t.Errorf("first batch of the new publisher: seq %d restart %v missed %d, want 0, true, 0", last.Seq, last.Restart, last.Missed)
	}
	if got := residents(m, topic, 10); len(got) != 1 || got[0] != 7 {
		t.Errorf("mirror holds %v after the restart, want [7]", got)
	}
	if st := s.Stats(); st.Delivered != 3 || st.Stale != 0 || st.Missed != 0 || st.Restarts != 1 {
		t.Errorf("stats %+v, want 3 delivered, none stale or missed, one restart", st)
	}
}

// TestReplayTimeout points a subscriber's replay at a ROUTER socket that
// never answers. WithReplayEndpoint promises to wait at most its timeout:
// the live batch must still be delivered, with the gap counted as missed
// and the failed replay logged.
func TestReplayTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	silent := zmtp.NewServer(zmtp.ServerOptions{}, func(c *zmtp.Conn) { _, _ = c.ReadMsg() })
	defer silent.Close()
	if err := silent.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{&logs, &logMu}, nil))
	s, c, addr := listeningSubscriber(ctx, t,
		WithReplayEndpoint("tcp://"+silent.Addr().String(), 100*time.Millisecond), WithSubscriberLogger(logger))
	live := rawPub(ctx, t, addr)
	payload, err := Encode(&EventBatch{Events: []Event{&AllBlocksCleared{}}}, EncodingMap)
	if err != nil {
		t.Fatal(err)
	}
	sendRaw(t, live, nil, seqBytes(3), payload)
	if m := c.wait(ctx, t, 1)[0]; m.Seq != 3 || m.Missed != 3 || m.Replayed {
		t.Errorf("delivered seq %d missed %d replayed %v, want 3, 3, false", m.Seq, m.Missed, m.Replayed)
	}
	// The gap's request failed; the one at start-up asked for nothing
	// known missing, and is logged but not counted.
	if st := s.Stats(); st.Gaps != 1 || st.Missed != 3 || st.Replayed != 0 || st.ReplayFailures != 1 {
		t.Errorf("stats %+v, want one gap of 3, nothing replayed, one replay failed", st)
	}
	logMu.Lock()
	got := logs.String()
	logMu.Unlock()
	if !strings.Contains(got, "replay from") {
		t.Errorf("log %q, want the failed replay", got)
	}
}

// TestSubscriberWaitsOutALongRestart closes a publisher and binds a new one
// on the same endpoint only after longer than go-zeromq's default redials
// last (10 of 250 ms): a restarting engine is often down that long, and the
// subscriber must still find the new one.
func TestSubscriberWaitsOutALongRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*firstDialWait+testTimeout)
	defer cancel()
	endpoint := "ipc://" + filepath.Join(t.TempDir(), "kv.ipc")
	first, err := NewPublisher(ctx, endpoint, WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSubscriber(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c := runSubscriber(ctx, t, s, nil)
	waitSubscribed(ctx, t, first.pub)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(firstDialWait + 500*time.Millisecond)
	second, err := NewPublisher(ctx, endpoint, WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	waitSubscribed(ctx, t, second.pub)
	if _, err := second.Publish(&EventBatch{Events: []Event{&AllBlocksCleared{}}}); err != nil {
		t.Fatal(err)
	}
	c.wait(ctx, t, 1)
}

// TestSubscriberWithoutPublisher connects to an endpoint nobody binds:
// NewSubscriber must fail, after about firstDialWait, rather than wait
// without end.
func TestSubscriberWithoutPublisher(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), firstDialWait+testTimeout)
	defer cancel()
	start := time.Now()
	s, err := NewSubscriber(ctx, "ipc://"+filepath.Join(t.TempDir(), "nobody.ipc"))
	if err == nil {
		s.Close()
		t.Fatal("a subscriber connected to an endpoint nobody binds")
	}
	if waited := time.Since(start); waited < firstDialWait {
		t.Errorf("gave up after %v, before firstDialWait (%v)", waited, firstDialWait)
	}
}

// TestRestartWhereTheOldPublisherStopped replaces a publisher whose last
// batch was 2 with one that sends 0, 1 and 2 before the subscriber is back
// and 3 after: the first number the subscriber hears from the new one is
// the one the old would have sent next. The new connection makes it ask
// the replay socket, whose batch 2 is not the one it delivered: a restart,
// caught up from 0, and the mirror drops the old engine's blocks.
func TestRestartWhereTheOldPublisherStopped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	dir := t.TempDir()
	endpoint, replay := "ipc://"+filepath.Join(dir, "kv.ipc"), "ipc://"+filepath.Join(dir, "replay.ipc")
	publish := func(p *Publisher, hashes ...uint64) {
		t.Helper()
		for _, h := range hashes {
			if _, err := p.Publish(&EventBatch{Events: []Event{stored(nil, h)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	first, err := NewPublisher(ctx, endpoint, WithReplay(replay, 10), WithLinger(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSubscriber(ctx, endpoint, WithReplayEndpoint(replay, testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMirror(100)
	if err != nil {
		t.Fatal(err)
	}
	c := runSubscriber(ctx, t, s, m.Handle)
	waitSubscribed(ctx, t, first.pub)
	publish(first, 1, 2, 3)
	c.wait(ctx, t, 3)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second, err := NewPublisher(ctx, endpoint, WithReplay(replay, 10), WithLinger(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if second.pub.Subscribers() > 0 {
		t.Skip("the subscriber redialed before the new publisher's first batches; the case needs it to miss them")
	}
	publish(second, 7, 8, 9) // 0, 1, 2: before the subscriber is back (it redials after 100 ms), so lost
	waitSubscribed(ctx, t, second.pub)
	publish(second, 10) // 3
	msgs := c.wait(ctx, t, 7)
	if got := describe(msgs[3:]); got != "0r 1r 2r 3 " || !msgs[3].Restart {
		t.Errorf("after the restart: %q (first marked restart: %v), want 0r 1r 2r 3 with the first a restart", got, msgs[3].Restart)
	}
	if got := fmt.Sprint(residents(m, "", 20)); got != "[7 8 9 10]" {
		t.Errorf("mirror holds %s, want the new engine's [7 8 9 10]", got)
	}
	if st := s.Stats(); st.Restarts != 1 || st.Missed != 0 || st.ReplayFailures != 0 {
		t.Errorf("stats %+v, want one restart, nothing missed", st)
	}
}

// TestJoinAnIdleEngine starts a subscriber, given the replay endpoint,
// after its publisher sent everything it will send: the subscriber
// catches up from the replay socket alone, before any live message.
func TestJoinAnIdleEngine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	dir := t.TempDir()
	endpoint, replay := "ipc://"+filepath.Join(dir, "kv.ipc"), "ipc://"+filepath.Join(dir, "replay.ipc")
	p, err := NewPublisher(ctx, endpoint, WithTopic("kv@pod-0@m"), WithReplay(replay, 10), WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, b := range []*EventBatch{
		{Events: []Event{stored(nil, 1, 2)}},
		{Events: []Event{stored(ptr(IntHash(2)), 3)}},
		{Events: []Event{removed(1)}},
	} {
		if _, err := p.Publish(b); err != nil {
			t.Fatal(err)
		}
	}
	m, err := NewMirror(100)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSubscriber(ctx, endpoint, WithReplayEndpoint(replay, testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	c := runSubscriber(ctx, t, s, m.Handle)
	if got := describe(c.wait(ctx, t, 3)); got != "0r 1r 2r " {
		t.Errorf("delivered %q, want 0r 1r 2r", got)
	}
	if got := fmt.Sprint(residents(m, "kv@pod-0@m", 10)); got != "[2 3]" {
		t.Errorf("mirror holds %s, want [2 3]", got)
	}
	if st := s.Stats(); st.Delivered != 3 || st.Replayed != 3 || st.Missed != 0 {
		t.Errorf("stats %+v", st)
	}
}
