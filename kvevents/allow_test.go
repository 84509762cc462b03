package kvevents

import (
	"context"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// loopback127_1 admits 127.0.0.1 alone, where the tests' own peers come
// from; a peer dialed from 127.0.0.5 is outside it.
var loopback127_1 = netip.MustParsePrefix("127.0.0.1/32")

// closedUnheard dials addr from 127.0.0.5 and checks that the socket
// closes the connection without sending a byte: refused before its
// greeting.
func closedUnheard(t *testing.T, addr net.Addr) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 5)}, Timeout: 2 * time.Second}
	nc, err := d.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := io.Copy(io.Discard, nc); n != 0 || err != nil {
		t.Fatalf("a peer from 127.0.0.5 read %d bytes from %v, then %v; want the connection closed unheard", n, addr, err)
	}
}

// TestPublisherAllow: a publisher that allows 127.0.0.1/32 closes a
// subscriber and a replay client from 127.0.0.5 unheard and counts them,
// while a subscriber from 127.0.0.1 gets its batches by both ways.
func TestPublisherAllow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p, err := NewPublisher(ctx, "tcp://127.0.0.1:0", WithPublisherDirection(Bind), WithReplay("tcp://127.0.0.1:0", 10),
		WithPublisherAllow(loopback127_1), WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	closedUnheard(t, p.Addr())
	closedUnheard(t, p.ReplayAddr())
	st := waitStats(ctx, p.Stats, func(st PublisherStats) bool { return st.RefusedSubscribers >= 1 && st.ReplayClientsDropped >= 1 })
	if st.RefusedSubscribers != 1 || st.ReplayClientsDropped != 1 || st.ReplayFailures != 0 {
		t.Errorf("refused %d subscribers, dropped %d replay clients, %d replay failures; want 1, 1 and 0", st.RefusedSubscribers, st.ReplayClientsDropped, st.ReplayFailures)
	}
	if _, err := p.Publish(&EventBatch{Events: []Event{&AllBlocksCleared{}}}); err != nil {
		t.Fatal(err)
	}
	s, err := NewSubscriber(ctx, "tcp://"+p.Addr().String(), WithReplayEndpoint("tcp://"+p.ReplayAddr().String(), DefaultReplayTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := runSubscriber(ctx, t, s, nil)
	c.wait(ctx, t, 1) // by replay: it was published before the subscriber came
	publishToOne(ctx, t, p)
	c.wait(ctx, t, 2)
}

// TestSubscriberAllow: a listening subscriber that allows 127.0.0.1/32
// closes a publisher from 127.0.0.5 unheard and counts it as refused.
func TestSubscriberAllow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s, c, addr := listeningSubscriber(ctx, t, WithSubscriberAllow(loopback127_1))
	defer s.Close()
	closedUnheard(t, s.Addr())
	if st := waitStats(ctx, s.Stats, func(st Stats) bool { return st.Refused >= 1 }); st.Refused != 1 || st.Malformed != 0 {
		t.Errorf("%d refused, %d malformed; want the publisher from 127.0.0.5 refused", st.Refused, st.Malformed)
	}
	first := hostilePub(ctx, t, addr)
	writeFirstBatch(t, first)
	c.wait(ctx, t, 1)
}

// The allow options refuse a prefix that is not one, and a socket they
// could not apply to: one that binds nothing.
func TestAllowRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	checkRefused(t, []refusedCase{
		{"invalid publisher prefix", func() (func() error, error) {
			p, err := NewPublisher(ctx, "tcp://127.0.0.1:0", WithPublisherAllow(netip.Prefix{}))
			return closer(p), err
		}, "not a valid IP prefix"},
		{"invalid subscriber prefix", func() (func() error, error) {
			s, err := NewSubscriber(ctx, "tcp://127.0.0.1:0", WithListen(), WithSubscriberAllow(netip.Prefix{}))
			return closer(s), err
		}, "not a valid IP prefix"},
		{"a publisher that binds nothing", func() (func() error, error) {
			p, err := NewPublisher(ctx, "tcp://127.0.0.1:1", WithPublisherDirection(Connect), WithPublisherAllow(loopback127_1))
			return closer(p), err
		}, "binds none"},
		{"a subscriber that connects", func() (func() error, error) {
			s, err := NewSubscriber(ctx, "tcp://127.0.0.1:1", WithSubscriberAllow(loopback127_1))
			return closer(s), err
		}, "this one connects"},
	})
}

// closer returns x's Close, or nil.
func closer[T interface{ Close() error }](x T) func() error {
	return x.Close
}

// refusedCase is a socket that options should refuse: open makes it and
// returns its Close, and the error must say want.
type refusedCase struct {
	name string
	open func() (func() error, error)
	want string
}

// checkRefused checks that each case's open fails saying its want, and
// closes what one that does not fail made.
func checkRefused(t *testing.T, cases []refusedCase) {
	t.Helper()
	for _, tc := range cases {
		closeIt, err := tc.open()
		if err == nil {
			closeIt()
			t.Errorf("%s: accepted", tc.name)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.want)
		}
	}
}
