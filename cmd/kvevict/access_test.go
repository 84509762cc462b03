package main

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestAllowFlag: -allow takes CIDR prefixes and bare addresses, refuses a
// malformed one by name and a command that binds nothing; a mirror that
// binds with -allow 127.0.0.1/32 mirrors a publisher from 127.0.0.1 while
// a peer from 127.0.0.5 is closed unheard and counted; a mirror from
// 127.0.0.1 that connects to a publisher allowing 127.0.0.5 alone is
// refused, and says why that may be.
func TestAllowFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mirror", "-bind", "tcp://127.0.0.1:0", "-duration", "1s", "-allow", "10.0.0.0/8,10.1.2.300/32"}, `"10.1.2.300/32" is neither a CIDR prefix`},
		{[]string{"mirror", "-bind", "tcp://127.0.0.1:0", "-duration", "1s", "-allow", "10.0.0.0/33"}, `"10.0.0.0/33"`},
		{[]string{"mirror", "-bind", "tcp://127.0.0.1:0", "-duration", "1s", "-allow", "localhost"}, `"localhost"`},
		{[]string{"mirror", "-connect", "tcp://127.0.0.1:1", "-duration", "1s", "-allow", "127.0.0.1"}, "binds none"},
		{[]string{"publish", "-connect", "tcp://127.0.0.1:1", "-trace", excerpt, "-capacity", "10", "-allow", "127.0.0.1"}, "binds none"},
	} {
		code, _, errOut := runArgs(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}

	addr := freePort(t, "127.0.0.1")
	mirrored := start(t, "mirror", "-bind", "tcp://"+addr, "-duration", "3s", "-allow", "::1, 127.0.0.1/32", "-format", "json")
	time.Sleep(200 * time.Millisecond) // the mirror's socket is up
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 5)}, Timeout: 2 * time.Second}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := io.Copy(io.Discard, nc); n != 0 || err != nil {
		t.Errorf("a peer from 127.0.0.5 read %d bytes, then %v; want the connection closed unheard", n, err)
	}
	nc.Close()
	p := <-start(t, "publish", "-connect", "tcp://"+addr, "-trace", excerpt, "-capacity", "200", "-block-size", "4", "-warmup", "200ms")
	m := <-mirrored
	if p.code != 0 || m.code != 0 || !strings.Contains(m.err, "1 refused") {
		t.Errorf("publish exit %d: %s\nmirror exit %d: %s; want 0, 0 and one peer refused", p.code, p.err, m.code, m.err)
	}

	pubAddr := "tcp://" + freePort(t, "127.0.0.1")
	published := start(t, "publish", "-bind", pubAddr, "-allow", "127.0.0.5", "-trace", excerpt, "-capacity", "200", "-block-size", "4",
		"-warmup", "3s", "-linger", "0s", "-require-subscribers", "0")
	time.Sleep(200 * time.Millisecond)
	code, _, errOut := runArgs(t, "mirror", "-connect", pubAddr, "-duration", "1s")
	if code != 1 || !strings.Contains(errOut, "does not allow our address") {
		t.Errorf("a mirror the publisher does not allow: exit %d, stderr %q; want 1 and the likely cause", code, errOut)
	}
	if p := <-published; p.code != 0 {
		t.Errorf("publish exit %d: %s", p.code, p.err)
	}
}
