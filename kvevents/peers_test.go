package kvevents

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sagellm/kvevict/kvevents/internal/zmtp"
)

// TestMaxSubscribers: a publisher limited to one subscriber closes a second
// as soon as it connects, counts it, and goes on publishing to the first;
// a limit below one is refused.
func TestMaxSubscribers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if p, err := NewPublisher(ctx, "tcp://127.0.0.1:0", WithMaxSubscribers(0)); err == nil {
		p.Close()
		t.Error("WithMaxSubscribers(0) was accepted")
	}
	p, err := NewPublisher(ctx, "tcp://127.0.0.1:0", WithPublisherDirection(Bind), WithMaxSubscribers(1), WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	addr := "tcp://" + p.Addr().String()
	first, err := NewSubscriber(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	c := runSubscriber(ctx, t, first, nil)
	if err := p.pub.WaitSubscribers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// One connection, which the publisher closes at once (a Subscriber
	// would connect again and again), and which is told why it may be.
	second, err := zmtp.Dial(ctx, addr, "SUB", nil, zmtp.Limits{}, nil)
	wantRefused(t, "subscriber", second, err)
	st := waitStats(ctx, p.Stats, func(st PublisherStats) bool { return st.RefusedSubscribers >= 1 })
	if st.RefusedSubscribers != 1 || len(st.Subscribers) != 1 {
		t.Errorf("%d refused, %d subscribers connected; want 1 and 1 (the limit)", st.RefusedSubscribers, len(st.Subscribers))
	}
	if _, err := p.Publish(&EventBatch{Events: []Event{&AllBlocksCleared{}}}); err != nil {
		t.Fatal(err)
	}
	c.wait(ctx, t, 1)
}

// wantRefused checks what a dial past a peer's limit of connections gave
// a peer of kind who: no connection (c, err being Dial's result), and an
// error that names the limit as the likely cause.
func wantRefused(t *testing.T, who string, c *zmtp.Conn, err error) {
	t.Helper()
	if err == nil {
		c.Close()
		t.Errorf("a %s past the limit completed its handshake", who)
	} else if !strings.Contains(err.Error(), "limit of connections") {
		t.Errorf("a %s past the limit was told %q, which does not name the limit", who, err)
	}
}

// TestMaxPublishers: a listening subscriber limited to one publisher closes
// a second as soon as it connects, counts it as refused, and still
// delivers the first one's batches; a limit below one is refused.
func TestMaxPublishers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if s, err := NewSubscriber(ctx, "tcp://127.0.0.1:0", WithListen(), WithMaxPublishers(0)); err == nil {
		s.Close()
		t.Error("WithMaxPublishers(0) was accepted")
	}
	s, c, addr := listeningSubscriber(ctx, t, WithMaxPublishers(1))
	defer s.Close()
	first := hostilePub(ctx, t, addr) // handshake done and subscription read: it holds the one place
	second, err := zmtp.Dial(ctx, addr, "PUB", nil, zmtp.Limits{}, nil)
	wantRefused(t, "publisher", second, err)
	if st := waitStats(ctx, s.Stats, func(st Stats) bool { return st.Refused >= 1 }); st.Refused != 1 {
		t.Errorf("%d publishers refused, want the second one", st.Refused)
	}
	writeFirstBatch(t, first)
	c.wait(ctx, t, 1)
}

// TestFrozenSubscriber: a publisher drops a subscriber that sent a
// heartbeat and then went silent (neither reading nor writing, as a
// SIGSTOPped router) within the heartbeat timeout it was given, and counts
// it; the defaults' timeout would have kept it.
func TestFrozenSubscriber(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	if p, err := NewPublisher(ctx, "tcp://127.0.0.1:0", WithPublisherHeartbeat(time.Second, time.Second)); err == nil {
		p.Close()
		t.Error("a heartbeat interval as long as its timeout was accepted")
	}
	const timeout = 300 * time.Millisecond
	p, err := NewPublisher(ctx, "tcp://127.0.0.1:0", WithPublisherDirection(Bind), WithPublisherHeartbeat(50*time.Millisecond, timeout), WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	frozen := stuckSubscriber(ctx, t, "tcp://"+p.Addr().String())
	// The peer announced ZMTP 3.1, so it must answer PINGs; it sends one
	// of its own and then nothing more.
	if _, err := frozen.NetConn().Write(wirePing); err != nil {
		t.Fatal(err)
	}
	if err := p.pub.WaitSubscribers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// The drop is counted as it is decided, and the connection leaves
	// Subscribers a moment later, as it closes.
	st := waitStats(ctx, p.Stats, func(st PublisherStats) bool {
		return st.RefusedSubscribers >= 1 && len(st.Subscribers) == 0
	})
	if d := time.Since(start); st.RefusedSubscribers != 1 || d < timeout/2 {
		t.Errorf("%d dropped after %v, want 1 after about %v", st.RefusedSubscribers, d, timeout)
	}
	if len(st.Subscribers) != 0 {
		t.Errorf("%d subscribers still connected", len(st.Subscribers))
	}
}

// TestMaxPeersPerAddress: a publisher and a listening subscriber limited
// to one peer an address close a second from the same address once its
// handshake is done, and count it; a limit below one is refused.
func TestMaxPeersPerAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*testTimeout)
	defer cancel()
	if p, err := NewPublisher(ctx, "tcp://127.0.0.1:0", WithMaxSubscribersPerAddress(0)); err == nil {
		p.Close()
		t.Error("WithMaxSubscribersPerAddress(0) was accepted")
	}
	if s, err := NewSubscriber(ctx, "tcp://127.0.0.1:0", WithListen(), WithMaxPublishersPerAddress(0)); err == nil {
		s.Close()
		t.Error("WithMaxPublishersPerAddress(0) was accepted")
	}
	p, err := NewPublisher(ctx, "tcp://127.0.0.1:0", WithPublisherDirection(Bind), WithMaxSubscribersPerAddress(1), WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	stuckSubscriber(ctx, t, "tcp://"+p.Addr().String()) // holds its address's one place
	// Its subscription counts once its handshake has: before, the second
	// could finish first and take the place.
	if err := p.pub.WaitSubscribers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	second, err := zmtp.Dial(ctx, "tcp://"+p.Addr().String(), "SUB", nil, zmtp.Limits{}, nil)
	if err == nil {
		_, err = second.ReadMsg() // closed once its handshake is done
	}
	if err == nil {
		t.Error("a second subscriber from one address was kept")
	}
	if st := waitStats(ctx, p.Stats, func(st PublisherStats) bool { return st.RefusedSubscribers >= 1 }); st.RefusedSubscribers != 1 {
		t.Errorf("%d subscribers refused, want the second one", st.RefusedSubscribers)
	}
	s, _, addr := listeningSubscriber(ctx, t, WithMaxPublishersPerAddress(1))
	hostilePub(ctx, t, addr)
	pub, err := zmtp.Dial(ctx, addr, "PUB", nil, zmtp.Limits{}, nil)
	if err == nil {
		_, err = pub.ReadMsg()
	}
	if err == nil {
		t.Error("a second publisher from one address was kept")
	}
	if st := waitStats(ctx, s.Stats, func(st Stats) bool { return st.Refused >= 1 }); st.Refused != 1 {
		t.Errorf("%d publishers refused, want the second one", st.Refused)
	}
}

// TestIdleReplayClient: a replay client that connects and neither asks
// nor reads is closed within the replay deadline and counted as dropped,
// not as a failed request; it holds no place, nor Close, for longer.
func TestIdleReplayClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*testTimeout)
	defer cancel()
	p := sinkPublisher(ctx, t, WithReplay("tcp://127.0.0.1:0", 10), WithPublisherLogger(slog.New(slog.DiscardHandler)))
	d := dialReplay(ctx, t, p)
	d.SetDeadline(time.Now().Add(3 * DefaultReplayDeadline))
	if _, err := d.ReadMsg(); err == nil {
		t.Fatal("the publisher sent an idle replay client a message")
	}
	st := waitStats(ctx, p.Stats, func(st PublisherStats) bool { return st.ReplayClientsDropped >= 1 })
	if st.ReplayClientsDropped != 1 || st.ReplayFailures != 0 {
		t.Errorf("%d replay clients dropped, %d failures; want 1 and 0", st.ReplayClientsDropped, st.ReplayFailures)
	}
}
