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
