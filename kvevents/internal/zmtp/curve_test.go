package zmtp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/nacl/box"
)

// Z85's test vector (RFC 32): the bytes 86 4F D2 6F B5 59 F7 5B are
// "HelloWorld"; and what is not Z85 is refused.
func TestZ85(t *testing.T) {
	b, _ := hex.DecodeString("864FD26FB559F75B")
	if got := z85Encode(b); got != "HelloWorld" {
		t.Errorf("encode: %q, want HelloWorld", got)
	}
	if got, err := z85Decode("HelloWorld"); err != nil || !bytes.Equal(got, b) {
		t.Errorf("decode: %x, %v; want %x", got, err, b)
	}
	for _, bad := range []string{"HelloWorl", "Hello Worl", "Hello\x00orl", "Hello\xffxxxx", "#####"} {
		if got, err := z85Decode(bad); err == nil {
			t.Errorf("decode %q: %x, want an error", bad, got)
		}
	}
	if got, err := z85Decode("%nSc0"); err != nil || !bytes.Equal(got, []byte{0xFF, 0xFF, 0xFF, 0xFF}) {
		t.Errorf(`decode "%%nSc0": %x, %v; want ffffffff, the largest group`, got, err)
	}
	if _, err := ParseKey("HelloWorld"); err == nil {
		t.Error("a key of 10 characters was taken")
	}
}

// newKeys returns a fresh secret key and its public key.
func newKeys(t *testing.T) (secret, public Key) {
	t.Helper()
	pub, sec, err := box.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if Key(*sec).Public() != Key(*pub) {
		t.Fatal("Public does not give the public key of a secret key")
	}
	return Key(*sec), Key(*pub)
}

// curveLink is a listening CURVE Pub whose server key is serverSec, and a
// Sub that dials it with the curve given; it returns the Sub's Dial error
// and the Pub's violations.
func curveLink(t *testing.T, server *Curve, client *Curve) (*Pub, *Sub, violations, error) {
	t.Helper()
	v := make(violations, 8)
	p := NewPub(PubOptions{Curve: server, OnViolation: v.report, Heartbeat: Heartbeat{Interval: 20 * time.Millisecond, Timeout: time.Second}})
	t.Cleanup(func() { p.Close(0) })
	if err := p.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s := NewSub(SubOptions{Curve: client, DialWait: time.Second, Heartbeat: Heartbeat{Interval: 20 * time.Millisecond, Timeout: time.Second}})
	t.Cleanup(func() { s.Close() })
	s.Subscribe("")
	return p, s, v, s.Dial("tcp://" + p.Addr().String())
}

// Our CURVE client and server: messages of every size go through boxed,
// heartbeats and subscriptions (commands, boxed too) keep the link up, and
// what travels on the wire carries none of the message's bytes in clear.
func TestCurveLink(t *testing.T) {
	noLeaks(t)
	serverSec, serverPub := newKeys(t)
	clientSec, clientPub := newKeys(t)
	p, s, v, err := curveLink(t, &Curve{Secret: serverSec, Clients: []Key{clientPub}}, &Curve{Secret: clientSec, Server: serverPub})
	if err != nil {
		t.Fatal(err)
	}
	ctx := timeout(t, 10*time.Second)
	if err := p.WaitSubscribers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	secret := bytes.Repeat([]byte("plaintext!"), 30)
	sizes := []int{0, 1, 200, 300, 70 << 10, 1 << 20}
	for i, n := range sizes {
		if err := p.Send([][]byte{[]byte("kv"), seq(i), bytes.Repeat(secret, n/len(secret)+1)[:n]}); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range sizes {
		m, err := s.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(m) != 3 || string(m[0]) != "kv" || !bytes.Equal(m[1], seq(i)) || len(m[2]) != n {
			t.Fatalf("message %d: %d frames, %q, %x, %d bytes", i, len(m), m[0], m[1], len(m[2]))
		}
	}
	time.Sleep(100 * time.Millisecond) // a few heartbeats each way
	if err := p.Send([][]byte{[]byte("kv"), seq(99), nil}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(ctx); err != nil {
		t.Fatal(err)
	}
	v.none(t)
	if r := p.Refusals(); r != (Refusals{}) {
		t.Errorf("refusals %+v", r)
	}
}

// A connection's wire, seen by a tap: under CURVE it never carries a
// message's bytes in clear.
func TestCurveWireIsBoxed(t *testing.T) {
	noLeaks(t)
	serverSec, serverPub := newKeys(t)
	clientSec, _ := newKeys(t)
	srv := NewServer(ServerOptions{Curve: &Curve{Secret: serverSec}}, echo)
	defer srv.Close()
	if err := srv.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	tap := newTap(t, srv.Addr().String())
	c, err := Dial(timeout(t, 3*time.Second), "tcp://"+tap.addr, Dealer, []byte("identity-in-clear?"), Limits{}, &Curve{Secret: clientSec, Server: serverPub})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	secret := []byte("a topic no eavesdropper reads")
	if err := c.WriteMsg([][]byte{nil, secret}); err != nil {
		t.Fatal(err)
	}
	if m, err := c.ReadMsg(); err != nil || !bytes.Equal(m[1], secret) {
		t.Fatalf("echo: %q, %v", m, err)
	}
	c.Close()
	for _, seen := range tap.bytes() {
		for _, clear := range [][]byte{secret, []byte("identity-in-clear?"), []byte("Socket-Type"), []byte("DEALER")} {
			if bytes.Contains(seen, clear) {
				t.Errorf("%q went in clear", clear)
			}
		}
	}
}

// echo writes back every message its client sends.
func echo(c *Conn) {
	for {
		m, err := c.ReadMsg()
		if err != nil || c.WriteMsg(m) != nil {
			return
		}
	}
}

// tap relays one TCP connection to addr and keeps what goes each way.
type tapRelay struct {
	addr string
	done chan struct{}
	got  [2]bytes.Buffer
}

func newTap(t *testing.T, to string) *tapRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &tapRelay{addr: ln.Addr().String(), done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		defer ln.Close()
		a, err := ln.Accept()
		if err != nil {
			return
		}
		defer a.Close()
		b, err := net.Dial("tcp", to)
		if err != nil {
			return
		}
		defer b.Close()
		half := make(chan struct{}, 2)
		copyTo := func(w, r net.Conn, keep *bytes.Buffer) {
			buf := make([]byte, 4096)
			for {
				n, err := r.Read(buf)
				keep.Write(buf[:n])
				if _, werr := w.Write(buf[:n]); err != nil || werr != nil {
					break
				}
			}
			w.Close()
			r.Close()
			half <- struct{}{}
		}
		go copyTo(b, a, &tr.got[0])
		go copyTo(a, b, &tr.got[1])
		<-half
		<-half
	}()
	t.Cleanup(func() { ln.Close(); <-tr.done })
	return tr
}

// bytes returns what went each way, once the relay is done.
func (tr *tapRelay) bytes() [][]byte {
	<-tr.done
	return [][]byte{tr.got[0].Bytes(), tr.got[1].Bytes()}
}

// A client given another key for the server, and a client whose key the
// server does not admit, fail the handshake on both sides, each side's
// error saying why; so does a client of the NULL mechanism.
func TestCurveRefusals(t *testing.T) {
	noLeaks(t)
	serverSec, serverPub := newKeys(t)
	clientSec, clientPub := newKeys(t)
	strangerSec, _ := newKeys(t)
	_, otherPub := newKeys(t)
	server := &Curve{Secret: serverSec, Clients: []Key{clientPub}}

	_, _, v, err := curveLink(t, server, &Curve{Secret: clientSec, Server: otherPub})
	if err == nil || !strings.Contains(err.Error(), "closed the connection after our HELLO") || !strings.Contains(err.Error(), "not the server's") {
		t.Errorf("a client with another server key: %v", err)
	}
	v.want(t, ErrProtocol)

	p, _, v, err := curveLink(t, server, &Curve{Secret: strangerSec, Server: serverPub})
	if err == nil || !strings.Contains(err.Error(), `ERROR "400"`) || !strings.Contains(err.Error(), "does not admit our public key") {
		t.Errorf("a client the server does not admit: %v", err)
	}
	v.want(t, ErrNotAllowed)
	if r := p.Refusals(); r.UnknownKeys == 0 {
		t.Errorf("refusals %+v, want unknown keys counted", r)
	}

	_, _, v, err = curveLink(t, server, nil)
	if err == nil || !strings.Contains(err.Error(), `"CURVE", want NULL`) {
		t.Errorf("a NULL client of a CURVE server: %v", err)
	}
	v.want(t, ErrProtocol)

	// And the other way: a CURVE client of a NULL server names it too.
	_, _, _, err = curveLink(t, nil, &Curve{Secret: clientSec, Server: serverPub})
	if err == nil || !strings.Contains(err.Error(), `"NULL", want CURVE`) {
		t.Errorf("a CURVE client of a NULL server: %v", err)
	}

	if _, err := Dial(context.Background(), "tcp://127.0.0.1:1", Dealer, nil, Limits{}, &Curve{Secret: clientSec}); err == nil || !strings.Contains(err.Error(), "no server key") {
		t.Errorf("a CURVE client without a server key: %v", err)
	}
	if err := NewSub(SubOptions{Curve: &Curve{}}).Listen("tcp://127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "secret key") {
		t.Errorf("a CURVE server without a secret key: %v", err)
	}
}

// Past the handshake, a MESSAGE whose nonce does not follow the last one
// (a replay), and one whose box was changed on the way, close the
// connection as violations.
func TestCurveReplayedAndForged(t *testing.T) {
	noLeaks(t)
	serverSec, serverPub := newKeys(t)
	clientSec, _ := newKeys(t)
	for _, tc := range []struct {
		name   string
		mangle func(c *Conn)
		want   string
	}{
		{"replayed nonce", func(c *Conn) { c.cs.sent-- }, "does not follow"},
		{"nonce gone back", func(c *Conn) { c.cs.sent = 1 }, "does not follow"},
		{"forged box", func(c *Conn) {
			c.cs.key[0] ^= 1 // what the server opens with differs from what sealed it: as a byte changed on the way
		}, "does not open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := make(violations, 8)
			srv := NewServer(ServerOptions{Curve: &Curve{Secret: serverSec}, OnViolation: v.report}, echo)
			defer srv.Close()
			if err := srv.Listen("tcp://127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			c, err := Dial(timeout(t, 3*time.Second), "tcp://"+srv.Addr().String(), Dealer, nil, Limits{}, &Curve{Secret: clientSec, Server: serverPub})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.WriteMsg([][]byte{nil, []byte("first")}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.ReadMsg(); err != nil {
				t.Fatal(err)
			}
			tc.mangle(c)
			c.WriteMsg([][]byte{nil, []byte("second")})
			c.SetDeadline(time.Now().Add(2 * time.Second))
			if m, err := c.ReadMsg(); err == nil {
				t.Fatalf("the server answered %q", m)
			}
			select {
			case err := <-v:
				if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("violation %v, want %q", err, tc.want)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("no violation reported")
			}
		})
	}
}

// keyFile reads the one Z85 key of a file that curve.py wrote.
func keyFile(t *testing.T, path string) Key {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParseKey(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return k
}

// curveKeys has libzmq make the server, client and stranger keypairs in
// a directory and returns it; the test skips without a python3 that
// imports zmq and has CURVE.
func curveKeys(t *testing.T) (py, dir string) {
	t.Helper()
	py = libzmqPython()
	if py == "" {
		t.Skip("no python3 imports zmq (Debian: python3-zmq)")
	}
	if out, err := exec.Command(py, "-c", "import zmq, sys; sys.exit(not zmq.has('curve'))").CombinedOutput(); err != nil {
		t.Skipf("libzmq without CURVE: %v %s", err, out)
	}
	dir = t.TempDir()
	if out, err := exec.Command(py, filepath.Join("testdata", "curve.py"), "keys", dir).CombinedOutput(); err != nil {
		t.Fatalf("curve.py keys: %v: %s", err, out)
	}
	// Our public key of libzmq's secret key is libzmq's public key.
	for _, name := range []string{"server", "client", "stranger"} {
		if sec, pub := keyFile(t, filepath.Join(dir, name+".key")), keyFile(t, filepath.Join(dir, name+".pub")); sec.Public() != pub {
			t.Fatalf("%s: our public key of libzmq's secret key is %s, libzmq's is %s", name, sec.Public().Z85(), pub.Z85())
		}
	}
	return py, dir
}

// curvePy runs curve.py with args and returns its stdout as it comes and
// the channel of its end.
func curvePy(ctx context.Context, t *testing.T, py string, args ...string) (*bufio.Reader, <-chan error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, py, append([]string{filepath.Join("testdata", "curve.py")}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		if err != nil {
			err = errors.Join(err, errors.New(stderr.String()))
		}
		done <- err
	}()
	return r, done
}

// libzmq's CURVE server (a pyzmq XPUB) to our Sub, the client, with keys
// libzmq made; and our Sub given a wrong server key fails, saying why.
func TestCurveFromLibzmq(t *testing.T) {
	py, dir := curveKeys(t)
	noLeaks(t)
	ctx := timeout(t, 20*time.Second)
	out, done := curvePy(ctx, t, py, "pub", dir, "100")
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("curve.py pub: %v, %v", err, <-done)
	}
	endpoint := strings.TrimSpace(line)

	wrong := NewSub(SubOptions{Curve: &Curve{Secret: keyFile(t, dir+"/client.key"), Server: keyFile(t, dir+"/stranger.pub")}, DialWait: time.Second})
	err = wrong.Dial(endpoint)
	wrong.Close()
	if err == nil || !strings.Contains(err.Error(), "closed the connection after our HELLO") {
		t.Errorf("a wrong server key for libzmq: %v", err)
	}

	s := NewSub(SubOptions{Curve: &Curve{Secret: keyFile(t, dir+"/client.key"), Server: keyFile(t, dir+"/server.pub")}})
	defer s.Close()
	s.Subscribe("")
	if err := s.Dial(endpoint); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		m, err := s.Recv(ctx)
		if err != nil {
			t.Fatalf("message %d: %v (curve.py: %v)", i, err, <-done)
		}
		if len(m) != 3 || !bytes.Equal(m[1], seq(i)) || len(m[2]) != 100 {
			t.Fatalf("message %d: %q", i, m)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Our CURVE server to libzmq's clients: a pyzmq SUB answers our PINGs and
// gets every message of our Pub, a pyzmq DEALER its answer from our Server
// (the replay socket's kind); a client whose key our Pub does not admit, and one given another
// server key, fail on both sides: libzmq's monitor reports the handshake
// failed, and our side counts and reports it.
func TestCurveToLibzmq(t *testing.T) {
	py, dir := curveKeys(t)
	noLeaks(t)
	ctx := timeout(t, 30*time.Second)
	v := make(violations, 8)
	p := NewPub(PubOptions{Curve: &Curve{Secret: keyFile(t, dir+"/server.key"), Clients: []Key{keyFile(t, dir+"/client.pub")}}, OnViolation: v.report,
		Heartbeat: Heartbeat{Interval: 50 * time.Millisecond, Timeout: time.Second}})
	defer p.Close(time.Second)
	if err := p.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	endpoint := "tcp://" + p.Addr().String()

	out, done := curvePy(ctx, t, py, "sub", endpoint, dir, "stranger", "1")
	line, _ := out.ReadString('\n')
	if err := <-done; err == nil || strings.TrimSpace(line) != "failed auth 400" {
		t.Errorf("libzmq, a client whose key is not admitted: %q, %v; want the handshake failed with 400", line, err)
	}
	v.want(t, ErrNotAllowed)
	if r := p.Refusals(); r.UnknownKeys == 0 {
		t.Errorf("refusals %+v, want the stranger's key counted", r)
	}

	out, done = curvePy(ctx, t, py, "sub", endpoint, dir, "client", "100")
	if line, _ := out.ReadString('\n'); strings.TrimSpace(line) != "succeeded" {
		t.Fatalf("libzmq's handshake: %q, %v", line, <-done)
	}
	if err := p.WaitSubscribers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// Past the heartbeat timeout: libzmq took our boxed PINGs and
	// answered them, or it would be gone.
	time.Sleep(1500 * time.Millisecond)
	if r := p.Refusals(); r.Silent != 0 || p.Subscribers() != 1 {
		t.Fatalf("libzmq's subscriber was dropped for silence: %+v", r)
	}
	for i := range 100 {
		if err := p.Send([][]byte{[]byte("kv"), seq(i), []byte("payload")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	srv := NewServer(ServerOptions{Curve: &Curve{Secret: keyFile(t, dir+"/server.key")}, OnViolation: v.report}, echo)
	defer srv.Close()
	if err := srv.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	out, done = curvePy(ctx, t, py, "dealer", "tcp://"+srv.Addr().String(), dir, "client")
	line, _ = out.ReadString('\n')
	if err := <-done; err != nil || strings.TrimSpace(line) != "succeeded" {
		t.Fatalf("libzmq's DEALER: %q, %v", line, err)
	}

	// A libzmq client given another key for the server: we report its
	// HELLO and close, as libzmq's server does, and libzmq sees the
	// connection end in its handshake.
	if err := os.WriteFile(dir+"/server.pub", []byte(keyFile(t, dir+"/stranger.pub").Z85()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, done = curvePy(ctx, t, py, "dealer", "tcp://"+srv.Addr().String(), dir, "client")
	line, _ = out.ReadString('\n')
	if err := <-done; err == nil || strings.TrimSpace(line) != "disconnected" {
		t.Errorf("libzmq's DEALER with another server key: %q, %v; want it disconnected in its handshake", line, err)
	}
	v.want(t, ErrProtocol)
}
