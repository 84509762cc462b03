package zmtp

import (
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// Limits.Allow admits the peers whose source address is within it and
// closes the others as they are accepted, before a byte of the greeting
// is sent to them, counting and reporting each; a unix socket peer has no
// address and is admitted.
func TestAllow(t *testing.T) {
	noLeaks(t)
	v := make(violations, 8)
	lim := Limits{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("127.0.1.0/24")}}
	s := NewSub(SubOptions{Limits: lim, OnViolation: v.report})
	defer s.Close()
	if err := s.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	outside := dialFrom(t, s.Addr(), net.IPv4(127, 0, 0, 5))
	outside.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := io.Copy(io.Discard, outside.nc); n != 0 || err != nil {
		t.Fatalf("a peer outside the allowed addresses read %d bytes, then %v; want the connection closed before the greeting", n, err)
	}
	v.want(t, ErrNotAllowed)
	for _, ip := range []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(127, 0, 1, 9)} {
		inside := dialFrom(t, s.Addr(), ip)
		inside.hello("PUB", 1)
		if inside.closed(100 * time.Millisecond) {
			t.Fatalf("a peer from %v, within the allowed addresses, was closed", ip)
		}
	}
	v.none(t)
	if r := s.Refusals(); r.Disallowed != 1 || r.Peers != 0 || r.Handshakes != 0 {
		t.Errorf("refusals %+v, want one connection disallowed and nothing else", r)
	}

	// The same list on a unix socket: its peers have no address to match.
	ipc := NewServer(ServerOptions{Limits: lim, OnViolation: v.report}, func(c *Conn) { c.ReadMsg() })
	defer ipc.Close()
	path := "ipc://" + t.TempDir() + "/allow.sock"
	if err := ipc.Listen(path); err != nil {
		t.Fatal(err)
	}
	c, err := Dial(timeout(t, 3*time.Second), path, Dealer, nil, Limits{}, nil)
	if err != nil {
		t.Fatalf("a unix socket peer: %v", err)
	}
	c.Close()
	if r := ipc.Refusals(); r.Disallowed != 0 {
		t.Errorf("refusals %+v on a unix socket", r)
	}
}

// A peer refused by Allow learns as much as one refused by a connection
// limit: its dialer names the likely cause.
func TestAllowDialerError(t *testing.T) {
	noLeaks(t)
	srv := NewServer(ServerOptions{Limits: Limits{Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}, func(c *Conn) { c.ReadMsg() })
	defer srv.Close()
	if err := srv.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	_, err := Dial(timeout(t, 3*time.Second), "tcp://"+srv.Addr().String(), Dealer, nil, Limits{}, nil)
	if err == nil || !strings.Contains(err.Error(), "does not allow our address") {
		t.Fatalf("Dial: %v, want the connection closed before the greeting, and why it may be", err)
	}
	if r := srv.Refusals(); r.Disallowed != 1 {
		t.Errorf("refusals %+v", r)
	}
}
