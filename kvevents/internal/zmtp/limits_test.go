package zmtp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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

// slowHandshakes runs n connections to addr, the i-th from the address
// from(i), each sending a greeting a byte a second and connecting again
// pause after it is closed, until ctx is done.
func slowHandshakes(ctx context.Context, addr string, n int, from func(i int) net.IP, pause time.Duration) *sync.WaitGroup {
	var wg sync.WaitGroup
	g := rawGreeting(0)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from(i)}, Timeout: time.Second}
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

// handshakeAttack is a shape of slowHandshakes: n connections, the i-th
// from the address from(i).
type handshakeAttack struct {
	name  string
	n     int
	from  func(i int) net.IP
	pause time.Duration // before a closed connection connects again
}

// handshakeAttacks are the shapes the flood tests run: from a few
// addresses other than the legitimate peers', from as many addresses as
// there are handshake slots (one each), and from the legitimate peers'
// own, 127.0.0.1. Only the first runs under -short.
var handshakeAttacks = []handshakeAttack{
	{"300 from ten addresses", 300, func(i int) net.IP { return net.IPv4(127, 0, 0, byte(2+i%10)) }, 5 * time.Millisecond},
	{"64 from 64 addresses", DefaultMaxHandshakes, func(i int) net.IP { return net.IPv4(127, 0, 0, byte(2+i)) }, 0},
	{"300 from the peers' own address", 300, func(int) net.IP { return net.IPv4(127, 0, 0, 1) }, 5 * time.Millisecond},
}

// attacked starts the attack on the listening socket s and waits until
// it holds every place it can take.
func attacked(ctx context.Context, t *testing.T, s *socket, a handshakeAttack) (stop func()) {
	t.Helper()
	attack, cancel := context.WithCancel(ctx)
	wg := slowHandshakes(attack, s.addr().String(), a.n, a.from, a.pause)
	stop = func() { cancel(); wg.Wait() }
	// Trickled, no greeting starts before the handshake's deadline: the
	// attack waits on probation, all of it.
	full := min(maxProbation*s.lim.MaxHandshakes, a.n)
	for {
		s.mu.Lock()
		held := len(s.probation)
		s.mu.Unlock()
		if held >= full {
			return stop
		}
		select {
		case <-ctx.Done():
			stop()
			t.Fatalf("the attack never filled the handshake slots: %d of %d", held, full)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Connections that send their greeting a byte a second, and connect
// again when they are closed, for the whole handshake timeout: 300 from
// ten addresses other than the legitimate peers', 64 from 64 addresses,
// one each, at once, or 300 from the legitimate peers' own address. They
// wait on probation and never hold a handshake's slot, so a libzmq
// publisher (pyzmq, when installed) and one of ours, both on 127.0.0.1,
// still get every message into a listening Sub while the attack goes on,
// and the refusals are counted by limit and reported.
func TestSlowHandshakeFlood(t *testing.T) { eachAttack(t, slowHandshakeFlood) }

// eachAttack runs test once per shape of handshakeAttacks, the first
// alone under -short.
func eachAttack(t *testing.T, test func(*testing.T, handshakeAttack)) {
	for i, a := range handshakeAttacks {
		t.Run(a.name, func(t *testing.T) {
			if i > 0 && testing.Short() {
				t.Skip("one shape of the attack under -short")
			}
			test(t, a)
		})
	}
}

func slowHandshakeFlood(t *testing.T, a handshakeAttack) {
	noLeaks(t)
	var violated atomic.Int64
	s := NewSub(SubOptions{OnViolation: func(error) { violated.Add(1) }})
	defer s.Close()
	if err := s.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s.Subscribe("")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	stop := attacked(ctx, t, s.s, a)
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

// A connection holds no handshake's slot until the start of its greeting
// has come (at most MaxHandshakes wait so, the one furthest behind making
// room for a newcomer), and one whose greeting started is never refused a
// slot: past MaxHandshakesPerSource from one address, the handshake of
// that address furthest behind (the fewest bytes read, the oldest of
// those) yields its slot; past MaxHandshakes, the one furthest behind of
// the address that holds most. The newcomers complete their handshakes.
func TestHandshakesYield(t *testing.T) {
	noLeaks(t)
	v := make(violations, 8)
	s := NewSub(SubOptions{Limits: Limits{MaxHandshakes: 3, MaxHandshakesPerSource: 2}, OnViolation: v.report})
	defer s.Close()
	if err := s.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	g := rawGreeting(0)
	started := func(ip net.IP, n int) *raw {
		r := dialFrom(t, s.Addr(), ip)
		r.write(g[:n])
		time.Sleep(100 * time.Millisecond) // the Sub reads it
		return r
	}
	finish := func(r *raw, sent int) {
		t.Helper()
		r.write(g[sent:], rawReady("PUB"))
		r.c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.ReadFull(r.c.r, make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
		if _, cmd, _, err := r.c.next(); err != nil || cmd != "READY" {
			t.Fatalf("got %q, %v, want READY", cmd, err)
		}
	}
	a := net.IPv4(127, 0, 0, 5)
	a1, a2 := started(a, 64), started(a, 20)
	a3 := started(a, 20) // takes a2's slot: a1 is further on
	if !a2.closed(time.Second) {
		t.Fatal("the handshake furthest behind of an address at its limit kept its slot")
	}
	v.want(t, ErrTooManyPeers)
	b := started(net.IPv4(127, 0, 0, 6), 20) // the third slot
	c := started(net.IPv4(127, 0, 0, 7), 20) // takes a3's
	if !a3.closed(time.Second) {
		t.Fatal("the busiest address kept its handshake furthest behind")
	}
	v.want(t, ErrTooManyPeers)
	// Silent connections wait on probation, holding no slot, as many as
	// maxProbation per slot; one more takes the place of the oldest.
	d := net.IPv4(127, 0, 0, 8)
	var silent []*raw
	for range maxProbation*3 + 1 {
		silent = append(silent, dialFrom(t, s.Addr(), d))
	}
	if !silent[0].closed(time.Second) {
		t.Fatal("the oldest silent connection kept its place on probation")
	}
	v.want(t, ErrTooManyPeers)
	finish(a1, 64)
	finish(b, 20)
	finish(c, 20)
	for _, r := range silent[1:] {
		if r.closed(10 * time.Millisecond) {
			t.Error("a silent connection was closed with room on probation")
		}
	}
	if r := s.Refusals(); r.PerSource != 1 || r.Handshakes != 2 || r.Peers != 0 {
		t.Errorf("refusals %+v, want one handshake yielded per source, two for the totals, no peer refused", r)
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
// connects again; a publisher of ZMTP 3.0, which speaks no heartbeats, is
// kept.
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
	second.hello("PUB", 0)
	if !first.closed(time.Second) {
		t.Error("the frozen publisher's connection is still open")
	}
	// The second, of ZMTP 3.0, does not speak heartbeats: it is not held
	// to them.
	if second.closed(4 * hb.Timeout) {
		t.Error("a publisher that does not speak heartbeats was dropped")
	}
}

// A Pub drops a subscriber that answered heartbeats and then froze, even
// while its writer is blocked on that subscriber.
func TestHeartbeatFrozenSubscriber(t *testing.T) {
	noLeaks(t)
	p, r := pubAndSmallReader(t, PubOptions{Heartbeat: Heartbeat{Interval: 50 * time.Millisecond, Timeout: 300 * time.Millisecond}})
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

// The same floods at a listening Pub: a libzmq subscriber (pyzmq, when
// installed) and one of ours, both on 127.0.0.1, get every message.
func TestSlowHandshakeFloodPub(t *testing.T) { eachAttack(t, slowHandshakeFloodPub) }

func slowHandshakeFloodPub(t *testing.T, a handshakeAttack) {
	noLeaks(t)
	p := NewPub(PubOptions{})
	defer p.Close(0)
	if err := p.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	stop := attacked(ctx, t, p.s, a)
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

// pubAndSmallReader returns a Pub with opts listening on 127.0.0.1,
// closed at the test's end, and a raw subscriber of ZMTP 3.1 of a small
// receive buffer, its handshake done: a peer that stops reading soon
// holds up the Pub's writes to it.
func pubAndSmallReader(t *testing.T, opts PubOptions) (*Pub, *raw) {
	t.Helper()
	p := NewPub(opts)
	t.Cleanup(func() { p.Close(0) })
	if err := p.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, p.Addr())
	r.nc.(*net.TCPConn).SetReadBuffer(4096)
	r.hello("SUB", 1)
	return p, r
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
