package kvevents

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"
)

// TestLateJoinerCatchesUp starts a subscriber with a replay endpoint once
// a third of the batches are published, then publishes the rest at once
// and closes the publisher, while the subscriber, whose handler is slow,
// is still catching up by replay and has not subscribed yet: no live
// message will ever show it what it lacks. With a replay buffer that holds
// every batch it delivers every one and misses none; with a short one, it
// misses only what the buffer no longer held, and every batch is either
// delivered or counted missed. No replay request fails.
func TestLateJoinerCatchesUp(t *testing.T) {
	const batches = 600
	for _, buffer := range []int{DefaultReplayBuffer, 100} {
		t.Run(fmt.Sprint("buffer=", buffer), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*testTimeout)
			defer cancel()
			dir := t.TempDir()
			endpoint, replay := "ipc://"+filepath.Join(dir, "kv.ipc"), "ipc://"+filepath.Join(dir, "replay.ipc")
			p, err := NewPublisher(ctx, endpoint, WithTopic("kv@pod-0@m"), WithReplay(replay, buffer), WithLinger(2*testTimeout))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			publish := func(n int) {
				for range n {
					if _, err := p.Publish(&EventBatch{Events: []Event{stored(nil, uint64(p.Published()+1))}}); err != nil {
						t.Fatal(err)
					}
				}
			}
			publish(batches / 3)
			s, err := NewSubscriber(ctx, endpoint, WithReplayEndpoint(replay, DefaultReplayTimeout), WithSubscriberLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			runSubscriber(ctx, t, s, func(Message) { time.Sleep(500 * time.Microsecond) })
			// The catch-up is under way (a loaded machine may start Run
			// late) before the rest is published and the publisher closes.
			waitStats(ctx, s.Stats, func(st Stats) bool { return st.Delivered > 0 })
			publish(batches - batches/3)
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			// What the publisher sent before it closed is handled after.
			st := waitStats(ctx, s.Stats, func(st Stats) bool { return st.Delivered+st.Missed >= batches || st.ReplayFailures > 0 })
			if st.Delivered+st.Missed != batches || st.ReplayFailures != 0 {
				t.Errorf("stats %+v, want %d batches delivered or missed and no failed replay", st, batches)
			}
			if buffer >= batches && st.Missed != 0 {
				t.Errorf("missed %d batches, which the buffer held", st.Missed)
			}
			if st.Missed > batches-int64(buffer) && buffer < batches {
				t.Errorf("missed %d batches, more than the %d the buffer dropped", st.Missed, batches-buffer)
			}
		})
	}
}

// TestUnhandledCounted: a subscriber whose handler is slower than its
// publisher, stopped while batches wait for it, counts them as unhandled,
// so that its state is not taken for complete.
func TestUnhandledCounted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s, err := NewSubscriber(ctx, "tcp://127.0.0.1:0", WithListen())
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPublisher(ctx, "tcp://"+s.Addr().String(), WithLinger(testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() {
		s.Run(runCtx, func(Message) { time.Sleep(5 * time.Millisecond) })
		close(ran)
	}()
	waitSubscribed(ctx, t, p.pub)
	const batches = 200
	for range batches {
		if _, err := p.Publish(&EventBatch{Events: []Event{&AllBlocksCleared{}}}); err != nil {
			t.Fatal(err)
		}
	}
	for p.Stats().Sent < batches && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	stop()
	<-ran
	st := s.Stats()
	if st.Unhandled == 0 || st.Delivered+st.Unhandled > batches {
		t.Errorf("stats %+v: want some of the %d batches unhandled, and no more than were sent", st, batches)
	}
}

// waitStats polls stats (a Subscriber's or a Publisher's) until done
// holds or ctx ends, and returns the last.
func waitStats[S any](ctx context.Context, stats func() S, done func(S) bool) S {
	for {
		st := stats()
		if done(st) || ctx.Err() != nil {
			return st
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCatchUpAtEnd: a stream whose last batches never reached the
// subscriber (a raw PUB socket sends it 0 to 4 of the 10 a Publisher
// published into its replay buffer) shows no gap, since no later message
// comes. CatchUp, once Run has returned, asks the replay socket for the
// rest: with a buffer that holds it, 5 to 9 are delivered, none missed;
// with a buffer of 3, 7 to 9, and the 2 it no longer holds are counted
// missed. A publisher gone by then cannot answer: CatchUp says so and
// counts nothing, neither a miss nor a failed replay.
func TestCatchUpAtEnd(t *testing.T) {
	for _, tc := range []struct {
		name          string
		buffer        int
		gone          bool
		first, missed int64
	}{{"whole buffer", 10, false, 5, 0}, {"short buffer", 3, false, 7, 2}, {"publisher gone", 10, true, -1, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			sink := sinkSub(t)
			p, err := NewPublisher(ctx, "tcp://"+sink.Addr().String(), WithTopic("kv"), WithReplay("tcp://127.0.0.1:0", tc.buffer), WithLinger(0))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			s, err := NewSubscriber(ctx, "tcp://127.0.0.1:0", WithListen(), WithSubscriberLogger(slog.New(slog.DiscardHandler)),
				WithReplayEndpoint("tcp://"+p.ReplayAddr().String(), testTimeout))
			if err != nil {
				t.Fatal(err)
			}
			c := newCollector()
			runCtx, stop := context.WithCancel(ctx)
			ran := make(chan struct{})
			go func() { s.Run(runCtx, c.handle); close(ran) }()
			defer func() { stop(); <-ran }()
			// The subscription comes once the start-up replay found the
			// buffer empty: the batches go into it after that.
			live := rawPub(ctx, t, "tcp://"+s.Addr().String())
			batches := testBatches(false)[:10]
			payloads := make([][]byte, len(batches))
			for i := range batches {
				if _, err := p.Publish(&batches[i]); err != nil {
					t.Fatal(err)
				}
				if payloads[i], err = Encode(&batches[i], EncodingMixed); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 5 {
				sendRaw(t, live, []byte("kv"), seqBytes(int64(i)), payloads[i])
			}
			c.wait(ctx, t, 5)
			stop()
			<-ran
			if tc.gone {
				p.Close()
			}
			if answered := s.CatchUp(ctx, c.handle); answered == tc.gone {
				t.Errorf("CatchUp answered %v with the publisher gone %v", answered, tc.gone)
			}
			c.mu.Lock()
			msgs := c.msgs[5:]
			c.mu.Unlock()
			st := s.Stats()
			if st.Missed != tc.missed || st.ReplayFailures != 0 || st.Delivered != 5+int64(len(msgs)) {
				t.Errorf("stats %+v, want %d missed, no failed replay", st, tc.missed)
			}
			if tc.gone {
				if len(msgs) != 0 {
					t.Errorf("%d batches delivered with the publisher gone", len(msgs))
				}
				return
			}
			if len(msgs) != int(10-tc.first) {
				t.Fatalf("CatchUp delivered %s, want %d to 9", describe(msgs), tc.first)
			}
			for i, m := range msgs {
				want := Message{Topic: "kv", Seq: tc.first + int64(i), Replayed: true}
				if i == 0 {
					want.Missed = tc.missed
				}
				if m.Topic != want.Topic || m.Seq != want.Seq || m.Replayed != want.Replayed || m.Missed != want.Missed {
					t.Errorf("message %d: %+v, want %+v", i, m, want)
				}
			}
		})
	}
}
