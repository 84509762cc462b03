package zmtp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// dialFrom connects to addr from the loopback address ip, so that a test
// can play peers on other machines.
func dialFrom(t *testing.T, addr net.Addr, ip net.IP) *raw {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 2 * time.Second}
	nc, err := d.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &raw{t: t, nc: nc, c: newConn(nc, Limits{}.withDefaults(), nil, "raw")}
}

// slowHandshakes runs n connections to addr from sources addresses
// (127.0.0.2 and up), each sending a greeting a byte a second and
// connecting again pause after it is closed, until ctx is done.
func slowHandshakes(ctx context.Context, addr string, n, sources int, pause time.Duration) *sync.WaitGroup {
	var wg sync.WaitGroup
	g := rawGreeting(0)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%sources))}, Timeout: time.Second}
			buf := make([]byte, 128)
			for ctx.Err() == nil {
				if nc, err := d.DialContext(ctx, "tcp", addr); err == nil {
					for j := 0; ctx.Err() == nil; j++ {
						if _, err := nc.Write(g[j%len(g) : j%len(g)+1]); err != nil {
							break
						}
						nc.SetReadDeadline(time.Now().Add(time.Second))
						if _, err := nc.Read(buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
							break // closed by our side
						}
					}
					nc.Close()
				}
				select {
				case <-ctx.Done():
				case <-time.After(pause):
				}
			}
		}()
	}
	return &wg
}

// libzmqPython returns a python3 that imports zmq, or "".
func libzmqPython() string {
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if path, err := exec.LookPath(py); err == nil && exec.Command(path, "-c", "import zmq").Run() == nil {
			return path
		}
	}
	return ""
}

// runPython runs a script of testdata with a python3 that imports zmq,
// and returns the channel of its end; nil, and a note in the log, if
// there is no such python3.
func runPython(ctx context.Context, t *testing.T, script string, args ...string) <-chan error {
	t.Helper()
	py := libzmqPython()
	if py == "" {
		t.Log("no python3 imports zmq (Debian: python3-zmq): our own peer alone plays the legitimate one")
		return nil
	}
	cmd := exec.CommandContext(ctx, py, append([]string{filepath.Join("testdata", script)}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		if err != nil {
			err = fmt.Errorf("%s: %w: %s", script, err, stderr.Bytes())
		}
		done <- err
	}()
	return done
}

// attacked starts slowHandshakes on addr (300 connections from ten
// addresses, reconnecting 5 ms after they are closed) and waits until
// they fill the handshake slots of the socket whose refusals are given.
func attacked(ctx context.Context, t *testing.T, addr string, refusals func() Refusals) (stop func()) {
	t.Helper()
	attack, cancel := context.WithCancel(ctx)
	wg := slowHandshakes(attack, addr, 300, 10, 5*time.Millisecond)
	stop = func() { cancel(); wg.Wait() }
	for refusals().Handshakes == 0 {
		select {
		case <-ctx.Done():
			stop()
			t.Fatalf("the attack never filled the handshake slots: %+v", refusals())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return stop
}

// 300 connections that send their greeting a byte a second, reconnecting
// 5 ms after they are closed, from ten addresses other than the
// legitimate peers', keep every handshake slot taken (without the rule
// that lets a quieter address in, no legitimate peer gets one): a libzmq
// publisher (pyzmq, when installed) and one of ours, both on 127.0.0.1,
// still get every message into a listening Sub, and the refusals are
// counted by limit and reported.
func TestSlowHandshakeFlood(t *testing.T) {
	noLeaks(t)
	var violated atomic.Int64
	s := NewSub(SubOptions{HandshakeTimeout: time.Second, OnViolation: func(error) { violated.Add(1) }})
	defer s.Close()
	if err := s.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s.Subscribe("")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	stop := attacked(ctx, t, s.Addr().String(), s.Refusals)
	defer stop()

	const n = 300
	endpoint := "tcp://" + s.Addr().String()
	want := map[string]int{"kv@go": n}
	pyDone := runPython(ctx, t, "xpub.py", endpoint, fmt.Sprint(n))
	if pyDone != nil {
		want["kv@libzmq"] = n
	}
	p := NewPub(PubOptions{})
	defer p.Close(time.Second)
	if err := p.Dial(endpoint); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitSubscribers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := p.Send([][]byte{[]byte("kv@go"), seq(i), []byte("p")}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int{}
	for got["kv@go"] < want["kv@go"] || got["kv@libzmq"] < want["kv@libzmq"] {
		m, err := s.Recv(ctx)
		if err != nil {
			t.Fatalf("received %v of %v: %v; refusals %+v", got, want, err, s.Refusals())
		}
		topic := string(m[0])
		if i := int(binary.BigEndian.Uint64(m[1])); i != got[topic] {
			t.Fatalf("%s: message %d, want %d", topic, i, got[topic])
		}
		got[topic]++
	}
	if pyDone != nil {
		if err := <-pyDone; err != nil {
			t.Fatalf("the libzmq publisher: %v", err)
		}
	}
	stop()
	s.Close() // every refusal reported
	r := s.Refusals()
	t.Logf("received %v; refusals %+v; %d reported", got, r, violated.Load())
	if r.Peers != 0 {
		t.Errorf("refusals %+v: want no peer refused", r)
	}
	if sum := r.PerSource + r.Handshakes + r.Timeouts; violated.Load() < sum {
		t.Errorf("%d refusals counted, %d reported", sum, violated.Load())
	}
}

// Silent handshakes from one address take at most MaxHandshakesPerSource
// slots; another address still gets one, and when all MaxHandshakes are
// taken, a new address takes the place of the oldest of the address that
// holds most.
func TestHandshakesPerSource(t *testing.T) {
	noLeaks(t)
	v := make(violations, 8)
	s := NewSub(SubOptions{Limits: Limits{MaxHandshakes: 3, MaxHandshakesPerSource: 2}, OnViolation: v.report})
	defer s.Close()
	if err := s.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	a := net.IPv4(127, 0, 0, 5)
	a1, a2, a3 := dialFrom(t, s.Addr(), a), dialFrom(t, s.Addr(), a), dialFrom(t, s.Addr(), a)
	if !a3.closed(time.Second) {
		t.Fatal("a third handshake from one address was kept")
	}
	v.want(t, ErrTooManyPeers)
	b := dialFrom(t, s.Addr(), net.IPv4(127, 0, 0, 6)) // the third slot
	c := dialFrom(t, s.Addr(), net.IPv4(127, 0, 0, 7)) // takes a1's
	if !a1.closed(time.Second) {
		t.Fatal("the busiest address kept its oldest handshake")
	}
	v.want(t, ErrTooManyPeers)
	c.hello("PUB", 0)
	for _, r := range []*raw{a2, b} {
		if r.closed(100 * time.Millisecond) {
			t.Fatal("a handshake was closed that should have been kept")
		}
	}
	if r := s.Refusals(); r.PerSource != 1 || r.Handshakes != 1 {
		t.Errorf("refusals %+v, want one per source and one handshake", r)
	}
}

// 256 publishers each send the start of a 16 MiB frame and stop: the
// bytes reserved for messages being read never pass Limits.ReadBytes,
// each stalled message is closed after FrameTimeout, and a healthy
// publisher's message arrives.
func TestReadBudget(t *testing.T) {
	noLeaks(t)
	const budget, peers, sent = 4 << 20, 256, 256 << 10
	s := NewSub(SubOptions{Limits: Limits{Frames: []int{64, 8, 16 << 20}, MaxFrames: 3, ReadBytes: budget, FrameTimeout: 500 * time.Millisecond}})
	defer s.Close()
	if err := s.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s.Subscribe("")
	var most atomic.Int64
	watch, stop := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watch.Err() == nil {
			if n := s.ReadBytes(); n > most.Load() {
				most.Store(n)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	start := binary.BigEndian.AppendUint64(append(rawMsg([]byte("t"), seq(0))[:0:0], 1, 1, 't', 1, 8), 0)
	start = append(start, 0x02)
	start = binary.BigEndian.AppendUint64(start, 16<<20)
	start = append(start, make([]byte, sent)...)
	var wg sync.WaitGroup
	for i := range peers {
		r := dialFrom(t, s.Addr(), net.IPv4(127, 0, 1, byte(i)))
		r.hello("PUB", 0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
			r.nc.Write(start) // may not all fit while the Sub waits for room
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Refusals().Stalled < peers {
		if time.Now().After(deadline) {
			t.Fatalf("stalled messages closed: %d of %d", s.Refusals().Stalled, peers)
		}
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	stop()
	<-watched
	if most.Load() > budget || most.Load() == 0 {
		t.Errorf("at most %d bytes reserved, budget %d", most.Load(), budget)
	}
	t.Logf("at most %d bytes reserved for %d partial frames; %+v", most.Load(), peers, s.Refusals())
	ctx := timeout(t, 5*time.Second)
	p := pubDialing(ctx, t, s)
	defer p.Close(time.Second)
	if err := p.Send([][]byte{[]byte("kv"), seq(1), make([]byte, 1<<20)}); err != nil {
		t.Fatal(err)
	}
	if m, err := s.Recv(ctx); err != nil || len(m[2]) != 1<<20 {
		t.Fatalf("the healthy message: %v", err)
	}
	if n := s.ReadBytes(); n != 0 {
		t.Errorf("%d bytes still reserved", n)
	}
}

// frozen plays a peer that answers one PING with a PONG and then neither
// reads nor writes, as a SIGSTOPped process: its connection stays open.
func (r *raw) frozen() {
	r.t.Helper()
	for {
		if _, cmd, data := r.read(); cmd == "PING" {
			r.write(command("PONG", data[2:]))
			return
		}
	}
}

// A Sub drops a publisher that answered heartbeats and then froze, and
// connects again; a publisher that never answers one (ZMTP 3.0) is kept.
func TestHeartbeatFrozenPublisher(t *testing.T) {
	noLeaks(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *raw, 2)
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { nc.Close() })
			accepted <- &raw{t: t, nc: nc, c: newConn(nc, Limits{}.withDefaults(), nil, "raw")}
		}
	}()
	hb := Heartbeat{Interval: 50 * time.Millisecond, Timeout: 300 * time.Millisecond}
	s := NewSub(SubOptions{Heartbeat: hb})
	defer s.Close()
	s.Subscribe("")
	next := func() *raw {
		select {
		case r := <-accepted:
			return r
		case <-time.After(3 * time.Second):
			t.Fatal("the Sub did not connect")
			return nil
		}
	}
	go s.Dial("tcp://" + l.Addr().String())
	first := next()
	first.hello("PUB", 1)
	first.frozen()
	start := time.Now()
	second := next()
	if d := time.Since(start); d < hb.Timeout/2 || s.Refusals().Silent != 1 {
		t.Errorf("reconnected after %v, %+v", d, s.Refusals())
	}
	second.hello("PUB", 1)
	if !first.closed(time.Second) {
		t.Error("the frozen publisher's connection is still open")
	}
	// The second never answers a PING: it is not held to heartbeats.
	if second.closed(4 * hb.Timeout) {
		t.Error("a publisher that does not speak heartbeats was dropped")
	}
}

// A Pub drops a subscriber that answered heartbeats and then froze, even
// while its writer is blocked on that subscriber.
func TestHeartbeatFrozenSubscriber(t *testing.T) {
	noLeaks(t)
	p := NewPub(PubOptions{Heartbeat: Heartbeat{Interval: 50 * time.Millisecond, Timeout: 300 * time.Millisecond}})
	defer p.Close(0)
	if err := p.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, p.Addr())
	r.nc.(*net.TCPConn).SetReadBuffer(4096)
	r.hello("SUB", 1)
	r.write(rawMsg([]byte{1}))
	r.frozen()
	for range 1000 { // enough to block the writer
		p.Send([][]byte{[]byte("kv"), make([]byte, 4096)})
	}
	deadline := time.Now().Add(3 * time.Second)
	for p.Stats().Disconnected != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the frozen subscriber was kept: %+v, %+v", p.Stats(), p.Refusals())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if p.Refusals().Silent != 1 {
		t.Errorf("refusals %+v, want one silent peer", p.Refusals())
	}
}

// A frame larger than the whole read budget is read when it is alone.
func TestReadBudgetLargeFrame(t *testing.T) {
	noLeaks(t)
	s := NewSub(SubOptions{Limits: Limits{Frames: []int{8 << 20}, ReadBytes: 1 << 20, FrameTimeout: time.Second}})
	defer s.Close()
	if err := s.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s.Subscribe("")
	ctx := timeout(t, 5*time.Second)
	p := pubDialing(ctx, t, s)
	defer p.Close(time.Second)
	if err := p.Send([][]byte{make([]byte, 8<<20)}); err != nil {
		t.Fatal(err)
	}
	if m, err := s.Recv(ctx); err != nil || len(m[0]) != 8<<20 {
		t.Fatalf("the large frame: %v", err)
	}
}

// A ZMTP 3.0 peer is sent no PING: go-zeromq/zmq4, for one, would hand
// it to its reader as a message.
func TestNoPingToZMTP30(t *testing.T) {
	noLeaks(t)
	p := NewPub(PubOptions{Heartbeat: Heartbeat{Interval: 10 * time.Millisecond, Timeout: time.Second}})
	defer p.Close(0)
	if err := p.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, p.Addr())
	r.hello("SUB", 0)
	r.write(rawMsg([]byte{1}))
	if err := p.WaitSubscribers(timeout(t, 2*time.Second), 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // ten intervals
	if err := p.Send([][]byte{[]byte("kv")}); err != nil {
		t.Fatal(err)
	}
	if m, cmd, _ := r.read(); cmd != "" || string(m[0]) != "kv" {
		t.Fatalf("got command %q, message %q; want the message alone", cmd, m)
	}
}

// The same flood at a listening Pub: a libzmq subscriber (pyzmq, when
// installed) and one of ours, both on 127.0.0.1, get every message.
func TestSlowHandshakeFloodPub(t *testing.T) {
	noLeaks(t)
	p := NewPub(PubOptions{HandshakeTimeout: time.Second})
	defer p.Close(0)
	if err := p.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	stop := attacked(ctx, t, p.Addr().String(), p.Refusals)
	defer stop()
	const n = 300
	endpoint := "tcp://" + p.Addr().String()
	subscribers := 1
	pyDone := runPython(ctx, t, "sub.py", endpoint, fmt.Sprint(n))
	if pyDone != nil {
		subscribers++
	}
	s := NewSub(SubOptions{DialWait: 10 * time.Second})
	defer s.Close()
	if err := s.Dial(endpoint); err != nil {
		t.Fatal(err)
	}
	s.Subscribe("")
	if err := p.WaitSubscribers(ctx, subscribers); err != nil {
		t.Fatalf("%d of %d subscribers: %v; refusals %+v", p.Subscribers(), subscribers, err, p.Refusals())
	}
	for i := range n {
		if err := p.Send([][]byte{[]byte("kv"), seq(i), []byte("p")}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		m, err := s.Recv(ctx)
		if err != nil || !bytes.Equal(m[1], seq(i)) {
			t.Fatalf("message %d: %q, %v", i, m, err)
		}
	}
	if pyDone != nil {
		if err := <-pyDone; err != nil {
			t.Fatalf("the libzmq subscriber: %v", err)
		}
	}
	if st := p.Stats(); st.Dropped != 0 || p.Refusals().Peers != 0 {
		t.Errorf("stats %+v, refusals %+v: want nothing dropped, no peer refused", st, p.Refusals())
	}
}

// pubDialing returns a PUB that connected to s, listening on TCP, once s
// subscribed, by ctx; the caller closes it.
func pubDialing(ctx context.Context, t *testing.T, s *Sub) *Pub {
	t.Helper()
	p := NewPub(PubOptions{})
	if err := p.Dial("tcp://" + s.Addr().String()); err != nil {
		p.Close(time.Second)
		t.Fatal(err)
	}
	if err := p.WaitSubscribers(ctx, 1); err != nil {
		p.Close(time.Second)
		t.Fatal(err)
	}
	return p
}
