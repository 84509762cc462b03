package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// freePort returns host:port of a TCP port free on host a moment ago.
func freePort(t *testing.T, host string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Skipf("%s: %v", host, err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type result struct {
	code     int
	out, err string
}

// bothSucceeded checks that publish p and mirror m exited 0 and returns
// what they printed as json: publish's summary and the mirror's rows.
func bothSucceeded(t *testing.T, p, m result) (publishSummary, []mirrorRow) {
	t.Helper()
	if p.code != 0 || m.code != 0 {
		t.Fatalf("publish exit %d: %s\nmirror exit %d: %s", p.code, p.err, m.code, m.err)
	}
	var sum publishSummary
	var rows []mirrorRow
	if err := json.Unmarshal([]byte(p.out), &sum); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(m.out), &rows); err != nil {
		t.Fatal(err)
	}
	return sum, rows
}

// start runs the command in the background.
func start(t *testing.T, args ...string) <-chan result {
	done := make(chan result, 1)
	go func() {
		code, out, errOut := runArgs(t, args...)
		done <- result{code, out, errOut}
	}()
	return done
}

// TestPublishMirrorEitherSideBinds links publish and mirror both ways on
// one interface: the mirror binds ::1 (whose "::" once made a mirror bind
// where it was told to connect, and now only -bind does) and the publisher
// connects; then the publisher binds 127.0.0.1 and the mirror connects;
// then the mirror binds first with a replay endpoint, as a router that
// binds starts before its engines, and its request at start finds no
// replay socket yet. Every batch arrives, none missed, and both exit 0.
func TestPublishMirrorEitherSideBinds(t *testing.T) {
	for _, tc := range []struct {
		name, host          string
		mirrorBinds, replay bool
	}{{"mirror binds ::1", "::1", true, false}, {"publish binds 127.0.0.1", "127.0.0.1", false, false},
		{"mirror binds first, with replay", "127.0.0.1", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := "tcp://" + freePort(t, tc.host)
			mirrorSide, publishSide := []string{"-connect", addr}, []string{"-bind", addr}
			if tc.mirrorBinds {
				mirrorSide, publishSide = []string{"-bind", addr}, []string{"-connect", addr}
			}
			if tc.replay {
				replay := "tcp://" + freePort(t, tc.host)
				mirrorSide, publishSide = append(mirrorSide, "-replay-connect", replay), append(publishSide, "-replay-bind", replay)
			}
			mirrorArgs := append([]string{"mirror", "-duration", "4s", "-format", "json"}, mirrorSide...)
			publishArgs := append([]string{"publish", "-trace", excerpt, "-capacity", "200", "-block-size", "4", "-format", "json"}, publishSide...)
			var mirrored, published <-chan result
			if tc.mirrorBinds {
				mirrored = start(t, mirrorArgs...)
				time.Sleep(200 * time.Millisecond) // the mirror's socket is up
				published = start(t, publishArgs...)
			} else {
				published = start(t, publishArgs...)
				time.Sleep(200 * time.Millisecond)
				mirrored = start(t, mirrorArgs...)
			}
			p, m := <-published, <-mirrored
			sum, rows := bothSucceeded(t, p, m)
			if len(rows) != 1 || rows[0].Batches != sum.Batches || rows[0].MissedBatches != 0 || rows[0].ResidentBlocks != sum.ResidentBlocks || sum.Connections != 1 {
				t.Errorf("published %+v; mirrored %+v", sum, rows)
			}
		})
	}
}

// TestPublishToNobody: a publish that no subscriber heard fails, and says
// why: nothing bound where it connects (and which side must bind), a host
// that does not resolve, or nobody connected where it binds. With
// -require-subscribers 0 it is a success.
func TestPublishToNobody(t *testing.T) {
	run := []string{"publish", "-trace", excerpt, "-capacity", "100", "-block-size", "1", "-warmup", "0s", "-linger", "0s"}
	nobody := "tcp://" + freePort(t, "127.0.0.1")
	for _, tc := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"-connect", nobody}, 1, []string{"0 subscribers received batches", "refused", "needs a subscriber that binds"}},
		{[]string{"-connect", "tcp://nosuchhost.invalid:5557"}, 1, []string{"0 subscribers received batches", "nosuchhost.invalid"}},
		{[]string{"-bind", "tcp://127.0.0.1:0"}, 1, []string{"0 subscribers received batches", "-require-subscribers 1"}},
		{[]string{"-bind", "tcp://127.0.0.1:0", "-require-subscribers", "0"}, 0, nil},
	} {
		code, out, errOut := runArgs(t, append(run, tc.args...)...)
		if code != tc.code || !strings.Contains(out, "batches") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d and the summary", tc.args, code, out, errOut, tc.code)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr %q lacks %q", tc.args, errOut, w)
			}
		}
	}
}

// TestMirrorLateJoiner runs publish on the conversation trace, as
// docs/kvevents.md does (-warmup 0s, the default linger), and a mirror
// that joins 1.5 s after it started, as separate processes. The mirror
// never reports success on partial state: it exits 0 only holding every
// batch the publisher published (before -duration ended it, on a machine
// too slow to publish the trace in its 12 s), none missed; with the default replay
// buffer (10,000 batches, more than were published when it joined) it
// misses none; with a buffer of 1,000 it misses only batches the buffer
// no longer held, and exits 1 naming them. A replay answer that the
// linger cut (a mirror slower than the machine lets it be) exits 1 too,
// and is reported; the catch-up itself is TestLateJoinerCatchesUp's.
func TestMirrorLateJoiner(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole conversation trace")
	}
	trace := "../../../shared/traces/mooncake_conversation.jsonl"
	if _, err := os.Stat(trace); err != nil {
		t.Skipf("no conversation trace: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "kvevict")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	failed := regexp.MustCompile(`[1-9][0-9]* replay requests failed`)
	unapplied := regexp.MustCompile(`[1-9][0-9]* received but not applied`)
	for _, tc := range []struct {
		name   string
		buffer int
	}{{"whole buffer", 10_000}, {"short buffer", 1_000}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pubAddr, replay := "ipc://"+filepath.Join(dir, "kv.ipc"), "ipc://"+filepath.Join(dir, "replay.ipc")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pub := exec.CommandContext(ctx, bin, "publish", "-bind", pubAddr, "-replay-bind", replay,
				"-replay-buffer", strconv.Itoa(tc.buffer), "-trace", trace, "-capacity", "2500", "-topic", "kv@pod-0@m",
				"-warmup", "0s", "-format", "json")
			var pubOut, pubErr bytes.Buffer
			pub.Stdout, pub.Stderr = &pubOut, &pubErr
			if err := pub.Start(); err != nil {
				t.Fatal(err)
			}
			published := make(chan error, 1)
			var pubEnd time.Time // written before the send on published, read after it
			go func() {
				err := pub.Wait()
				pubEnd = time.Now()
				published <- err
			}()
			select {
			case err := <-published:
				t.Skipf("publish ended before the late joiner came (%v): this machine publishes the trace in under 1.5 s", err)
			case <-time.After(1500 * time.Millisecond):
			}
			mir := exec.CommandContext(ctx, bin, "mirror", "-connect", pubAddr, "-replay-connect", replay,
				"-duration", "12s", "-capacity", "2500", "-format", "json")
			var mirOut, mirErr bytes.Buffer
			mir.Stdout, mir.Stderr = &mirOut, &mirErr
			mirErrc := mir.Run()
			mirEnd := time.Now()
			// publish fails when the mirror did not take every batch
			// within its linger (a mirror slower than the machine lets it
			// be), and says so; the mirror's own outcome is checked below.
			if err := <-published; err != nil && !strings.Contains(pubErr.String(), "lost some") {
				t.Fatalf("publish: %v\n%s", err, pubErr.String())
			}
			var sum publishSummary
			if err := json.Unmarshal(pubOut.Bytes(), &sum); err != nil {
				t.Fatalf("publish's summary %q: %v", pubOut.String(), err)
			}
			var rows []mirrorRow
			if err := json.Unmarshal(mirOut.Bytes(), &rows); err != nil || len(rows) != 1 {
				t.Fatalf("mirror (%v) printed %q: %v\nstderr: %s", mirErrc, mirOut.String(), err, mirErr.String())
			}
			r := rows[0]
			t.Logf("mirror: exit %v, %d batches, %d missed of %d published\n%s", mirErrc, r.Batches, r.MissedBatches, sum.Batches, mirErr.String())
			if failed.MatchString(mirErr.String()) {
				if mirErrc == nil {
					t.Errorf("replay failed, yet the mirror exited 0")
				}
				t.Logf("a replay answer was cut: the mirror could not catch up within the publisher's linger on this machine")
				return
			}
			if unapplied.MatchString(mirErr.String()) {
				// Slower than -duration on this machine: a partial state,
				// which the mirror must not report as complete.
				if mirErrc == nil {
					t.Errorf("batches were left unapplied, yet the mirror exited 0")
				}
				t.Logf("the mirror had not applied every batch when -duration ended on this machine")
				return
			}
			if pubEnd.After(mirEnd) && r.Batches+r.MissedBatches < sum.Batches {
				// Slower than -duration on this machine, as above, but
				// at the publisher: it was still publishing, or holding
				// what it had queued for the mirror, when the mirror
				// stopped, and what the mirror never received was never
				// its to miss. Misses it did see must still fail it.
				if r.MissedBatches > 0 && mirErrc == nil {
					t.Errorf("missed %d batches, yet the mirror exited 0", r.MissedBatches)
				}
				t.Logf("publish ran past the mirror's -duration on this machine")
				return
			}
			if r.Batches+r.MissedBatches != sum.Batches {
				t.Errorf("mirror applied %d and missed %d of %d batches", r.Batches, r.MissedBatches, sum.Batches)
			}
			if r.MissedBatches == 0 {
				if mirErrc != nil || r.ResidentBlocks != sum.ResidentBlocks {
					t.Errorf("none missed, yet exit %v and %d blocks resident of the publisher's %d", mirErrc, r.ResidentBlocks, sum.ResidentBlocks)
				}
				return
			}
			if tc.buffer == 10_000 {
				t.Errorf("missed %d batches, which the buffer of 10,000 still held when the mirror joined", r.MissedBatches)
			}
			if r.MissedBatches > sum.Batches-int64(tc.buffer) {
				t.Errorf("missed %d batches, more than the %d the buffer ever dropped", r.MissedBatches, sum.Batches-int64(tc.buffer))
			}
			m := regexp.MustCompile(`partial state: (\d+) batches missed`).FindStringSubmatch(mirErr.String())
			if mirErrc == nil || m == nil || m[1] != strconv.FormatInt(r.MissedBatches, 10) {
				t.Errorf("missed %d, exit %v; want exit 1 naming them", r.MissedBatches, mirErrc)
			}
		})
	}
}
