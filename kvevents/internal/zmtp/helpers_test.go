package zmtp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// noLeaks fails t if goroutines started during the test are still running
// a little after it ends.
func noLeaks(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				var b strings.Builder
				pprof.Lookup("goroutine").WriteTo(&b, 1)
				t.Errorf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), b.String())
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// violations collects what a socket reports to OnViolation.
type violations chan error

func (v violations) report(err error) {
	select {
	case v <- err:
	default:
	}
}

func (v violations) want(t *testing.T, kind error) {
	t.Helper()
	select {
	case err := <-v:
		if !errors.Is(err, kind) {
			t.Fatalf("violation %v, want %v", err, kind)
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("no violation, want %v", kind)
	}
}

func (v violations) none(t *testing.T) {
	t.Helper()
	select {
	case err := <-v:
		t.Fatalf("unexpected violation: %v", err)
	default:
	}
}

// rawGreeting is a ZMTP 3 greeting with the NULL mechanism, byte by byte
// as libzmq writes it (it puts 1 in the last padding byte).
func rawGreeting(minor byte) []byte {
	g := []byte{0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 3, minor}
	g = append(g, "NULL"...)
	return append(g, make([]byte, 64-len(g))...) // rest of the mechanism, as-server 0, filler
}

// rawReady is a READY command with the Socket-Type property alone.
func rawReady(typ string) []byte {
	body := append([]byte("\x05READY\x0bSocket-Type"), 0, 0, 0, byte(len(typ)))
	body = append(body, typ...)
	return append([]byte{0x04, byte(len(body))}, body...)
}

// rawMsg encodes a message's frames.
func rawMsg(frames ...[]byte) []byte {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	writeMsg(w, frames)
	w.Flush()
	return b.Bytes()
}

// raw is a peer that speaks bytes: the tests write what a hostile or
// foreign peer would.
type raw struct {
	t  *testing.T
	nc net.Conn
	c  *Conn // to read what our side sends
}

func dialRaw(t *testing.T, addr net.Addr) *raw {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr.String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &raw{t: t, nc: nc, c: newConn(nc, Limits{}.withDefaults(), nil, "raw")}
}

func (r *raw) write(b ...[]byte) {
	r.t.Helper()
	r.nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
	if _, err := r.nc.Write(bytes.Join(b, nil)); err != nil {
		r.t.Fatal(err)
	}
}

// hello does a handshake as a typ socket announcing ZMTP 3.minor.
func (r *raw) hello(typ string, minor byte) {
	r.t.Helper()
	r.write(rawGreeting(minor), rawReady(typ))
	r.c.SetDeadline(time.Now().Add(2 * time.Second))
	g := make([]byte, 64)
	if _, err := io.ReadFull(r.c.r, g); err != nil {
		r.t.Fatal(err)
	}
	if _, cmd, _, err := r.c.next(); err != nil || cmd != "READY" {
		r.t.Fatalf("got %q, %v, want READY", cmd, err)
	}
}

// read returns our side's next message or command name.
func (r *raw) read() ([][]byte, string, []byte) {
	r.t.Helper()
	r.c.SetDeadline(time.Now().Add(2 * time.Second))
	m, cmd, data, err := r.c.next()
	if err != nil {
		r.t.Fatal(err)
	}
	return m, cmd, data
}

// waitPeers waits until s counts n peers past their handshake. A peer is
// counted just after its handshake, which a raw peer's hello sees end:
// a test that fills a limit waits for the count before the peer that
// must be refused, or that one could take a place first.
func waitPeers(t *testing.T, s *socket, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		peers := s.peers
		s.mu.Unlock()
		if peers == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d peers counted, want %d", peers, n)
		}
	}
}

// closed reports whether our side closed the connection within d.
func (r *raw) closed(d time.Duration) bool {
	r.nc.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, r.nc)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

func seq(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }

// fakeConn is a net.Conn that reads from a buffer and discards writes.
type fakeConn struct {
	r      io.Reader
	closed atomic.Bool
}

func (f *fakeConn) Read(b []byte) (int, error) {
	if f.closed.Load() {
		return 0, net.ErrClosed
	}
	return f.r.Read(b)
}
func (f *fakeConn) Write(b []byte) (int, error)      { return len(b), nil }
func (f *fakeConn) Close() error                     { f.closed.Store(true); return nil }
func (f *fakeConn) LocalAddr() net.Addr              { return nil }
func (f *fakeConn) RemoteAddr() net.Addr             { return nil }
func (f *fakeConn) SetDeadline(time.Time) error      { return nil }
func (f *fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (f *fakeConn) SetWriteDeadline(time.Time) error { return nil }
