package kvevents

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
)

// newCurveKey returns a fresh secret key.
func newCurveKey(t *testing.T) CurveKey {
	t.Helper()
	var k CurveKey
	if _, err := rand.Read(k[:]); err != nil {
		t.Fatal(err)
	}
	return k
}

// A key file: one Z85 key a line, blank lines and comments passed over;
// anything else refused by its line number, and so is a file without a
// key.
func TestReadCurveKeys(t *testing.T) {
	a, b := newCurveKey(t).Public(), newCurveKey(t).Public()
	keys, err := ReadCurveKeys(strings.NewReader("# the routers\n\n  " + a.Z85() + "  \n" + b.Z85() + "\n"))
	if err != nil || len(keys) != 2 || keys[0] != a || keys[1] != b {
		t.Fatalf("got %v, %v; want the two keys", keys, err)
	}
	for _, bad := range []string{"", "# nothing\n", a.Z85() + "\nnot a key\n", a.Z85()[:39] + "\n", `public-key = "` + a.Z85() + `"`} {
		if keys, err := ReadCurveKeys(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: read %v", bad, keys)
		} else if strings.Contains(bad, "not a key") && !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%q: %v, want the line named", bad, err)
		}
	}
	if k, err := ParseCurveKey(a.Z85()); err != nil || k != a {
		t.Errorf("ParseCurveKey(Z85): %v, %v", k, err)
	}
}

// A publisher and a subscriber over CURVE, the publisher binding (with a
// replay socket, which a late subscriber catches up on, over CURVE too)
// and then the subscriber binding; a subscriber whose key the publisher
// does not admit gets nothing, and is told why.
func TestCurvePublisherSubscriber(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	pubKey, subKey, stranger := newCurveKey(t), newCurveKey(t), newCurveKey(t)
	p, err := NewPublisher(ctx, "tcp://127.0.0.1:0", WithPublisherDirection(Bind), WithReplay("tcp://127.0.0.1:0", 10), WithLinger(0),
		WithPublisherCurve(Curve{Secret: pubKey, Clients: []CurveKey{subKey.Public()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Publish(&EventBatch{Events: []Event{&AllBlocksCleared{}}}); err != nil {
		t.Fatal(err)
	}
	addr, replay := "tcp://"+p.Addr().String(), "tcp://"+p.ReplayAddr().String()

	if s, err := NewSubscriber(ctx, addr, WithSubscriberCurve(Curve{Secret: stranger, Server: pubKey.Public()})); err == nil {
		s.Close()
		t.Error("a subscriber whose key is not admitted connected")
	} else if !strings.Contains(err.Error(), "does not admit our public key") {
		t.Errorf("a subscriber whose key is not admitted was told %v", err)
	}
	if st := p.Stats(); st.RefusedSubscribers == 0 {
		t.Errorf("stats %+v, want the stranger refused", st)
	}

	s, err := NewSubscriber(ctx, addr, WithReplayEndpoint(replay, DefaultReplayTimeout), WithSubscriberCurve(Curve{Secret: subKey, Server: pubKey.Public()}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := runSubscriber(ctx, t, s, nil)
	c.wait(ctx, t, 1) // by replay, over CURVE
	publishToOne(ctx, t, p)
	c.wait(ctx, t, 2)
	if st := s.Stats(); st.Replayed != 1 || st.Missed != 0 {
		t.Errorf("subscriber stats %+v, want one batch replayed, none missed", st)
	}

	// The other way: the subscriber binds, the CURVE server; the
	// publisher connects, its client.
	ls, lc, laddr := listeningSubscriber(ctx, t, WithSubscriberCurve(Curve{Secret: subKey, Clients: []CurveKey{pubKey.Public()}}))
	defer ls.Close()
	lp, err := NewPublisher(ctx, laddr, WithPublisherDirection(Connect), WithLinger(0), WithPublisherCurve(Curve{Secret: pubKey, Server: subKey.Public()}))
	if err != nil {
		t.Fatal(err)
	}
	defer lp.Close()
	publishToOne(ctx, t, lp)
	lc.wait(ctx, t, 1)
}

// The CURVE options refuse what could not work: no secret key, a socket
// that connects without a server key, a server key or client keys that no
// socket would use.
func TestCurveRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	k := newCurveKey(t)
	checkRefused(t, []refusedCase{
		{"no secret", func() (func() error, error) {
			p, err := NewPublisher(ctx, "tcp://127.0.0.1:0", WithPublisherCurve(Curve{}))
			return closer(p), err
		}, "no secret key"},
		{"a publisher that connects without a server key", func() (func() error, error) {
			p, err := NewPublisher(ctx, "tcp://127.0.0.1:1", WithPublisherDirection(Connect), WithPublisherCurve(Curve{Secret: k}))
			return closer(p), err
		}, "no server key"},
		{"a subscriber that binds given a server key", func() (func() error, error) {
			s, err := NewSubscriber(ctx, "tcp://127.0.0.1:0", WithListen(), WithSubscriberCurve(Curve{Secret: k, Server: k.Public()}))
			return closer(s), err
		}, "no socket connects"},
		{"a subscriber that connects given client keys", func() (func() error, error) {
			s, err := NewSubscriber(ctx, "tcp://127.0.0.1:1", WithSubscriberCurve(Curve{Secret: k, Server: k.Public(), Clients: []CurveKey{k}}))
			return closer(s), err
		}, "no socket binds"},
	})
}
