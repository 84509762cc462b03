//go:build unix

package zmtp

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A libzmq publisher (pyzmq) answers our PINGs while it runs, and is
// dropped once SIGSTOPped: a frozen engine is noticed.
func TestHeartbeatFrozenLibzmq(t *testing.T) {
	py := libzmqPython()
	if py == "" {
		t.Skip("no python3 imports zmq (Debian: python3-zmq)")
	}
	noLeaks(t)
	hb := Heartbeat{Interval: 50 * time.Millisecond, Timeout: 500 * time.Millisecond}
	s := NewSub(SubOptions{Heartbeat: hb})
	defer s.Close()
	if err := s.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s.Subscribe("")
	ctx := timeout(t, 10*time.Second)
	cmd := exec.CommandContext(ctx, py, filepath.Join("testdata", "xpub.py"), "tcp://"+s.Addr().String(), "1", "stay")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if _, err := s.Recv(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * hb.Timeout / 2) // long enough to be dropped, had it not answered
	if r := s.Refusals(); r.Silent != 0 {
		t.Fatalf("a running libzmq publisher was dropped: %+v", r)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for s.Refusals().Silent == 0 {
		if time.Since(start) > 5*hb.Timeout {
			t.Fatalf("the frozen publisher was kept for %v", time.Since(start))
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("the frozen publisher was dropped after %v", time.Since(start))
}
