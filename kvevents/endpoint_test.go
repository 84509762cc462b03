package kvevents

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestExplicitDirections links a publisher and a subscriber each way,
// whichever binds, on one interface: 127.0.0.1, then ::1, whose "::" once
// made a subscriber bind where it was told to connect.
func TestExplicitDirections(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	link := func(t *testing.T, pubBinds bool, host string) {
		var p *Publisher
		var s *Subscriber
		var err error
		if pubBinds {
			if p, err = NewPublisher(ctx, "tcp://"+net.JoinHostPort(host, "0"), WithPublisherDirection(Bind), WithLinger(0)); err != nil {
				t.Fatal(err)
			}
			if s, err = NewSubscriber(ctx, "tcp://"+p.Addr().String()); err != nil {
				t.Fatal(err)
			}
		} else {
			if s, err = NewSubscriber(ctx, "tcp://"+net.JoinHostPort(host, "0"), WithSubscriberDirection(Bind)); err != nil {
				t.Fatal(err)
			}
			if s.Addr() == nil {
				t.Fatal("the subscriber told to bind did not")
			}
			if p, err = NewPublisher(ctx, "tcp://"+s.Addr().String(), WithLinger(0)); err != nil {
				t.Fatal(err)
			}
			if p.Addr() != nil {
				t.Fatalf("the publisher bound %s, where the rule says connect", p.Addr())
			}
		}
		defer p.Close()
		c := runSubscriber(ctx, t, s, nil)
		waitSubscribed(ctx, t, p.pub)
		if _, err := p.Publish(&EventBatch{Events: []Event{&AllBlocksCleared{}}}); err != nil {
			t.Fatal(err)
		}
		c.wait(ctx, t, 1)
		if st := p.Stats(); st.Connected != 1 || p.DialError() != nil {
			t.Errorf("stats %+v, dial error %v; want one connection and no error", st, p.DialError())
		}
	}
	for _, host := range []string{"127.0.0.1", "::1"} {
		if ln, err := net.Listen("tcp", net.JoinHostPort(host, "0")); err != nil {
			t.Logf("%s: %v: skipped", host, err)
			continue
		} else {
			ln.Close()
		}
		t.Run(host+"/publisher binds", func(t *testing.T) { link(t, true, host) })
		t.Run(host+"/subscriber binds", func(t *testing.T) { link(t, false, host) })
	}
}

// TestDirectionErrors: a wildcard cannot be connected to, an unknown
// direction is refused, two sides that both connect get an error that
// says which must bind, and a publisher that connects to a host that does
// not resolve says so and counts no subscriber.
func TestDirectionErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), firstDialWait+testTimeout)
	defer cancel()
	if s, err := NewSubscriber(ctx, "tcp://*:5557", WithSubscriberDirection(Connect)); err == nil || !strings.Contains(err.Error(), "wildcard") {
		if s != nil {
			s.Close()
		}
		t.Errorf("a subscriber connecting to a wildcard: %v", err)
	}
	if p, err := NewPublisher(ctx, "tcp://[::]:5557", WithPublisherDirection(Connect)); err == nil {
		p.Close()
		t.Error("a publisher connected to a wildcard")
	}
	if _, err := NewPublisher(ctx, "tcp://127.0.0.1:1", WithPublisherDirection(Direction(7))); err == nil {
		t.Error("an unknown direction was accepted")
	}
	if _, err := NewSubscriber(ctx, "tcp://127.0.0.1:1", WithSubscriberDirection(Direction(-1))); err == nil {
		t.Error("an unknown direction was accepted")
	}

	// Both connect: nothing binds the port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := "tcp://" + ln.Addr().String()
	ln.Close()
	p, err := NewPublisher(ctx, free, WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s, err := NewSubscriber(ctx, free)
	if err == nil {
		s.Close()
		t.Fatal("two sockets that connect found each other")
	}
	if msg := err.Error(); !strings.Contains(msg, "needs a publisher that binds") || !strings.Contains(msg, "refused") {
		t.Errorf("the error does not say that one side must bind: %v", err)
	}
	if err := p.DialError(); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("publisher's DialError %v, want the refused connection", err)
	}

	q, err := NewPublisher(ctx, "tcp://nosuchhost.invalid:5557", WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for q.DialError() == nil && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if err := q.DialError(); err == nil || !strings.Contains(err.Error(), "nosuchhost.invalid") || q.Stats().Connected != 0 {
		t.Errorf("DialError %v, stats %+v; want the failed lookup, no subscriber", err, q.Stats())
	}
}

// plainPeer plays libzmq with the PLAIN mechanism on nc, as libzmq 4.3
// does: its signature at once, the rest of its greeting once it has the
// peer's signature and major version, and a close as soon as it reads
// another mechanism, which may be before it sent its own.
func plainPeer(nc net.Conn) {
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(testTimeout))
	g := wireHello("PLAIN")[:64]
	g[11] = 1
	if _, err := nc.Write(g[:10]); err != nil {
		return
	}
	peer := make([]byte, 64)
	if _, err := io.ReadFull(nc, peer[:11]); err != nil {
		return
	}
	// libzmq handles what it has read in one go: a mechanism that came
	// with the signature ends the connection before its own is sent.
	nc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, _ := nc.Read(peer[11:]); n > 0 {
		return
	}
	nc.SetDeadline(time.Now().Add(testTimeout))
	if _, err := nc.Write(g[10:]); err != nil {
		return
	}
	io.ReadFull(nc, peer[11:])
}

// TestMechanismMismatchNamed: a peer that speaks PLAIN (or CURVE) is
// refused, and the error on each side names its mechanism: the
// subscriber's error, and the publisher's log and count.
func TestMechanismMismatchNamed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), firstDialWait+testTimeout)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go plainPeer(nc)
		}
	}()
	s, err := NewSubscriber(ctx, "tcp://"+ln.Addr().String())
	if err == nil {
		s.Close()
		t.Fatal("a subscriber connected to a PLAIN publisher")
	}
	if !strings.Contains(err.Error(), `"PLAIN"`) || strings.Contains(err.Error(), "binds") {
		t.Errorf("the subscriber's error %q does not name the mechanism, or blames the endpoint", err)
	}

	var logs bytes.Buffer
	var logMu sync.Mutex
	p, err := NewPublisher(ctx, "tcp://127.0.0.1:0", WithPublisherDirection(Bind), WithLinger(0),
		WithPublisherLogger(slog.New(slog.NewTextHandler(&lockedWriter{&logs, &logMu}, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	nc, err := net.Dial("tcp", p.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	plainPeer(nc)
	logged := func() string { // the count comes first, the log line after it
		logMu.Lock()
		defer logMu.Unlock()
		return logs.String()
	}
	for logged() == "" && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	if got := logged(); !strings.Contains(got, `PLAIN`) || p.Stats().RefusedSubscribers != 1 {
		t.Errorf("the publisher's log %q does not name the mechanism, or refused %d subscribers, not 1", got, p.Stats().RefusedSubscribers)
	}
}
