package zmtp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// A libzmq PUB's handshake and a message, byte by byte (RFC 23), must reach
// Recv; our greeting (ZMTP 3.1, RFC 37), READY and subscription must be
// the RFCs' bytes.
func TestGoldenHandshake(t *testing.T) {
	noLeaks(t)
	s := NewSub(SubOptions{})
	defer s.Close()
	if err := s.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s.Subscribe("")
	r := dialRaw(t, s.Addr())
	libzmqPub := []byte{
		0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, // signature; libzmq puts 1 in the last padding byte
		3, 1, // version 3.1
		'N', 'U', 'L', 'L', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // mechanism
		0,                                                                                           // as-server
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // filler
		0x04, 0x19, // command, 25 bytes
		0x05, 'R', 'E', 'A', 'D', 'Y',
		0x0B, 'S', 'o', 'c', 'k', 'e', 't', '-', 'T', 'y', 'p', 'e', 0, 0, 0, 3, 'P', 'U', 'B',
	}
	r.write(libzmqPub)
	r.c.SetDeadline(time.Now().Add(2 * time.Second))
	got := make([]byte, 64+2+25+3)
	if _, err := io_ReadFull(r, got); err != nil {
		t.Fatal(err)
	}
	want := slices.Concat(
		[]byte{0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0x7F, 3, 1}, []byte("NULL"), make([]byte, 16+1+31), // ZMTP 3.1 (RFC 37)
		[]byte{0x04, 0x19, 0x05}, []byte("READY"), []byte{0x0B}, []byte("Socket-Type"), []byte{0, 0, 0, 3}, []byte("SUB"),
		[]byte{0x00, 0x01, 0x01}, // subscription to everything: a one-frame message, the byte 1
	)
	if !bytes.Equal(got, want) {
		t.Fatalf("our side wrote\n% x\nwant\n% x", got, want)
	}
	r.write([]byte{0x01, 4, 'k', 'v', '@', 'a'}, []byte{0x01, 8}, seq(7), []byte{0x02, 0, 0, 0, 0, 0, 0, 1, 0x2C}, bytes.Repeat([]byte{'p'}, 300))
	m, err := s.Recv(timeout(t, 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 3 || string(m[0]) != "kv@a" || !bytes.Equal(m[1], seq(7)) || len(m[2]) != 300 {
		t.Fatalf("got %q", m)
	}
}

func io_ReadFull(r *raw, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := r.c.r.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// A 9-byte frame header announcing 2^48 bytes closes that connection
// alone, before anything is allocated.
func TestFrameHeaderAttack(t *testing.T) {
	noLeaks(t)
	v := make(violations, 8)
	s := NewSub(SubOptions{Limits: Limits{Frames: []int{64, 8, 1 << 20}, MaxFrames: 3}, OnViolation: v.report})
	defer s.Close()
	if err := s.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s.Subscribe("")
	p := NewPub(PubOptions{})
	defer p.Close(0)
	if err := p.Dial("tcp://" + s.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitSubscribers(timeout(t, 2*time.Second), 1); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, s.Addr())
	r.hello("PUB", 0)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r.write([]byte{0x02, 0, 1, 0, 0, 0, 0, 0, 0})
	if !r.closed(2 * time.Second) {
		t.Fatal("the connection stayed open")
	}
	v.want(t, ErrFrameTooLong)
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
		t.Errorf("allocated %d bytes", grew)
	}
	for i := range 3 {
		if err := p.Send([][]byte{[]byte("t"), seq(i), []byte("ok")}); err != nil {
			t.Fatal(err)
		}
		m, err := s.Recv(timeout(t, 2*time.Second))
		if err != nil || !bytes.Equal(m[1], seq(i)) {
			t.Fatalf("healthy peer: %q, %v", m, err)
		}
	}
}

func TestViolations(t *testing.T) {
	lim := Limits{Frames: []int{8, 8, 100}, MaxFrames: 4}
	big := bytes.Repeat([]byte{'x'}, 50)
	for _, tc := range []struct {
		name  string
		typ   string // of the raw peer's READY; "" for none
		bytes []byte // after the handshake, or instead of it
		kind  error  // nil: the message is delivered
	}{
		{"per-index under the limit", "PUB", rawMsg([]byte("t"), seq(1), big), nil},
		{"last limit applies to later frames", "PUB", rawMsg([]byte("t"), seq(1), big, big), nil},
		{"frame 0 over its limit", "PUB", rawMsg(big, seq(1), []byte("p")), ErrFrameTooLong},
		{"frame 3 over the last limit", "PUB", rawMsg([]byte("t"), seq(1), big, make([]byte, 101)), ErrFrameTooLong},
		{"too many frames", "PUB", rawMsg([]byte("t"), nil, nil, nil, nil), ErrTooManyFrames},
		{"bad flags", "PUB", []byte{0x08, 1, 'x'}, ErrProtocol},
		{"command too long", "PUB", []byte{0x06, 0, 0, 0, 0, 0, 0, 0x13, 0x88}, ErrFrameTooLong},
		{"command inside a message", "PUB", []byte{0x01, 1, 'x', 0x04, 5, 4, 'P', 'I', 'N', 'G'}, ErrProtocol},
		{"wrong socket type", "DEALER", nil, ErrProtocol},
		{"bad signature", "", append([]byte{0xFE}, rawGreeting(0)[1:]...), ErrProtocol},
		{"ZMTP 2", "", append(rawGreeting(0)[:10], 2, 0), ErrProtocol},
		{"PLAIN mechanism", "", append(append(rawGreeting(0)[:12], "PLAIN"...), make([]byte, 64-17)...), ErrProtocol},
		{"message before READY", "", append(rawGreeting(0), rawMsg([]byte("x"))...), ErrProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			v := make(violations, 8)
			s := NewSub(SubOptions{Limits: lim, OnViolation: v.report})
			defer s.Close()
			if err := s.Listen("tcp://127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			s.Subscribe("")
			r := dialRaw(t, s.Addr())
			if tc.typ != "" {
				r.write(rawGreeting(0), rawReady(tc.typ))
			}
			r.write(tc.bytes)
			if tc.kind != nil {
				v.want(t, tc.kind)
				if !r.closed(2 * time.Second) {
					t.Fatal("the connection stayed open")
				}
				return
			}
			m, err := s.Recv(timeout(t, 2*time.Second))
			if err != nil || len(m) < 3 || !bytes.Equal(m[2], big) {
				t.Fatalf("got %q, %v", m, err)
			}
			v.none(t)
		})
	}
}

// A peer that connects and says nothing loses its slot at the handshake
// deadline; MaxPeers bounds the rest.
func TestHandshakeDeadlineAndMaxPeers(t *testing.T) {
	noLeaks(t)
	v := make(violations, 8)
	s := NewSub(SubOptions{Limits: Limits{MaxPeers: 2}, OnViolation: v.report, HandshakeTimeout: 200 * time.Millisecond})
	defer s.Close()
	if err := s.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	silent := dialRaw(t, s.Addr())
	start := time.Now()
	if !silent.closed(3 * time.Second) {
		t.Fatal("a silent peer kept its connection")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("closed after %v", d)
	}
	v.want(t, ErrProtocol)

	a, b := dialRaw(t, s.Addr()), dialRaw(t, s.Addr())
	a.hello("PUB", 0)
	b.hello("XPUB", 1)
	waitPeers(t, s.s, 2) // or c could take a slot before b is counted
	c := dialRaw(t, s.Addr())
	c.write(rawGreeting(0), rawReady("PUB"))
	if !c.closed(2 * time.Second) {
		t.Fatal("a third peer was kept")
	}
	v.want(t, ErrTooManyPeers)
	if r := s.Refusals(); r.Peers < 1 || r.Timeouts != 1 {
		t.Errorf("refusals %+v, want a peer or more and one timeout", r)
	}
	a.nc.Close()
	deadline := time.Now().Add(3 * time.Second)
	for {
		d := dialRaw(t, s.Addr())
		d.write(rawGreeting(0), rawReady("PUB"))
		if !d.closed(100 * time.Millisecond) {
			break // admitted once a's slot is free
		}
		if time.Now().After(deadline) {
			t.Fatal("a's slot was not freed")
		}
	}
}

// One subscriber that never reads must not hold up another, nor Send, nor
// Close beyond its flush time.
func TestPubStuckSubscriber(t *testing.T) {
	noLeaks(t)
	const n, queue = 20000, 5000
	p := NewPub(PubOptions{Limits: Limits{Queue: queue}})
	if err := p.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	stuck := dialRaw(t, p.Addr())
	stuck.nc.(*net.TCPConn).SetReadBuffer(4096)
	stuck.hello("SUB", 0)
	stuck.write(rawMsg([]byte{1}))
	s := NewSub(SubOptions{})
	defer s.Close()
	if err := s.Dial("tcp://" + p.Addr().String()); err != nil {
		t.Fatal(err)
	}
	s.Subscribe("")
	if err := p.WaitSubscribers(timeout(t, 2*time.Second), 2); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		ctx := timeout(t, 10*time.Second)
		for i := range n {
			m, err := s.Recv(ctx)
			if err == nil && !bytes.Equal(m[1], seq(i)) {
				err = fmt.Errorf("message %d: got %x", i, m[1])
			}
			if err != nil {
				got <- err
				return
			}
		}
		got <- nil
	}()
	stuckPeer := stuck.nc.LocalAddr().String()
	healthy := func(st PubStats) (PeerStats, PeerStats) {
		var h, x PeerStats
		for _, ps := range st.Peers {
			if ps.Peer == stuckPeer {
				x = ps
			} else {
				h = ps
			}
		}
		return h, x
	}
	payload := make([]byte, 1024)
	var sending time.Duration
	for i := range n {
		start := time.Now()
		if err := p.Send([][]byte{[]byte("kv"), seq(i), payload}); err != nil {
			t.Fatal(err)
		}
		sending += time.Since(start)
		if i%1000 == 999 { // let the healthy subscriber keep up, so that it loses nothing
			deadline := time.Now().Add(5 * time.Second)
			for h, _ := healthy(p.Stats()); h.Queued > 0; h, _ = healthy(p.Stats()) {
				if time.Now().After(deadline) {
					t.Fatalf("the healthy subscriber's queue stays at %d", h.Queued)
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
	if sending > 2*time.Second {
		t.Errorf("Send took %v in all", sending)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	h, x := healthy(p.Stats())
	if h.Sent != n || h.Dropped != 0 {
		t.Errorf("healthy subscriber: %+v", h)
	}
	if x.Dropped == 0 || x.Sent+x.Dropped+x.Queued != n {
		t.Errorf("stuck subscriber: %+v", x)
	}
	const flush = 200 * time.Millisecond
	start := time.Now()
	if err := p.Close(flush); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > flush+time.Second {
		t.Errorf("Close took %v", d)
	}
	st := p.Stats()
	h, x2 := healthy(st)
	// What was queued at Close is written whole, partly, or not at all;
	// every message counts once either way.
	if x2.Unsent == 0 || x2.Sent+x2.Unsent != x.Sent+x.Queued || h.Unsent != 0 || st.Unsent != x2.Unsent || st.Disconnected != 2 {
		t.Errorf("after Close: %+v", st)
	}
	if err := p.Send([][]byte{nil}); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close: %v", err)
	}
}

// A Pub takes subscriptions in ZMTP 3.0's message form and 3.1's
// commands, sends by prefix, and answers PING.
func TestSubscriptions(t *testing.T) {
	noLeaks(t)
	p := NewPub(PubOptions{})
	defer p.Close(0)
	if err := p.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	old, new := dialRaw(t, p.Addr()), dialRaw(t, p.Addr())
	old.hello("SUB", 0)
	old.write(rawMsg([]byte("\x01kv@a")))
	new.hello("XSUB", 1)
	new.write(command("SUBSCRIBE", []byte("kv@b")), command("SUBSCRIBE", nil), command("CANCEL", nil))
	// A PING before the wait so that the subscriptions are in when its PONG is.
	new.write(command("PING", []byte{0, 10, 'c', 't', 'x'}))
	if _, cmd, data := new.read(); cmd != "PONG" || string(data) != "ctx" {
		t.Fatalf("got %s %q, want PONG ctx", cmd, data)
	}
	if err := p.WaitSubscribers(timeout(t, 2*time.Second), 2); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"kv@a1", "kv@b1", "zz", "kv@", "kv@a2"} {
		if err := p.Send([][]byte{[]byte(topic), []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"kv@a1", "kv@a2"} {
		if m, _, _ := old.read(); string(m[0]) != want {
			t.Fatalf("3.0 peer got %q, want %s", m, want)
		}
	}
	if m, _, _ := new.read(); string(m[0]) != "kv@b1" || len(m) != 2 {
		t.Fatalf("3.1 peer got %q, want kv@b1", m)
	}
	old.write(rawMsg([]byte("\x00kv@a")))
	deadline := time.Now().Add(2 * time.Second)
	for p.Subscribers() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the cancel did not arrive")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := p.ReadBytes(); n != 0 {
		t.Errorf("%d bytes of the read budget held after the subscriptions were read", n)
	}
}

// A Pub that connects to a listening Sub connects again after the Sub
// restarts.
func TestPubDialReconnects(t *testing.T) {
	noLeaks(t)
	s := NewSub(SubOptions{})
	if err := s.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	addr := "tcp://" + s.Addr().String()
	s.Subscribe("")
	p := NewPub(PubOptions{})
	defer p.Close(0)
	if err := p.Dial(addr); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitSubscribers(timeout(t, 2*time.Second), 1); err != nil {
		t.Fatal(err)
	}
	p.Send([][]byte{[]byte("one")})
	if m, err := s.Recv(timeout(t, 2*time.Second)); err != nil || string(m[0]) != "one" {
		t.Fatalf("got %q, %v", m, err)
	}
	s.Close()
	if _, err := s.Recv(timeout(t, time.Second)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Recv after Close: %v", err)
	}
	s = NewSub(SubOptions{})
	defer s.Close()
	if err := s.Listen(addr); err != nil {
		t.Fatal(err)
	}
	s.Subscribe("")
	ctx := timeout(t, 5*time.Second)
	for {
		p.Send([][]byte{[]byte("two")})
		m, err := s.Recv(timeout(t, 50*time.Millisecond))
		if err == nil && string(m[0]) == "two" {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no reconnection")
		}
	}
	if st := p.Stats(); st.Connected != 2 || st.Disconnected != 1 {
		t.Errorf("stats %+v", st)
	}
}

// A Sub's first Dial fails when nothing answers; later losses are waited
// out.
func TestSubDialWait(t *testing.T) {
	noLeaks(t)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := "tcp://" + l.Addr().String()
	l.Close()
	s := NewSub(SubOptions{DialWait: 300 * time.Millisecond})
	defer s.Close()
	start := time.Now()
	if err := s.Dial(addr); err == nil {
		t.Fatal("Dial to nothing succeeded")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Dial took %v", d)
	}
	if err := s.Dial("inproc://nobody"); err == nil {
		t.Fatal("Dial to an unbound inproc name succeeded")
	}
	if err := s.Dial("udp://127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "inproc, ipc, tcp") {
		t.Fatalf("bad scheme: %v", err)
	}
	if err := NewPub(PubOptions{}).Dial("tcp://*:5555"); err == nil {
		t.Fatal("Dial to tcp://* succeeded")
	}
}

// A Server serves each client on its own: one that asks and never reads
// does not hold up another.
func TestServerStuckClient(t *testing.T) {
	noLeaks(t)
	v := make(violations, 8)
	chunk := make([]byte, 64<<10)
	srv := NewServer(ServerOptions{Limits: Limits{Frames: []int{0, 8}, MaxFrames: 2}, OnViolation: v.report}, func(c *Conn) {
		for {
			m, err := c.ReadMsg()
			if err != nil {
				return
			}
			for range binary.BigEndian.Uint64(m[1]) {
				if c.WriteMsg([][]byte{nil, chunk}) != nil {
					return
				}
			}
			if c.WriteMsg([][]byte{nil, []byte("end")}) != nil {
				return
			}
		}
	})
	defer srv.Close()
	if err := srv.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ep := "tcp://" + srv.Addr().String()
	ctx := timeout(t, 5*time.Second)
	stuck, err := Dial(ctx, ep, Dealer, []byte("stuck"), Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	if err := stuck.WriteMsg([][]byte{nil, seq(1000)}); err != nil { // far more than the socket buffers hold
		t.Fatal(err)
	}
	for range 2 {
		c, err := Dial(ctx, ep, Dealer, nil, Limits{Frames: []int{0, 64 << 10}, MaxFrames: 2}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(3 * time.Second))
		if err := c.WriteMsg([][]byte{nil, seq(10)}); err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			m, err := c.ReadMsg()
			if err != nil {
				t.Fatal(err)
			}
			if string(m[1]) == "end" {
				if i != 10 {
					t.Fatalf("%d answers", i)
				}
				break
			}
		}
		c.Close()
	}
	if c, err := Dial(ctx, ep, Req, nil, Limits{}, nil); err != nil {
		t.Fatalf("REQ: %v", err)
	} else {
		c.WriteMsg([][]byte{nil, []byte("too long for frame 1")})
		if _, err := c.ReadMsg(); err == nil {
			t.Fatal("the server answered a request that broke its limits")
		}
		v.want(t, ErrFrameTooLong)
		c.Close()
	}
	if _, err := Dial(ctx, ep, "PUB", nil, Limits{}, nil); !errors.Is(err, ErrProtocol) {
		t.Fatalf("a PUB peer: %v", err)
	}
	v.want(t, ErrProtocol)
	start := time.Now()
	srv.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v", d)
	}
}

func TestInprocAndIPC(t *testing.T) {
	noLeaks(t)
	sock := filepath.Join(t.TempDir(), "s.sock")
	stale, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close() // leaves the socket file, as a process that died would
	if !slices.Equal(Transports(), []string{"inproc", "ipc", "tcp"}) {
		t.Fatal(Transports())
	}
	for _, ep := range []string{"inproc://zmtp-test", "ipc://" + sock} {
		t.Run(ep[:strings.Index(ep, ":")], func(t *testing.T) {
			p := NewPub(PubOptions{})
			defer p.Close(time.Second)
			if err := p.Listen(ep); err != nil {
				t.Fatal(err)
			}
			s := NewSub(SubOptions{})
			defer s.Close()
			if err := s.Dial(ep); err != nil {
				t.Fatal(err)
			}
			s.Subscribe("a")
			if err := p.WaitSubscribers(timeout(t, 2*time.Second), 1); err != nil {
				t.Fatal(err)
			}
			for i := range 100 {
				p.Send([][]byte{[]byte("b")})
				p.Send([][]byte{[]byte("a"), seq(i), make([]byte, 1000)})
			}
			for i := range 100 {
				m, err := s.Recv(timeout(t, 2*time.Second))
				if err != nil || !bytes.Equal(m[1], seq(i)) {
					t.Fatalf("got %q, %v", m, err)
				}
			}
			srv := NewServer(ServerOptions{}, func(c *Conn) {
				for {
					m, err := c.ReadMsg()
					if err != nil || c.WriteMsg(m) != nil {
						return
					}
				}
			})
			defer srv.Close()
			rep := strings.Replace(ep, "zmtp-test", "zmtp-replay", 1) + ".replay"
			if err := srv.Listen(rep); err != nil {
				t.Fatal(err)
			}
			c, err := Dial(timeout(t, 2*time.Second), rep, Dealer, []byte("id"), Limits{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.WriteMsg([][]byte{nil, []byte("echo")}); err != nil {
				t.Fatal(err)
			}
			if m, err := c.ReadMsg(); err != nil || string(m[1]) != "echo" {
				t.Fatalf("got %q, %v", m, err)
			}
		})
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("the socket file outlived its listener: %v", err)
	}
}

// A publisher that floods cannot keep another out of a full queue.
func TestSubFairness(t *testing.T) {
	noLeaks(t)
	s := NewSub(SubOptions{Limits: Limits{Queue: 4}})
	defer s.Close()
	if err := s.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s.Subscribe("")
	flood, quiet := dialRaw(t, s.Addr()), dialRaw(t, s.Addr())
	flood.hello("PUB", 0)
	quiet.hello("PUB", 0)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		b := bytes.Repeat(rawMsg([]byte("flood")), 1000)
		for flood.nc.SetWriteDeadline(time.Now().Add(3 * time.Second)); ; {
			if _, err := flood.nc.Write(b); err != nil {
				return
			}
		}
	}()
	defer wg.Wait()
	defer flood.nc.Close()
	m, err := s.Recv(timeout(t, 2*time.Second)) // the queue is full of floods by now
	if err != nil || string(m[0]) != "flood" {
		t.Fatalf("got %q, %v", m, err)
	}
	time.Sleep(50 * time.Millisecond)
	quiet.write(rawMsg([]byte("quiet")))
	time.Sleep(50 * time.Millisecond)
	for i := range 20 {
		m, err := s.Recv(timeout(t, 2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if string(m[0]) == "quiet" {
			return
		}
		t.Logf("%d: %s", i, m[0])
	}
	t.Fatal("the quiet publisher's message did not come through")
}
