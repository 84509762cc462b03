package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMirrorCommand feeds mirror, over TCP, frames a vLLM engine would send
// (written by hand, array encoding) for two topics, from a PUB socket that
// binds, as an engine's does, and sends once the mirror subscribed.
func TestMirrorCommand(t *testing.T) {
	c, done := rawPubForMirror(t, "-endpoint", "3s")
	stored := "98 ab426c6f636b53746f726564" // ["BlockStored", then 7 fields
	removed := "93 ac426c6f636b52656d6f766564"
	msgs := []struct {
		topic string
		seq   uint64
		hex   string
	}{
		// [1.0, [["BlockStored", [1, 2, 3], None, [], 16, None, "GPU", None]]]
		{"a", 0, "92 cb3ff0000000000000 91" + stored + "93010203 c0 90 10 c0 a3475055 c0"},
		// [1.0, [["BlockStored", [7], None, ...], ["BlockRemoved", [7], "GPU"]]]
		{"b", 0, "92 cb3ff0000000000000 92" + stored + "9107 c0 90 10 c0 a3475055 c0" + removed + "9107 a3475055"},
		// [1.0, [["BlockRemoved", [3], "GPU"], ["BlockStored", [4, 5], 2, ...]]]
		{"a", 1, "92 cb3ff0000000000000 92" + removed + "9103 a3475055" + stored + "920405 02 90 10 c0 a3475055 c0"},
		// sequence 1 of b is lost: [1.0, [["BlockStored", [8], None, ...]]]
		{"b", 2, "92 cb3ff0000000000000 91" + stored + "9108 c0 90 10 c0 a3475055 c0"},
	}
	for _, m := range msgs {
		payload, err := hex.DecodeString(strings.ReplaceAll(m.hex, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(frames([]byte(m.topic), seqFrame(m.seq), payload)); err != nil {
			t.Fatal(err)
		}
	}
	res := <-done
	// Sequence 1 of b was lost with no replay to fill it: the state is
	// partial, which the exit status says.
	if res.code != 1 || !strings.Contains(res.err, "partial state: 1 batches missed") {
		t.Fatalf("exit %d: %s; want 1 and the missed batch", res.code, res.err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(res.out), &rows); err != nil {
		t.Fatalf("%q: %v", res.out, err)
	}
	// a holds 1 2 4 5 (3 removed); b stored and removed 7, then 8 after a gap.
	want := `[map[batches:2 missed_batches:0 resident_blocks:4 resident_by_medium:map[GPU:4] restarts:0 topic:a] ` +
		`map[batches:2 missed_batches:1 resident_blocks:1 resident_by_medium:map[GPU:1] restarts:0 topic:b]]`
	if got := fmt.Sprint(rows); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestMirrorRestartWithoutReplay: a publisher that starts over (its
// sequence goes back to 0) is a restart, which a mirror without a replay
// endpoint follows from the first batch it hears and says so on stderr;
// nothing was missed, so it exits 0.
func TestMirrorRestartWithoutReplay(t *testing.T) {
	c, done := rawPubForMirror(t, "-connect", "2s")
	for _, m := range []struct {
		seq  uint64
		hash string
	}{{0, "01"}, {1, "02"}, {0, "03"}} { // the last from a new publisher
		if _, err := c.Write(frames([]byte("a"), seqFrame(m.seq), storeBatch(t, m.hash))); err != nil {
			t.Fatal(err)
		}
	}
	res := <-done
	var rows []mirrorRow
	if err := json.Unmarshal([]byte(res.out), &rows); err != nil {
		t.Fatalf("%q: %v", res.out, err)
	}
	if res.code != 0 || len(rows) != 1 || rows[0].Restarts != 1 || rows[0].ResidentBlocks != 1 || rows[0].MissedBatches != 0 ||
		!strings.Contains(res.err, "1 publisher restarts without -replay-connect") {
		t.Errorf("exit %d, rows %+v, stderr %q; want 0, one restart, the new publisher's one block, and the restart on stderr", res.code, rows, res.err)
	}
}

// rawPubForMirror runs kvevict mirror for duration, reaching a PUB socket
// of the test's own on 127.0.0.1 through flag (-endpoint or -connect), and
// returns that socket's connection (acceptMirror's) and the mirror's
// outcome to come.
func rawPubForMirror(t *testing.T, flag, duration string) (net.Conn, <-chan result) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	done := start(t, "mirror", flag, "tcp://"+ln.Addr().String(), "-duration", duration, "-format", "json")
	return acceptMirror(t, ln), done
}

// acceptMirror takes the connection of a mirror that connects to ln, does
// the handshake as a PUB socket, and returns the connection once the
// mirror subscribed to every topic. What the mirror sends after that is
// read and dropped.
func acceptMirror(t *testing.T, ln net.Listener) net.Conn {
	t.Helper()
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(socketTimeout))
	c, err := ln.Accept()
	if err != nil {
		t.Fatalf("mirror never connected: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(socketTimeout))
	if _, err := c.Write(handshake("PUB")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	if err := readGreeting(r); err != nil {
		t.Fatal(err)
	}
	if sub, err := readMsg(r); err != nil || len(sub) != 1 || string(sub[0]) != "\x01" {
		t.Fatalf("mirror's subscription %q, %v; want every topic", sub, err)
	}
	go io.Copy(io.Discard, r)
	return c
}

// storeBatch is a batch, as vLLM's array encoding writes it by hand, that
// stores the one block of hash h (msgpack, in hex):
// [1.0, [["BlockStored", [h], None, [], 16, None, "GPU", None]]].
func storeBatch(t *testing.T, h string) []byte {
	t.Helper()
	p, err := hex.DecodeString("92cb3ff000000000000091" + "98ab426c6f636b53746f726564" + "91" + h + "c09010c0a3475055c0")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMirrorHeardNothing: a mirror that no publisher reached knows nothing
// of any cache, and fails, -allow-gaps or not.
func TestMirrorHeardNothing(t *testing.T) {
	for _, extra := range [][]string{nil, {"-allow-gaps"}} {
		args := append([]string{"mirror", "-bind", "tcp://127.0.0.1:0", "-duration", "300ms", "-format", "json"}, extra...)
		code, out, errOut := runArgs(t, args...)
		if code != 1 || strings.TrimSpace(out) != "[]" || !strings.Contains(errOut, "no batch heard") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 1, no rows, and why", extra, code, out, errOut)
		}
	}
}

// TestMirrorSignals stops a mirror, in a child process, with SIGINT and
// SIGTERM after it applied three batches: it prints the state it holds,
// flagged partial, and exits 130 or 143, as a shell reports a command the
// signal ended.
func TestMirrorSignals(t *testing.T) {
	for _, tc := range []struct {
		sig  os.Signal
		code int
		said string
	}{{syscall.SIGINT, 130, "interrupted by SIGINT"}, {syscall.SIGTERM, 143, "terminated by SIGTERM"}} {
		t.Run(tc.said, func(t *testing.T) {
			t.Parallel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			mirror := startChild(t, "mirror", "-connect", "tcp://"+ln.Addr().String(), "-duration", "1m", "-format", "json")
			c := acceptMirror(t, ln)
			for seq, h := range []string{"01", "02", "03"} {
				if _, err := c.Write(frames([]byte("a"), seqFrame(uint64(seq)), storeBatch(t, h))); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(time.Second) // generous: the mirror applies them in microseconds
			res := mirror.signalUntilExit(tc.sig)
			var rows []mirrorRow
			if err := json.Unmarshal([]byte(res.out), &rows); err != nil {
				t.Fatalf("%q: %v", res.out, err)
			}
			if res.code != tc.code || !strings.Contains(res.err, tc.said) || len(rows) != 1 || !rows[0].Partial ||
				rows[0].Batches != 3 || rows[0].ResidentBlocks != 3 {
				t.Errorf("exit %d, stderr %q, rows %+v; want %d, %q, and the three batches flagged partial", res.code, res.err, rows, tc.code, tc.said)
			}
		})
	}
}
