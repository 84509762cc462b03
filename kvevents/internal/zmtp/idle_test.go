package zmtp

import (
	"encoding/binary"
	"net"
	"testing"
	"time"
)

// Idle peers are closed on every socket, each by the rule that fits it:
// a Pub's subscriber of ZMTP 3.0 that never subscribes, by the quiet time
// (one with a subscription is kept: it has nothing more to say); a peer
// of ZMTP 3.1 that never answers a PING, by the heartbeat timeout from the
// start (one that answers is kept); a listening Sub's publisher of ZMTP
// 3.0 that sends nothing, by the quiet time; a Server's client that never
// asks, by the quiet time.
func TestIdlePeersClosed(t *testing.T) {
	noLeaks(t)
	lim := Limits{IdleTimeout: 300 * time.Millisecond}
	hb := Heartbeat{Interval: 50 * time.Millisecond, Timeout: 300 * time.Millisecond}
	p := NewPub(PubOptions{Limits: lim, Heartbeat: hb})
	defer p.Close(0)
	s := NewSub(SubOptions{Limits: lim, Heartbeat: hb})
	defer s.Close()
	srv := NewServer(ServerOptions{Limits: lim}, func(c *Conn) { c.ReadMsg() })
	defer srv.Close()
	for _, listen := range []func(string) error{p.Listen, s.Listen, srv.Listen} {
		if err := listen("tcp://127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	subscribe := func(r *raw) { r.write(rawMsg([]byte{1})) }
	for _, tc := range []struct {
		name      string
		addr      net.Addr
		typ       string
		minor     byte
		subscribe bool
		answers   bool // PONG to every PING
		closed    bool
	}{
		{"a Pub's subscriber of ZMTP 3.0 that never subscribes", p.Addr(), "SUB", 0, false, false, true},
		{"a Pub's subscriber of ZMTP 3.0 with a subscription", p.Addr(), "SUB", 0, true, false, false},
		{"a Pub's subscriber of ZMTP 3.1 that never answers a PING", p.Addr(), "SUB", 1, true, false, true},
		{"a Pub's subscriber of ZMTP 3.1 that answers", p.Addr(), "SUB", 1, true, true, false},
		{"a Sub's publisher of ZMTP 3.0 that sends nothing", s.Addr(), "PUB", 0, false, false, true},
		{"a Sub's publisher of ZMTP 3.1 that answers", s.Addr(), "PUB", 1, false, true, false},
		{"a Server's client that never asks", srv.Addr(), "DEALER", 1, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, tc.addr)
			r.hello(tc.typ, tc.minor)
			if tc.subscribe {
				subscribe(r)
			}
			if !tc.answers {
				wait := 5 * lim.IdleTimeout // for one kept: a generous wait for what would close it
				if tc.closed {
					wait = 10 * time.Second
				}
				if got := r.closed(wait); got != tc.closed {
					t.Errorf("closed %v, want %v", got, tc.closed)
				}
				return
			}
			closed := make(chan struct{})
			go func() {
				defer close(closed)
				for {
					r.c.SetDeadline(time.Now().Add(10 * time.Second))
					_, cmd, data, err := r.c.next()
					if err != nil {
						return
					}
					if cmd == "PING" {
						r.nc.Write(command("PONG", data[2:]))
					}
				}
			}()
			select {
			case <-closed:
				t.Error("closed")
			case <-time.After(5 * lim.IdleTimeout):
			}
			r.nc.Close()
			<-closed
		})
	}
	if r := p.Refusals(); r.Silent != 2 {
		t.Errorf("the Pub's refusals %+v, want two silent peers", r)
	}
}

// A peer's PING carries its TTL: a peer silent past it is closed, though
// our own heartbeat timeout is longer (RFC 37).
func TestPeerTTLHonoured(t *testing.T) {
	noLeaks(t)
	s := NewSub(SubOptions{Heartbeat: Heartbeat{Interval: time.Hour, Timeout: 2 * time.Hour}})
	defer s.Close()
	if err := s.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, s.Addr())
	r.hello("PUB", 1)
	r.write(command("PING", binary.BigEndian.AppendUint16(nil, 3))) // a TTL of 0.3 s
	if !r.closed(10 * time.Second) {
		t.Fatal("a peer silent past its own TTL was kept")
	}
	if got := s.Refusals().Silent; got != 1 {
		t.Errorf("%d silent peers, want 1", got)
	}
}

// A peer that floods PINGs and never reads cannot hold its connection's
// writer, nor so its reader: a PONG not taken within FrameTimeout closes
// the connection.
func TestPingFloodClosed(t *testing.T) {
	noLeaks(t)
	p := NewPub(PubOptions{Limits: Limits{FrameTimeout: 300 * time.Millisecond}})
	t.Cleanup(func() { p.Close(0) })
	if err := p.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, p.Addr())
	// Small send buffers on both sides, so that our writes block soon and
	// the flood is paced by what our side takes. A peer whose receive
	// buffer is made tiny instead, or that sends faster than our reader
	// takes, makes the kernel drop segments; TCP then retransmits with a
	// backoff that can leave our reader hearing nothing for IdleTimeout,
	// and the peer is closed as silent, not as stalled.
	r.nc.(*net.TCPConn).SetWriteBuffer(16 << 10)
	r.hello("SUB", 1)
	for wait := time.Now().Add(10 * time.Second); p.Stats().Connected == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatal("the subscriber never joined")
		}
	}
	p.mu.Lock()
	for pp := range p.peers {
		pp.c.nc.(*net.TCPConn).SetWriteBuffer(16 << 10)
	}
	p.mu.Unlock()
	ping := command("PING", append([]byte{0, 0}, make([]byte, 16)...))
	var flood []byte
	for range 100 {
		flood = append(flood, ping...)
	}
	// PINGs until our side closes the connection, or the test does. With
	// no write deadline, so that no PING is cut short.
	flooding := make(chan struct{})
	go func() {
		defer close(flooding)
		for {
			if _, err := r.nc.Write(flood); err != nil {
				return
			}
		}
	}()
	defer func() { r.nc.Close(); <-flooding }()
	// Not read from here: reading the PONGs would free the writer.
	for wait := time.Now().Add(30 * time.Second); p.Stats().Disconnected == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatalf("a peer that floods PINGs and never reads was kept: %+v", p.Refusals())
		}
	}
	if got := p.Refusals(); got.Stalled != 1 {
		t.Errorf("%d stalled, want 1: %+v", got.Stalled, got)
	}
}

// MaxPeersPerSource bounds the peers of one address past their handshake:
// a further one from it is closed, one from another address comes in.
func TestPeersPerSource(t *testing.T) {
	noLeaks(t)
	v := make(violations, 8)
	s := NewSub(SubOptions{Limits: Limits{MaxPeersPerSource: 2}, OnViolation: v.report})
	defer s.Close()
	if err := s.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	a := net.IPv4(127, 0, 0, 5)
	for range 2 {
		dialFrom(t, s.Addr(), a).hello("PUB", 0)
	}
	waitPeers(t, s.s, 2)
	third := dialFrom(t, s.Addr(), a)
	third.hello("PUB", 0)
	if !third.closed(10 * time.Second) {
		t.Fatal("a third peer from one address was kept")
	}
	v.want(t, ErrTooManyPeers)
	other := dialFrom(t, s.Addr(), net.IPv4(127, 0, 0, 6))
	other.hello("PUB", 0)
	if other.closed(200 * time.Millisecond) {
		t.Fatal("a peer from another address was closed")
	}
	if r := s.Refusals(); r.Peers != 1 || r.PeersPerSource != 1 {
		t.Errorf("refusals %+v, want one peer refused for its address", r)
	}
}
