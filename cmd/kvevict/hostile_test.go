package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sagellm/kvevict/kvevents"
)

// TestMirrorUnderAttack runs kvevict mirror, at its defaults, against a
// hostile publisher on 127.0.0.1 that, one connection after another (the
// mirror redials each time it drops one), sends every attack a router met:
// a frame header announcing 2^48 bytes; 12 topic frames announcing 100 MB;
// 100,000 distinct topics; 15 MB of tiny unknown events; a BlockStored of
// 1.5 million hashes into -capacity 1000; poisoned sequence numbers. The
// process must live, end within its -duration plus a few seconds, report
// the healthy topic's blocks, count what it skipped, and peak under 256 MB
// of resident memory.
func TestMirrorUnderAttack(t *testing.T) {
	if raceEnabled {
		t.Skip("measures the process's memory, which the race detector multiplies")
	}
	bin := filepath.Join(t.TempDir(), "kvevict")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	payload := func(b *kvevents.EventBatch) []byte {
		p, err := kvevents.Encode(b, kvevents.EncodingMixed)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	healthy := payload(&kvevents.EventBatch{Events: []kvevents.Event{
		&kvevents.BlockStored{BlockHashes: kvevents.IntHashes([]uint64{1, 2, 3}), TokenIDs: []int64{}, BlockSize: 16}}})
	unknown := append([]byte{0x92, 0x01, 0xdd}, binary.BigEndian.AppendUint32(nil, 5<<20)...)
	unknown = append(unknown, bytes.Repeat([]byte{0x91, 0xa1, 'x'}, 5<<20)...) // 15 MB of ["x"]
	many := make([]uint64, 1_500_000)
	for i := range many {
		many[i] = uint64(i) + 1<<40
	}
	big := payload(&kvevents.EventBatch{Events: []kvevents.Event{
		&kvevents.BlockStored{BlockHashes: kvevents.IntHashes(many), TokenIDs: []int64{}, BlockSize: 16}}})
	// A flood of new topics first: past the topic limit a new topic takes
	// the place of the one heard from least recently, so the engines that
	// speak after the flood are followed, never locked out.
	var topics bytes.Buffer
	for i := range 100_000 {
		topics.Write(frames([]byte(fmt.Sprint("topic-", i)), seqFrame(0), healthy))
	}
	attacks := [][]byte{
		topics.Bytes(),
		frames([]byte("healthy"), seqFrame(0), healthy),
		binary.BigEndian.AppendUint64([]byte{0x02}, 1<<48),
		frames([]byte("flood"), seqFrame(0), unknown),
		frames([]byte("big"), seqFrame(0), big),
		frames([]byte("healthy"), seqFrame(5), healthy, nil), // a frame too many
		bytes.Join([][]byte{
			frames([]byte("healthy"), seqFrame(1<<40), healthy),
			frames([]byte("healthy"), seqFrame(1<<63-1), healthy),
			frames([]byte("healthy"), seqFrame(1), healthy),
		}, nil),
	}
	for range 12 {
		attacks = append(attacks, binary.BigEndian.AppendUint64([]byte{0x03}, 100<<20))
	}

	const duration = 8 * time.Second
	// -allow-gaps: the forged sequence numbers below leave gaps that no
	// replay can fill, which a mirror otherwise reports by its exit code.
	cmd := exec.Command(bin, "mirror", "-endpoint", "tcp://"+ln.Addr().String(), "-duration", duration.String(), "-capacity", "1000", "-format", "json", "-allow-gaps")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	peakOf := watchPeak(cmd.Process.Pid)
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	go func() {
		for _, a := range attacks {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go io.Copy(io.Discard, c) // its greeting, READY and subscription
			c.Write(handshake("PUB"))
			c.Write(a)
			if ctx.Err() != nil {
				c.Close()
				return
			}
			// The mirror drops the connection after most attacks; after the
			// others, the next one comes on a new connection all the same.
			time.Sleep(300 * time.Millisecond)
			c.Close()
		}
	}()
	err = cmd.Wait()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("mirror: %v\nstderr: %s", err, stderr.String())
	}
	if took > duration+3*time.Second {
		t.Errorf("mirror ran %v for a -duration of %v", took, duration)
	}
	peak := peakOf()
	t.Logf("peak resident memory %d MB; ran %v", peak>>20, took)
	if peak > 256<<20 {
		t.Errorf("peak resident memory %d MB, want under 256", peak>>20)
	}
	var rows []mirrorRow
	if err := json.Unmarshal(stdout.Bytes(), &rows); err != nil {
		t.Fatalf("%q: %v", stdout.String(), err)
	}
	found := map[string]mirrorRow{}
	for _, r := range rows {
		found[r.Topic] = r
	}
	if len(rows) > kvevents.DefaultMaxTopics {
		t.Errorf("%d topics mirrored, limit %d", len(rows), kvevents.DefaultMaxTopics)
	}
	if h := found["healthy"]; h.ResidentBlocks != 3 || h.Batches != 2 {
		t.Errorf("healthy topic %+v, want 3 blocks from seqs 0 and 1", h)
	}
	if b := found["big"]; b.ResidentBlocks != 1000 {
		t.Errorf("a BlockStored of %d blocks into 1000: %+v", len(many), b)
	}
	if f := found["flood"]; f.Batches != 1 {
		t.Errorf("15 MB of unknown events: %+v, want one batch applied, its events skipped", f)
	}
	if !strings.Contains(stderr.String(), "skipped bad input") || !strings.Contains(stderr.String(), fmt.Sprint(5<<20, " unknown")) {
		t.Errorf("stderr %q: no count of what was skipped", stderr.String())
	}
	t.Logf("stderr:\n%s", stderr.String())
}

// TestPublishUnderSubscriptionFlood runs kvevict publish with -memory
// 128MiB while, in its warmup, 80 peers speaking ZMTP 3.0 as any ZeroMQ SUB
// does each send 1,024 subscriptions of 1,000 bytes: 82 MB together, the
// attack that took publish to 928 MB with 300 peers, scaled down. The
// subscriptions' share (4 MiB) closes every peer that would pass it, the
// process lives, and its peak resident memory stays within its budget.
func TestPublishUnderSubscriptionFlood(t *testing.T) {
	measuresMemory(t, "floods a publisher with 80 MB of subscriptions")
	const budget, peers, subs = 128 << 20, 80, 1024
	path := filepath.Join(t.TempDir(), "kv.ipc")
	c := startChild(t, "publish", "-bind", "ipc://"+path, "-trace", excerpt, "-capacity", "1000", "-warmup", "4s",
		"-linger", "0s", "-require-subscribers", "0", "-memory", fmt.Sprint(budget), "-format", "json")
	peakOf := watchPeak(c.cmd.Process.Pid)
	dialed := 0
	for deadline := time.Now().Add(3 * time.Second); dialed < peers && time.Now().Before(deadline); {
		nc, err := net.Dial("unix", path)
		if err != nil {
			time.Sleep(20 * time.Millisecond) // not bound yet
			continue
		}
		defer nc.Close()
		// One handshake at a time, done once the greeting and READY came
		// back: the budget leaves a few in their handshake at once.
		if _, err := nc.Write(handshake("SUB")); err != nil {
			continue
		}
		head := make([]byte, 64+2) // the greeting, and the header of its READY
		if _, err := io.ReadFull(nc, head); err != nil {
			continue
		}
		if _, err := io.ReadFull(nc, make([]byte, head[65])); err != nil {
			continue
		}
		dialed++
		go func(peer int) {
			defer io.Copy(io.Discard, nc)
			prefix := bytes.Repeat([]byte("x"), 1001)
			prefix[0] = 1 // subscribe
			for j := range subs {
				copy(prefix[1:], fmt.Sprintf("%d.%d.", peer, j))
				if _, err := nc.Write(frames(prefix)); err != nil {
					return // closed: publish refused it
				}
			}
		}(dialed)
	}
	res := c.wait()
	if res.code != 0 {
		t.Fatalf("publish exited %d: %s", res.code, res.err)
	}
	peak := peakOf()
	t.Logf("%d flooding peers; peak resident memory %d MB", dialed, peak>>20)
	if dialed < peers/2 {
		t.Errorf("only %d of %d peers connected", dialed, peers)
	}
	if peak > budget {
		t.Errorf("peak resident memory %d MB, want within the budget of %d MB", peak>>20, budget>>20)
	}
	if !strings.Contains(res.err, "subscriptions may take") {
		t.Errorf("stderr %q: no subscriber refused for its subscriptions", res.err)
	}
}

// measuresMemory skips a test that measures a process's memory under the
// race detector, which multiplies it, and under -short, since it is long
// for the reason why.
func measuresMemory(t *testing.T, why string) {
	t.Helper()
	if raceEnabled {
		t.Skip("measures the process's memory, which the race detector multiplies")
	}
	if testing.Short() {
		t.Skip(why)
	}
}

// watchPeak samples the peak resident memory of the running process pid,
// VmHWM in /proc/pid/status, every 10 ms, until the returned func is
// called once the process has exited; that returns the last sample, in
// bytes. Not the rusage of a child: a process forked from this test
// binary keeps, across its exec, the peak of the copy forked, which is
// this binary's memory and not the command's.
func watchPeak(pid int) (peak func() int64) {
	var last atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
						if n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(kb, "kB")), 10, 64); err == nil {
							last.Store(max(last.Load(), n<<10))
						}
					}
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		return last.Load()
	}
}

// TestPublishUnderIdleFlood runs kvevict publish with -memory 128MiB, a
// replay socket and a mirror from 127.0.0.1 while, from other addresses,
// 300 peers handshake as ZMTP 3.0 SUBs and then say nothing, 100 handshake
// with the replay socket as DEALERs and neither ask nor read, 64 from 64
// addresses trickle their greeting a byte at a time and connect again when
// closed, and 10 of ZMTP 3.1 flood PINGs and never read: the attacks that
// kept a libzmq SUB out of a publisher at 817 MB, held every replay slot,
// refused a libzmq SUB for 64 B/s and took one from 59 to 246 MB, scaled
// down. The mirror gets every batch (both exit 0),
// and publish's peak resident memory stays within its budget.
func TestPublishUnderIdleFlood(t *testing.T) {
	measuresMemory(t, "holds 470 hostile connections to a publisher")
	const budget = 128 << 20
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	replay := freePort(t, "127.0.0.1")
	c := startChild(t, "publish", "-bind", "tcp://"+addr, "-replay-bind", "tcp://"+replay, "-trace", excerpt, "-capacity", "1000",
		"-warmup", "5s", "-linger", "2s", "-require-subscribers", "1", "-memory", fmt.Sprint(budget), "-format", "json")
	peakOf := watchPeak(c.cmd.Process.Pid)
	dialTo := func(to, from string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: time.Second}
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if nc, err := d.Dial("tcp", to); err == nil {
				t.Cleanup(func() { nc.Close() })
				return nc
			}
		}
		return nil
	}
	dial := func(from string) net.Conn { return dialTo(addr, from) }
	var attackers sync.WaitGroup
	var flooders []net.Conn
	stop := make(chan struct{})
	defer func() {
		close(stop)
		for _, nc := range flooders { // unblocks their writes
			nc.Close()
		}
		attackers.Wait()
	}()
	idle := 0
	for range 300 {
		if nc := dial("127.0.0.5"); nc != nil && writeAll(nc, handshake("SUB")) {
			idle++ // and silent from here on, reading nothing
		}
	}
	idleReplay := 0
	for range 100 {
		if nc := dialTo(replay, "127.0.0.11"); nc != nil && writeAll(nc, handshake("DEALER")) {
			idleReplay++ // neither asks nor reads
		}
	}
	for i := range 64 {
		trickle(&attackers, stop, addr, fmt.Sprintf("127.0.0.%d", 12+i), "SUB")
	}
	ping := handshake("SUB")
	ping[11] = 1 // ZMTP 3.1, which answers PINGs
	var flood []byte
	for range 1000 {
		flood = append(flood, 0x04, 8, 4, 'P', 'I', 'N', 'G', 0, 0, 0)
	}
	for range 10 {
		nc := dial("127.0.0.10")
		if nc == nil || !writeAll(nc, ping) {
			continue
		}
		nc.SetWriteDeadline(time.Time{}) // whole PINGs, none cut short
		flooders = append(flooders, nc)
		attackers.Add(1)
		go func() {
			defer attackers.Done()
			for {
				if _, err := nc.Write(flood); err != nil {
					return // closed by publish, or by the test
				}
			}
		}()
	}
	m := <-start(t, "mirror", "-connect", "tcp://"+addr, "-replay-connect", "tcp://"+replay, "-duration", "12s", "-format", "json")
	res := c.wait()
	peak := peakOf()
	t.Logf("%d idle peers, %d idle replay clients; peak resident memory %d MB\npublish: %s\nmirror: %s", idle, idleReplay, peak>>20, res.err, m.err)
	if res.code != 0 || m.code != 0 {
		t.Fatalf("publish exited %d, mirror %d: the mirror was kept out or lost batches", res.code, m.code)
	}
	if idle < 100 {
		t.Errorf("only %d of 300 idle peers handshook", idle)
	}
	if idleReplay < 50 {
		t.Errorf("only %d of 100 idle replay clients handshook", idleReplay)
	}
	if peak > budget {
		t.Errorf("peak resident memory %d MB, want within the budget of %d MB", peak>>20, budget>>20)
	}
}

// trickle connects to addr from the address from and sends the handshake
// of a socket of type typ a byte every 100 ms, connecting again 100 ms
// after each connection ends, until stop is closed: a handshake that holds
// its place as long as a deadline allows, and takes it again.
func trickle(wg *sync.WaitGroup, stop <-chan struct{}, addr, from, typ string) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: time.Second}
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			nc, err := d.Dial("tcp", addr)
			if err != nil {
				continue
			}
			for _, b := range handshake(typ) {
				select {
				case <-stop:
					nc.Close()
					return
				case <-time.After(100 * time.Millisecond):
				}
				if !writeAll(nc, []byte{b}) {
					break
				}
			}
			nc.Close()
		}
	}()
}

// writeAll writes b to nc within a second, and reports whether it could.
func writeAll(nc net.Conn, b []byte) bool {
	nc.SetWriteDeadline(time.Now().Add(time.Second))
	_, err := nc.Write(b)
	return err == nil
}

// TestMirrorUnderIdleFlood runs kvevict mirror -bind with -memory 64MiB
// while 300 peers from 127.0.0.5 handshake as ZMTP 3.0 PUBs and then say
// nothing, 64 from 127.0.0.6-69, one each, and 40 from 127.0.0.1, the
// address the engine comes from, trickle their greeting a byte at a time
// and connect again when closed: the attacks that kept the real engine out
// of a binding mirror (4,096 idle PUBs) and a libzmq publisher out of a
// listening one (64 slow handshakes from 64 addresses, 300 from its own),
// scaled down. A publish that connects from 127.0.0.1 gets every batch
// in (both exit 0), and the mirror's peak resident memory stays within its
// budget.
func TestMirrorUnderIdleFlood(t *testing.T) {
	measuresMemory(t, "holds 400 hostile connections to a mirror")
	const budget = 64 << 20
	addr := freePort(t, "127.0.0.1")
	c := startChild(t, "mirror", "-bind", "tcp://"+addr, "-duration", "10s", "-memory", fmt.Sprint(budget), "-format", "json")
	peakOf := watchPeak(c.cmd.Process.Pid)
	var attackers sync.WaitGroup
	stop := make(chan struct{})
	defer func() {
		close(stop)
		attackers.Wait()
	}()
	idle := 0
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 5)}, Timeout: time.Second}
	for range 300 {
		nc, err := d.Dial("tcp", addr)
		if err != nil {
			continue
		}
		t.Cleanup(func() { nc.Close() })
		if writeAll(nc, handshake("PUB")) {
			idle++ // and silent from here on, reading nothing
		}
	}
	for i := range 64 {
		trickle(&attackers, stop, addr, fmt.Sprintf("127.0.0.%d", 6+i), "PUB")
	}
	for range 40 {
		trickle(&attackers, stop, addr, "127.0.0.1", "PUB")
	}
	time.Sleep(time.Second) // every trickled greeting under way
	p := start(t, "publish", "-connect", "tcp://"+addr, "-trace", excerpt, "-capacity", "1000", "-format", "json")
	res := c.wait()
	pub := <-p
	peak := peakOf()
	t.Logf("%d idle peers; peak resident memory %d MB\nmirror: %s\npublish: %s", idle, peak>>20, res.err, pub.err)
	sum, rows := bothSucceeded(t, pub, res)
	if len(rows) != 1 || rows[0].MissedBatches != 0 || rows[0].Batches != sum.Batches {
		t.Errorf("mirrored %+v, want the engine's %d batches", rows, sum.Batches)
	}
	// Those the mirror closed first fail their write: how many depends
	// on the pace of the two processes, but most get in.
	if idle < 50 {
		t.Errorf("only %d of 300 idle peers handshook", idle)
	}
	if peak > budget {
		t.Errorf("peak resident memory %d MB, want within the budget of %d MB", peak>>20, budget>>20)
	}
}
