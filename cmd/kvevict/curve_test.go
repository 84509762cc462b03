package main

import (
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sagellm/kvevict/kvevents"
)

// curveKeyFiles writes the server, client and stranger keypairs into a
// directory, as NAME.key (secret) and NAME.pub (public): made by libzmq
// (pyzmq's zmq.curve_keypair) when python3-zmq is there, by us otherwise.
func curveKeyFiles(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if path, err := exec.LookPath(py); err == nil && exec.Command(path, "-c", "import zmq, sys; sys.exit(not zmq.has('curve'))").Run() == nil {
			if out, err := exec.Command(path, "../../kvevents/internal/zmtp/testdata/curve.py", "keys", dir).CombinedOutput(); err != nil {
				t.Fatalf("curve.py keys: %v: %s", err, out)
			}
			t.Log("keys made by libzmq")
			return dir
		}
	}
	for _, name := range []string{"server", "client", "stranger"} {
		var k kvevents.CurveKey
		rand.Read(k[:])
		os.WriteFile(filepath.Join(dir, name+".key"), []byte(k.Z85()+"\n"), 0o600)
		os.WriteFile(filepath.Join(dir, name+".pub"), []byte("# "+name+"\n"+k.Public().Z85()+"\n"), 0o644)
	}
	return dir
}

// TestCurveFlags: publish binds its PUB and replay sockets as the CURVE
// server and admits one client key; a mirror with that key connects to
// both, catches up by replay and mirrors every batch; a mirror with
// another key, and one given another server key, hear nothing and say
// why. Flags that cannot work are refused by name.
func TestCurveFlags(t *testing.T) {
	dir := curveKeyFiles(t)
	key := func(name string) string { return filepath.Join(dir, name) }
	bad := filepath.Join(dir, "bad.key")
	os.WriteFile(bad, []byte("not a key\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mirror", "-connect", "tcp://127.0.0.1:1", "-duration", "1s", "-curve-server-key", key("server.pub")}, "need -curve-secret"},
		{[]string{"mirror", "-connect", "tcp://127.0.0.1:1", "-duration", "1s", "-curve-secret", key("client.key")}, "needs -curve-server-key"},
		{[]string{"mirror", "-bind", "tcp://127.0.0.1:0", "-duration", "1s", "-curve-secret", key("client.key"), "-curve-server-key", key("server.pub")}, "no socket connects here"},
		{[]string{"mirror", "-connect", "tcp://127.0.0.1:1", "-duration", "1s", "-curve-secret", key("client.key"), "-curve-server-key", key("server.pub"), "-curve-clients", key("client.pub")}, "no socket binds here"},
		{[]string{"mirror", "-bind", "tcp://127.0.0.1:0", "-duration", "1s", "-curve-secret", bad}, "bad.key: line 1"},
		{[]string{"mirror", "-bind", "tcp://127.0.0.1:0", "-duration", "1s", "-curve-secret", key("missing.key")}, "missing.key"},
		{[]string{"publish", "-bind", "tcp://127.0.0.1:0", "-trace", excerpt, "-capacity", "10", "-curve-secret", key("server.key"), "-curve-server-key", key("client.pub")}, "no socket connects here"},
	} {
		code, _, errOut := runArgs(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}

	addr, replay := "tcp://"+freePort(t, "127.0.0.1"), "tcp://"+freePort(t, "127.0.0.1")
	published := start(t, "publish", "-bind", addr, "-replay-bind", replay, "-trace", excerpt, "-capacity", "200", "-block-size", "4",
		"-warmup", "4s", "-format", "json", "-curve-secret", key("server.key"), "-curve-clients", key("client.pub"))
	// The strangers first, while publish waits: nothing reaches them.
	stranger := start(t, "mirror", "-connect", addr, "-duration", "1s", "-curve-secret", key("stranger.key"), "-curve-server-key", key("server.pub"))
	deceived := start(t, "mirror", "-connect", addr, "-duration", "1s", "-curve-secret", key("client.key"), "-curve-server-key", key("stranger.pub"))
	if r := <-stranger; r.code != 1 || !strings.Contains(r.err, "does not admit our public key") {
		t.Errorf("a mirror whose key publish does not admit: exit %d, stderr %q", r.code, r.err)
	}
	if r := <-deceived; r.code != 1 || !strings.Contains(r.err, "not the server's") {
		t.Errorf("a mirror given another server key: exit %d, stderr %q", r.code, r.err)
	}
	m := <-start(t, "mirror", "-connect", addr, "-replay-connect", replay, "-duration", "4s", "-format", "json",
		"-curve-secret", key("client.key"), "-curve-server-key", key("server.pub"))
	p := <-published
	sum, rows := bothSucceeded(t, p, m)
	if len(rows) != 1 || rows[0].Batches != sum.Batches || rows[0].MissedBatches != 0 || rows[0].ResidentBlocks != sum.ResidentBlocks {
		t.Errorf("published %+v; mirrored %+v", sum, rows)
	}
}
