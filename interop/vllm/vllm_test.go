// Package vllm_test runs kvevict mirror against a publisher that speaks as
// vLLM's ZmqEventPublisher does, on the transport vLLM uses: pyzmq over
// libzmq (testdata/vllm_publisher.py). It proves that the Go ZMTP
// transport and the decoder interoperate with the real thing: the
// handshake, the SUB's subscription, the replay ROUTER, and vLLM's
// current payloads (array batches of map events, hybrid KV cache groups,
// offload media, 64-bit hashes written as msgpack uint 64).
//
// It needs python3 with zmq and msgpack (Debian: python3-zmq,
// python3-msgpack); without them it skips, unless CI is "true".
package vllm_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestVLLMInterop builds cmd/kvevict once and runs each scenario, in
// parallel, against its own publisher on its own ports.
func TestVLLMInterop(t *testing.T) {
	py := findPython(t)
	bin := buildKvevict(t)
	for _, sc := range []struct {
		name string
		run  func(*testing.T, string, string)
	}{
		{"LateJoin", func(t *testing.T, py, bin string) { lateJoin(t, py, bin, false) }},
		{"Restart", restart},
		{"HybridGroupsAndMedia", hybridGroups},
		{"LateJoinReplayWithoutTopic", func(t *testing.T, py, bin string) { lateJoin(t, py, bin, true) }},
	} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			sc.run(t, py, bin)
		})
	}
}

// ---- scenarios ----

const topic = "kv@pod-0@Qwen/Qwen3-0.6B" // llm-d's kv@<pod>@<model> form

// lateJoin: the engine publishes 200 batches before the mirror starts, so
// the mirror misses them all, then 50 more while it runs. The first live
// batch (seq 200) shows the mirror a gap 0..199, which it must fill from
// the replay socket (vLLM's buffer keeps 10000 batches, so all of them).
//
// By hand, with oldHash(i, j) the j-th block of batch i (i < 200):
//
//	batches   0..99:  each stores 10 blocks            -> 1000 resident
//	batch   100:      AllBlocksCleared, then stores 10 -> 10 resident
//	batches 101..199: each stores 10 blocks            -> 10 + 990 = 1000
//	batch   200+k, k = 0..49 (live):
//	                  removes the 10 blocks of batch 100+2k
//	                  (batches 100, 102, ..., 198: 50 x 10 = 500 blocks),
//	                  removes the 10 blocks of batch k (cleared at batch
//	                  100 already: no-op, as in vLLM's pool),
//	                  stores 4 new blocks              (50 x 4 = 200)
//	resident at the end: 1000 - 500 + 200 = 700, all on the GPU, group 0.
//
// So: resident_blocks 700, resident_by_medium {GPU: 700}, batches 250
// (200 replayed + 50 live), missed_batches 0, restarts 0. A mirror that
// skipped replay would hold 200 - 0 (nothing to remove) = 200 blocks; one
// that replayed but ignored AllBlocksCleared would hold 1700.
func lateJoin(t *testing.T, py, bin string, noTopic bool) {
	const (
		early, live = 200, 50
		wantBlocks  = 700
	)
	var steps []step
	var all []batch
	var earlyBatches []batch
	for i := range early {
		var evs []event
		if i == 100 {
			evs = append(evs, cleared())
		}
		hashes := hashRange(i, 10)
		var parent *uint64
		if i%100 != 0 {
			p := hashRange(i-1, 10)[9] // chain on the previous batch's last block
			parent = &p
		}
		evs = append(evs, stored(hashes, parent, 16, "GPU", nil))
		earlyBatches = append(earlyBatches, batch{TS: ts(i), Events: evs})
	}
	all = append(all, earlyBatches...)
	steps = append(steps, step{Batches: earlyBatches}, step{Mark: "joined-late"})
	var liveBatches []batch
	for k := range live {
		i := early + k
		evs := []event{
			removed(hashRange(100+2*k, 10), "GPU", nil),
			removed(hashRange(k, 10), "GPU", nil),
			stored(hashRange(i, 4), nil, 16, "GPU", nil),
		}
		liveBatches = append(liveBatches, batch{TS: ts(i), Events: evs})
	}
	all = append(all, liveBatches...)
	steps = append(steps,
		step{WaitPeer: 10, Settle: 0.3},
		step{Batches: liveBatches, Interval: 0.01},
		step{Mark: "done"},
	)
	want := model(all)
	if want.gpu() != wantBlocks || len(want.byMedium()) != 1 {
		t.Fatalf("the test's own reference model holds %d blocks (%v), the hand count %d", want.gpu(), want.byMedium(), wantBlocks)
	}

	sc := scenario{Topic: topic, Steps: steps}
	if noTopic {
		sc.args = []string{"--replay-no-topic"} // replay answers [id, "", seq, payload], as vLLM first sent them
	}
	pub := startPublisher(t, py, sc)
	pub.waitFor(t, "the 200 batches before the mirror joins", 20*time.Second, func(r report) bool {
		return r.Event == "mark" && r.Name == "joined-late"
	})
	rows, stderr := runMirror(t, bin, pub, 5*time.Second)
	pub.mustHave(t, "the publisher finished before the mirror's duration ended", func(r report) bool {
		return r.Event == "mark" && r.Name == "done"
	})
	checkRow(t, rows, stderr, mirrorRow{
		Topic: topic, ResidentBlocks: wantBlocks, ResidentByMedium: map[string]int{"GPU": wantBlocks},
		Batches: early + live, MissedBatches: 0, Restarts: 0,
	})
	// The mirror asked for the gap from 0, and the engine's buffer had it.
	pub.mustHave(t, "a replay request from seq 0 answered with the 200 missed batches", func(r report) bool {
		return r.Event == "replay" && r.Start == 0 && r.Answered >= early
	})
}

// restart: an engine stores 2000 blocks; the mirror follows it live. The
// engine dies (both sockets close) and a new one binds the same ports and
// publishes its batches 0..5 at once, with no warm-up, as vLLM does: the
// mirror's SUB has not reconnected yet, so libzmq's PUB drops them. The
// new engine then waits for the mirror's SUB to come back and sends
// batches 6..9. Seq 6 is below the 20 the mirror expected: a restart, so
// the mirror drops the dead engine's blocks and asks the new engine's
// replay socket for 0..5.
//
// By hand, with oldHash(i, j) for the dead engine and newHash(k, j):
//
//	dead engine, batches 0..19: each stores a chain of 100 -> 2000 blocks
//	restart: all of them are gone with the engine
//	new engine, batches 0..9: each stores 10 blocks         -> 100
//	  batch 7 also removes oldHash(0, 0..9): not resident    -> no-op
//	  batch 9 also removes newHash(0, 0..4)                  -> 100 - 5 = 95
//
// So: resident_blocks 95 (2094 if the dead engine's blocks survived),
// resident_by_medium {GPU: 95}, batches 20 + 10 = 30 (0..5 replayed),
// missed_batches 0, restarts 1.
func restart(t *testing.T, py, bin string) {
	const (
		oldBatches, oldChain = 20, 100
		newBatches, early    = 10, 6
		wantBlocks           = 95
	)
	var all, dead, newEarly, newLate []batch
	var parent *uint64
	for i := range oldBatches {
		h := oldHashRange(i, oldChain)
		dead = append(dead, batch{TS: ts(i), Events: []event{stored(h, parent, 16, "GPU", nil)}})
		last := h[len(h)-1]
		parent = &last
	}
	for k := range newBatches {
		evs := []event{stored(newHashRange(k, 10), nil, 16, "GPU", nil)}
		switch k {
		case 7:
			evs = append(evs, removed(oldHashRange(0, 10), "GPU", nil))
		case 9:
			evs = append(evs, removed(newHashRange(0, 5), "GPU", nil))
		}
		b := batch{TS: ts(1000 + k), Events: evs}
		if k < early {
			newEarly = append(newEarly, b)
		} else {
			newLate = append(newLate, b)
		}
	}
	all = append(all, dead...)
	all = append(all, batch{Events: []event{cleared()}}) // what the restart means
	all = append(all, newEarly...)
	all = append(all, newLate...)
	if want := model(all); want.gpu() != wantBlocks {
		t.Fatalf("the test's own reference model holds %d blocks, the hand count %d", want.gpu(), wantBlocks)
	}

	steps := []step{
		{WaitPeer: 10, Settle: 0.3},
		{Batches: dead, Interval: 0.005},
		{Pause: 0.3},
		{Mark: "dead"},
		{Restart: 0.5},
		{Batches: newEarly},
		{Mark: "new-early"},
		{WaitPeer: 10, Settle: 0.3},
		{Batches: newLate, Interval: 0.01},
		{Mark: "done"},
	}
	pub := startPublisher(t, py, scenario{Topic: topic, Steps: steps})
	rows, stderr := runMirror(t, bin, pub, 7*time.Second)
	pub.mustHave(t, "the publisher finished before the mirror's duration ended", func(r report) bool {
		return r.Event == "mark" && r.Name == "done"
	})
	checkRow(t, rows, stderr, mirrorRow{
		Topic: topic, ResidentBlocks: wantBlocks, ResidentByMedium: map[string]int{"GPU": wantBlocks},
		Batches: oldBatches + newBatches, MissedBatches: 0, Restarts: 1,
	})
	// The new engine's 0..5 went out before any subscriber was back (so
	// they can only have come by replay) and the mirror asked the new
	// engine's replay socket for them.
	sent := pub.mustHave(t, "the new engine's early batches", func(r report) bool {
		return r.Event == "published" && r.Incarnation == 2 && r.First != nil && *r.First == 0
	})
	back := pub.mustHave(t, "the mirror's SUB reconnecting to the new engine", func(r report) bool {
		return r.Event == "monitor" && r.Incarnation == 2 && r.Socket == "pub" && r.Kind == "HANDSHAKE_SUCCEEDED"
	})
	if back.T < sent.T {
		t.Logf("the mirror's SUB reconnected (t=%.3f) before the new engine's first batches went out (t=%.3f): they may have come live, so replay is not checked", back.T, sent.T)
		return
	}
	pub.mustHave(t, "a replay request to the new engine from seq 0 answering its batches 0..5", func(r report) bool {
		return r.Event == "replay" && r.Incarnation == 2 && r.Start == 0 && r.Answered >= early
	})
}

// hybridGroups: a hybrid model (a full-attention group 0 and a
// sliding-window group 1 that store the same hashes) with a CPU offload
// tier, on vLLM's default empty topic. vLLM keeps a block per group and
// medium: a removal from one group or medium leaves the others alone.
//
// By hand, a1..a8 hashes >= 2^63 (msgpack uint 64), c1, c2 small ones,
// d1, d2 children of a8; "g0" is group_idx 0, "g1" group_idx 1, and an
// event without group_idx is group 0:
//
//	b0: stored g0 GPU [a1..a8] (full_attention),
//	    stored g1 GPU [a1..a8] (sliding_window)  GPU g0 {a1..a8} g1 {a1..a8}: 8
//	b1: removed g1 GPU [a1..a4]                  g1 {a5..a8}; any group: 8
//	b2: stored CPU [a1..a4, c1, c2]              CPU {a1..a4, c1, c2}: 6
//	b3: removed CPU [a1, a2]                     CPU {a3, a4, c1, c2}: 4
//	b4: removed g0 GPU [a5, a6, a7]              g0 {a1..a4, a8}, g1 {a5..a8}: 8
//	b5: removed g1 GPU [a5]                      g1 {a6, a7, a8};
//	                                             any group {a1..a4, a6, a7, a8}: 7
//	b6: stored GPU [d1, d2] under a8, no group   g0 + 2: 9
//
// So: resident_blocks 9 (GPU, any group), resident_by_medium {GPU: 9,
// CPU: 4}, batches 7, missed_batches 0, restarts 0. A mirror that ignored
// group_idx would hold 3 on the GPU (a8, d1, d2: b1 would take a1..a4 and
// b4 a5..a7 from the one set); one that ignored medium would take a1, a2
// off the GPU with b3.
func hybridGroups(t *testing.T, py, bin string) {
	a := func(k int) uint64 { return 0xA000_0000_0000_0000 + uint64(k) }
	c := func(k int) uint64 { return 0x0C00 + uint64(k) }
	d := func(k int) uint64 { return 0xD000_0000_0000_0000 + uint64(k) }
	as := func(from, to int) []uint64 {
		var out []uint64
		for k := from; k <= to; k++ {
			out = append(out, a(k))
		}
		return out
	}
	g0, g1 := int64(0), int64(1)
	a8 := a(8)
	full := stored(as(1, 8), nil, 16, "GPU", &g0)
	full["kv_cache_spec_kind"] = "full_attention"
	sliding := stored(as(1, 8), nil, 16, "GPU", &g1)
	sliding["kv_cache_spec_kind"] = "sliding_window"
	batches := []batch{
		{TS: ts(0), Events: []event{full, sliding}},
		{TS: ts(1), Events: []event{removed(as(1, 4), "GPU", &g1)}},
		{TS: ts(2), Events: []event{stored(append(as(1, 4), c(1), c(2)), nil, 16, "CPU", nil)}},
		{TS: ts(3), Events: []event{removed([]uint64{a(1), a(2)}, "CPU", nil)}},
		{TS: ts(4), Events: []event{removed(as(5, 7), "GPU", &g0)}},
		{TS: ts(5), Events: []event{removed([]uint64{a(5)}, "GPU", &g1)}},
		{TS: ts(6), Events: []event{stored([]uint64{d(1), d(2)}, &a8, 16, "GPU", nil)}},
	}
	wantMedia := map[string]int{"GPU": 9, "CPU": 4}
	if got := model(batches).byMedium(); !maps.Equal(got, wantMedia) {
		t.Fatalf("the test's own reference model holds %v, the hand count %v", got, wantMedia)
	}

	steps := []step{
		{WaitPeer: 10, Settle: 0.3},
		{Batches: batches, Interval: 0.01},
		{Mark: "done"},
	}
	pub := startPublisher(t, py, scenario{Topic: "", Steps: steps}) // vLLM's default topic
	rows, stderr := runMirror(t, bin, pub, 3*time.Second)
	pub.mustHave(t, "the publisher finished before the mirror's duration ended", func(r report) bool {
		return r.Event == "mark" && r.Name == "done"
	})
	checkRow(t, rows, stderr, mirrorRow{
		Topic: "", ResidentBlocks: 9, ResidentByMedium: wantMedia,
		Batches: int64(len(batches)), MissedBatches: 0, Restarts: 0,
	})
}

// ---- events, as JSON for the script ----

type event map[string]any

type batch struct {
	TS     float64 `json:"ts"`
	Events []event `json:"events"`
	DPRank int     `json:"dp_rank"`
}

func ts(i int) float64 { return 1_750_000_000 + float64(i)/10 }

func stored(hashes []uint64, parent *uint64, blockSize int, medium string, group *int64) event {
	e := event{"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": parent,
		"block_size": blockSize, "medium": medium}
	if group != nil {
		e["group_idx"] = *group
	}
	return e
}

func removed(hashes []uint64, medium string, group *int64) event {
	e := event{"type": "BlockRemoved", "block_hashes": hashes, "medium": medium}
	if group != nil {
		e["group_idx"] = *group
	}
	return e
}

func cleared() event { return event{"type": "AllBlocksCleared"} }

// hashRange returns n block hashes of batch i: odd batches' are small,
// even batches' are >= 2^63, which msgpack writes as uint 64.
func hashRange(i, n int) []uint64 {
	out := make([]uint64, n)
	for j := range out {
		h := uint64(1)<<40 | uint64(i)<<16 | uint64(j)
		if i%2 == 0 {
			h |= 1 << 63
		}
		out[j] = h
	}
	return out
}

// oldHashRange and newHashRange are the hashes of a dead engine and of its
// successor: never the same.
func oldHashRange(i, n int) []uint64 {
	out := hashRange(i, n)
	for j := range out {
		out[j] |= 2 << 48
	}
	return out
}

func newHashRange(i, n int) []uint64 {
	out := hashRange(i, n)
	for j := range out {
		out[j] |= 3 << 48
	}
	return out
}

// state is the test's own reference of vLLM's semantics: a block is
// resident per (group, medium); BlockStored adds, BlockRemoved drops from
// its own group and medium only, AllBlocksCleared empties all.
type state map[[2]string]map[uint64]bool

func model(batches []batch) state {
	s := state{}
	for _, b := range batches {
		for _, e := range b.Events {
			group, medium := "0", "GPU"
			if g, ok := e["group_idx"]; ok {
				group = fmt.Sprint(g)
			}
			if m, ok := e["medium"]; ok {
				medium = m.(string)
			}
			key := [2]string{group, medium}
			switch e["type"] {
			case "BlockStored":
				if s[key] == nil {
					s[key] = map[uint64]bool{}
				}
				for _, h := range e["block_hashes"].([]uint64) {
					s[key][h] = true
				}
			case "BlockRemoved":
				for _, h := range e["block_hashes"].([]uint64) {
					delete(s[key], h)
				}
			case "AllBlocksCleared":
				clear(s)
			}
		}
	}
	return s
}

// byMedium counts the distinct hashes resident per medium, in any group.
func (s state) byMedium() map[string]int {
	distinct := map[string]map[uint64]bool{}
	for key, blocks := range s {
		for h := range blocks {
			if distinct[key[1]] == nil {
				distinct[key[1]] = map[uint64]bool{}
			}
			distinct[key[1]][h] = true
		}
	}
	out := map[string]int{}
	for m, hs := range distinct {
		out[m] = len(hs)
	}
	return out
}

func (s state) gpu() int { return s.byMedium()["GPU"] }

// ---- the publisher ----

type step struct {
	Batches  []batch `json:"batches,omitempty"`
	Interval float64 `json:"interval,omitempty"`
	WaitPeer float64 `json:"wait_peer,omitempty"`
	Settle   float64 `json:"settle,omitempty"`
	Pause    float64 `json:"pause,omitempty"`
	Mark     string  `json:"mark,omitempty"`
	Restart  float64 `json:"restart,omitempty"`
}

type scenario struct {
	Endpoint       string   `json:"endpoint"`
	ReplayEndpoint string   `json:"replay_endpoint"`
	Topic          string   `json:"topic"`
	Steps          []step   `json:"steps"`
	Hold           int      `json:"hold"`
	args           []string // more command-line flags for the script
}

// report is one line the script prints; fields by event.
type report struct {
	Event       string  `json:"event"`
	T           float64 `json:"t"`
	Incarnation int     `json:"incarnation"`
	Port        int     `json:"port"`
	ReplayPort  int     `json:"replay_port"`
	Name        string  `json:"name"`
	Socket      string  `json:"socket"`
	Kind        string  `json:"kind"`
	Start       int64   `json:"start"`
	Answered    int     `json:"answered"`
	First       *int64  `json:"first"`
	Last        *int64  `json:"last"`
}

type publisher struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu      sync.Mutex
	reports []report
	log     bytes.Buffer // every line of stdout and stderr, for a failure
	changed chan struct{}
	exited  chan struct{}
}

// startPublisher runs the script on wildcard ports (tcp://*:*: libzmq
// picks free ones and the script reports them) and waits until it has
// bound them.
func startPublisher(t *testing.T, py string, sc scenario) *publisher {
	t.Helper()
	sc.Endpoint, sc.ReplayEndpoint = "tcp://*:*", "tcp://*:*"
	sc.Hold = 60 // ended sooner, when the test closes its stdin
	js, err := json.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "scenario.json")
	if err := os.WriteFile(file, js, 0o644); err != nil {
		t.Fatal(err)
	}
	p := &publisher{changed: make(chan struct{}), exited: make(chan struct{})}
	args := append([]string{filepath.Join("testdata", "vllm_publisher.py"), "--scenario", file, "--exit-on-stdin-eof"}, sc.args...)
	p.cmd = exec.Command(py, args...)
	p.stdin, err = p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = (*lockedWriter)(p)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.read(stdout)
	t.Cleanup(func() {
		p.stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			p.cmd.Process.Kill()
			<-p.exited
		}
		p.cmd.Wait()
		if t.Failed() || testing.Verbose() {
			p.mu.Lock()
			t.Logf("the publisher's log:\n%s", p.log.String())
			p.mu.Unlock()
		}
	})
	p.waitFor(t, "the publisher's sockets", 15*time.Second, func(r report) bool { return r.Event == "bound" })
	return p
}

func (p *publisher) read(stdout io.Reader) {
	defer close(p.exited)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var r report
		err := json.Unmarshal(line, &r)
		p.mu.Lock()
		p.log.Write(line)
		p.log.WriteByte('\n')
		if err == nil {
			p.reports = append(p.reports, r)
			close(p.changed)
			p.changed = make(chan struct{})
		}
		p.mu.Unlock()
	}
}

// lockedWriter writes the script's stderr into the publisher's log.
type lockedWriter publisher

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.log.Write(b)
}

// find returns the first report for which ok holds.
func (p *publisher) find(ok func(report) bool) (report, bool, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.reports {
		if ok(r) {
			return r, true, nil
		}
	}
	return report{}, false, p.changed
}

// waitFor waits until the script reports what ok accepts.
func (p *publisher) waitFor(t *testing.T, what string, timeout time.Duration, ok func(report) bool) report {
	t.Helper()
	deadline := time.After(timeout)
	for {
		r, found, changed := p.find(ok)
		if found {
			return r
		}
		select {
		case <-changed:
		case <-p.exited:
			if r, found, _ := p.find(ok); found {
				return r
			}
			t.Fatalf("the publisher exited before %s", what)
		case <-deadline:
			t.Fatalf("gave up after %v waiting for %s", timeout, what)
		}
	}
}

// mustHave checks that the script has reported what ok accepts, waiting a
// little for its output to be read.
func (p *publisher) mustHave(t *testing.T, what string, ok func(report) bool) report {
	t.Helper()
	return p.waitFor(t, what, 2*time.Second, ok)
}

func (p *publisher) ports() (pub, replay int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.reports {
		if r.Event == "bound" {
			return r.Port, r.ReplayPort
		}
	}
	return 0, 0
}

// ---- the mirror ----

type mirrorRow struct {
	Topic            string         `json:"topic"`
	ResidentBlocks   int            `json:"resident_blocks"`
	ResidentByMedium map[string]int `json:"resident_by_medium"`
	Batches          int64          `json:"batches"`
	MissedBatches    int64          `json:"missed_batches"`
	Restarts         int64          `json:"restarts"`
}

// runMirror runs kvevict mirror for d against the publisher's ports on
// 127.0.0.1 and returns its rows and its stderr.
func runMirror(t *testing.T, bin string, p *publisher, d time.Duration) ([]mirrorRow, string) {
	t.Helper()
	port, replay := p.ports()
	ctx, cancel := context.WithTimeout(context.Background(), d+20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "mirror",
		"-endpoint", fmt.Sprintf("tcp://127.0.0.1:%d", port),
		"-replay-endpoint", fmt.Sprintf("tcp://127.0.0.1:%d", replay),
		"-duration", d.String(), "-format", "json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %v\nstdout:\n%s\nstderr:\n%s", cmd, err, stdout.String(), stderr.String())
	}
	var rows []mirrorRow
	if err := json.Unmarshal(stdout.Bytes(), &rows); err != nil {
		t.Fatalf("mirror's output is not a JSON array of rows: %v\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	return rows, stderr.String()
}

// checkRow checks that the mirror reports exactly one topic, as want, and
// nothing skipped or failed on its stderr.
func checkRow(t *testing.T, rows []mirrorRow, stderr string, want mirrorRow) {
	t.Helper()
	if len(rows) != 1 {
		t.Fatalf("mirror reported %d topics, want 1: %+v\nstderr:\n%s", len(rows), rows, stderr)
	}
	got := rows[0]
	if got.Topic != want.Topic || got.ResidentBlocks != want.ResidentBlocks ||
		!maps.Equal(got.ResidentByMedium, want.ResidentByMedium) || got.Batches != want.Batches ||
		got.MissedBatches != want.MissedBatches || got.Restarts != want.Restarts {
		t.Errorf("mirror reported\n\t%+v\nwant\n\t%+v\nstderr:\n%s", got, want, stderr)
	}
	for _, bad := range []string{"skipped bad input", "replay requests failed"} {
		if strings.Contains(stderr, bad) {
			t.Errorf("mirror's stderr reports %q:\n%s", bad, stderr)
		}
	}
}

// ---- the environment ----

// findPython returns a python3 that imports zmq and msgpack: the one on
// PATH, or Debian's (/usr/bin/python3, where python3-zmq and
// python3-msgpack install them) when that one lacks them.
func findPython(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(py)
		if err != nil || slices.Contains(tried, path) {
			continue
		}
		tried = append(tried, path)
		out, err := exec.Command(path, "-c", "import zmq, msgpack").CombinedOutput()
		if err == nil {
			return path
		}
		t.Logf("%s: %v: %s", path, err, bytes.TrimSpace(out))
	}
	msg := fmt.Sprintf("no python3 imports zmq and msgpack (tried %v): apt-get install -y python3-zmq python3-msgpack", tried)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// buildKvevict builds cmd/kvevict into a temporary directory.
func buildKvevict(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to build kvevict with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "kvevict")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goTool, "build", "-o", bin, "github.com/sagellm/kvevict/cmd/kvevict").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/kvevict: %v\n%s", err, out)
	}
	return bin
}
