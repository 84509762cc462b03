package zmtp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// FuzzReadMsg feeds arbitrary bytes to a SUB connection's reader, after a
// valid greeting and READY or in their place: it must never panic, never
// return or allocate more than the limits allow, and read the same
// whatever pieces the bytes arrive in.
func FuzzReadMsg(f *testing.F) {
	hello := append(rawGreeting(0), rawReady("PUB")...)
	f.Add(true, rawMsg([]byte("kv@a"), seq(1), []byte("payload")))
	f.Add(true, []byte{0x02, 0, 1, 0, 0, 0, 0, 0, 0})                         // 2^48 bytes announced
	f.Add(true, []byte{0x02, 0, 0, 0, 0, 0, 0x10, 0, 0, 'x'})                 // the largest frame announced, one byte sent
	f.Add(true, []byte{0x06, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // a command as long as can be
	f.Add(true, []byte{0x04, 7, 4, 'P', 'I', 'N', 'G', 0, 1})
	f.Add(true, []byte{0x04, 6, 5, 'E', 'R', 'R', 'O', 'R'})
	f.Add(true, []byte{0x01, 0, 0x01, 0, 0x01, 0, 0x01, 0, 0x00, 0})
	f.Add(true, []byte{0x08, 1, 'x'})
	f.Add(false, append(hello, rawMsg([]byte("t"), nil, bytes.Repeat([]byte("p"), 300))...))
	f.Add(false, append(rawGreeting(1), rawReady("XPUB")...))
	f.Add(false, append(rawGreeting(0), 0x04, 0x30, 5, 'R', 'E', 'A', 'D', 'Y', 0x0b, 'S', 'o', 'c', 'k', 'e', 't', '-', 'T', 'y', 'p', 'e', 0xff, 0, 0, 0))
	lim := Limits{Frames: []int{64, 8, 1 << 20}, MaxFrames: 4}.withDefaults()
	f.Fuzz(func(t *testing.T, withHello bool, data []byte) {
		in := data
		if withHello {
			in = append(hello[:len(hello):len(hello)], data...)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		whole, wholeErr := readMsgs(t, in, lim, nil)
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20+4*uint64(len(in)) {
			t.Fatalf("%d bytes allocated for %d bytes of input", grew, len(in))
		}
		// A socket may hand over a frame in any pieces (byte by byte, or
		// in sizes that cut headers and bodies anywhere): the reader must
		// see the same messages and stop at the same error.
		for _, chunks := range [][]int{{1}, {2, 7, 1, 3, 9, 4}} {
			msgs, err := readMsgs(t, in, lim, chunks)
			if fmt.Sprint(err) != fmt.Sprint(wholeErr) {
				t.Fatalf("reads of %v: error %v, whole: %v", chunks, err, wholeErr)
			}
			if !reflect.DeepEqual(msgs, whole) {
				t.Fatalf("reads of %v: %d messages %q, whole: %d %q", chunks, len(msgs), msgs, len(whole), whole)
			}
		}
	})
}

// readMsgs hands in to a SUB connection's reader in reads of at most the
// sizes in chunks, in turn (nil: as much as each read asks), and returns
// the messages it reads, each checked against lim, and the error that
// ended the handshake or the reading.
func readMsgs(t *testing.T, in []byte, lim Limits, chunks []int) ([][][]byte, error) {
	t.Helper()
	var r io.Reader = bytes.NewReader(in)
	if chunks != nil {
		r = &pieces{r: r, sizes: chunks}
	}
	c := newConn(&fakeConn{r: r}, lim, nil, "fuzz")
	if err := c.handshake("SUB", nil, time.Time{}, nil); err != nil {
		return nil, err
	}
	var msgs [][][]byte
	for {
		m, err := c.ReadMsg()
		if err != nil {
			return msgs, err
		}
		if len(m) == 0 || len(m) > lim.MaxFrames {
			t.Fatalf("a message of %d frames", len(m))
		}
		for i, fr := range m {
			if uint64(len(fr)) > lim.frame(i) {
				t.Fatalf("frame %d of %d bytes", i, len(fr))
			}
		}
		own := make([][]byte, len(m)) // the frames may share the reader's buffer
		for i, fr := range m {
			own[i] = slices.Clone(fr)
		}
		msgs = append(msgs, own)
	}
}

// pieces reads from r at most sizes[i] bytes at the i-th read, cycling
// through sizes, as a socket delivers a stream in segments.
type pieces struct {
	r     io.Reader
	sizes []int
	next  int
}

func (p *pieces) Read(b []byte) (int, error) {
	n := min(len(b), p.sizes[p.next%len(p.sizes)])
	p.next++
	return p.r.Read(b[:n])
}

// FuzzCurve feeds arbitrary bytes to a CURVE connection's handshake and
// reader, the server's (asServer) or the client's, after a valid greeting:
// it must never panic, never return or allocate more than the limits
// allow, and read the same whatever pieces the bytes arrive in. The seeds
// are whole conversations, a handshake and boxed messages and commands,
// recorded with the keys and randomness the fuzzed side replays, so that
// mutations reach every step past the handshake too.
func FuzzCurve(f *testing.F) {
	fromClient, fromServer := curveConversation(f)
	// The seeds replay: each side reads the other's messages and commands
	// past the handshake.
	lim := Limits{Frames: []int{64, 8, 1 << 20}, MaxFrames: 4}.withDefaults()
	for _, side := range []struct {
		asServer bool
		in       []byte
		want     string
	}{{true, fromClient, `[["\x01"] ["SUBSCRIBE" "kv@"]]`}, {false, fromServer, `[["kv@fuzz" "\x00\x00\x00\x00\x00\x00\x00\x00" "` + strings.Repeat("p", 300) + `"] ["PING" "\x00\nctx"]]`}} {
		msgs, err := readCurveMsgs(f, append(greeting(1, "CURVE"), side.in...), lim, side.asServer, nil)
		if got := fmt.Sprintf("%q", msgs); got != side.want || !errors.Is(err, io.EOF) {
			f.Fatalf("the conversation replayed to the server (%v): %s, %v; want %s and EOF", side.asServer, got, err, side.want)
		}
	}
	f.Add(true, fromClient)
	f.Add(false, fromServer)
	f.Add(true, fromClient[:200])                                               // the HELLO alone
	f.Add(true, append(slices.Clone(fromClient[:202]), 0x04, 0xff))             // an INITIATE cut short
	f.Add(false, []byte{0x04, 0x07, 5, 'E', 'R', 'R', 'O', 'R', 3})             // an ERROR whose reason is missing
	f.Add(true, append(slices.Clone(fromClient), 0x02, 0, 1, 0, 0, 0, 0, 0, 0)) // 2^48 bytes announced past the handshake
	f.Fuzz(func(t *testing.T, asServer bool, data []byte) {
		in := append(greeting(1, "CURVE"), data...)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		whole, wholeErr := readCurveMsgs(t, in, lim, asServer, nil)
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20+8*uint64(len(in)) {
			t.Fatalf("%d bytes allocated for %d bytes of input", grew, len(in))
		}
		for _, chunks := range [][]int{{1}, {2, 7, 1, 3, 9, 4}} {
			msgs, err := readCurveMsgs(t, in, lim, asServer, chunks)
			if fmt.Sprint(err) != fmt.Sprint(wholeErr) {
				t.Fatalf("reads of %v: error %v, whole: %v", chunks, err, wholeErr)
			}
			if !reflect.DeepEqual(msgs, whole) {
				t.Fatalf("reads of %v: %d messages %q, whole: %d %q", chunks, len(msgs), msgs, len(whole), whole)
			}
		}
	})
}

// The keys and randomness of FuzzCurve's two sides, fixed so that a
// recorded conversation replays.
var (
	fuzzServerKey = Key{1, 2, 3}
	fuzzClientKey = Key{4, 5, 6}
)

func fuzzCurve(asServer bool) *curveConfig {
	if asServer {
		return (&Curve{Secret: fuzzServerKey, Clients: []Key{fuzzClientKey.Public()}}).prepare()
	}
	return (&Curve{Secret: fuzzClientKey, Server: fuzzServerKey.Public()}).prepare()
}

func fuzzRand(asServer bool) io.Reader {
	seed := [32]byte{'c'}
	if asServer {
		seed[0] = 's'
	}
	return rand.NewChaCha8(seed)
}

// curveConversation runs a CURVE client (a SUB) and server (a PUB) of
// FuzzCurve's keys over a pipe: the handshake, then boxed messages and
// commands each way. It returns what each side sent past its greeting.
func curveConversation(f *testing.F) (fromClient, fromServer []byte) {
	a, b := net.Pipe()
	ra, rb := &recorder{Conn: a}, &recorder{Conn: b}
	server, client := newConn(ra, Limits{}.withDefaults(), nil, "server"), newConn(rb, Limits{}.withDefaults(), nil, "client")
	server.curve, server.asServer, server.rand = fuzzCurve(true), true, fuzzRand(true)
	client.curve, client.rand = fuzzCurve(false), fuzzRand(false)
	errs := make(chan error, 2)
	go func() {
		err := server.handshake("PUB", nil, time.Now().Add(5*time.Second), nil)
		if err == nil {
			go drain(server)
			err = server.WriteMsg([][]byte{[]byte("kv@fuzz"), seq(0), bytes.Repeat([]byte("p"), 300)})
		}
		if err == nil {
			server.wmu.Lock()
			server.putCommand("PING", []byte{0, 10, 'c', 't', 'x'})
			err = server.w.Flush()
			server.wmu.Unlock()
		}
		errs <- err
	}()
	go func() {
		err := client.handshake("SUB", nil, time.Now().Add(5*time.Second), nil)
		if err == nil {
			go drain(client)
			err = client.WriteMsg([][]byte{{1}})
		}
		if err == nil {
			client.wmu.Lock()
			client.putCommand("SUBSCRIBE", []byte("kv@"))
			err = client.w.Flush()
			client.wmu.Unlock()
		}
		errs <- err
	}()
	for range 2 {
		if err := <-errs; err != nil {
			f.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond) // the readers take the last writes
	a.Close()
	b.Close()
	return rb.sent()[64:], ra.sent()[64:]
}

// drain reads c's bytes until it fails, unread: a pipe's writes wait for
// their reader, and a reader that answered PINGs would add to the
// conversation as it pleased.
func drain(c *Conn) { io.Copy(io.Discard, c.r) }

// recorder is a net.Conn that keeps what is written to it.
type recorder struct {
	net.Conn
	mu  sync.Mutex
	out []byte
}

func (r *recorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	r.out = append(r.out, b...)
	r.mu.Unlock()
	return r.Conn.Write(b)
}

func (r *recorder) sent() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.out)
}

// readCurveMsgs is readMsgs for a CURVE connection of FuzzCurve's keys and
// randomness, the server (a PUB) or the client (a SUB).
func readCurveMsgs(t testing.TB, in []byte, lim Limits, asServer bool, chunks []int) ([][][]byte, error) {
	t.Helper()
	var r io.Reader = bytes.NewReader(in)
	if chunks != nil {
		r = &pieces{r: r, sizes: chunks}
	}
	c := newConn(&fakeConn{r: r}, lim, nil, "fuzz")
	c.curve, c.asServer, c.rand = fuzzCurve(asServer), asServer, fuzzRand(asServer)
	typ := "SUB"
	if asServer {
		typ = "PUB"
	}
	if err := c.handshake(typ, nil, time.Time{}, nil); err != nil {
		return nil, err
	}
	var msgs [][][]byte
	for {
		m, cmd, data, err := c.recv()
		if err != nil {
			return msgs, err
		}
		if cmd != "" {
			if len(data) > maxCommand {
				t.Fatalf("a command of %d bytes", len(data))
			}
			msgs = append(msgs, [][]byte{[]byte(cmd), slices.Clone(data)})
			continue
		}
		if len(m) == 0 || len(m) > lim.MaxFrames {
			t.Fatalf("a message of %d frames", len(m))
		}
		own := make([][]byte, len(m))
		for i, fr := range m {
			if uint64(len(fr)) > lim.frame(i) {
				t.Fatalf("frame %d of %d bytes", i, len(fr))
			}
			own[i] = slices.Clone(fr)
		}
		msgs = append(msgs, own)
	}
}
