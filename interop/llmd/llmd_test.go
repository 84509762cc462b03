// Package llmd runs `kvevict publish` (cmd/kvevict) into llm-d's own
// KV-event pipeline (github.com/llm-d/llm-d-kv-cache v0.9.0), built in
// process exactly as llm-d's indexer wires it: its ZMQ subscriber (managed
// by its SubscriberManager), its sharded Pool with the vLLM engine adapter,
// its chunked token processor with the block size publish writes (16
// tokens with -block-size 16, or the trace's 512 at publish's defaults)
// and its in-memory kvblock index. It proves that llm-d decodes every batch
// publish sends, derives request keys from the token ids that chain
// through each parent, applies every removal, and ends holding exactly the
// blocks publish reports resident for the pod. With tiers below publish's
// pool (publish -tier), llm-d ends holding, per device tier, exactly the
// blocks publish holds on each medium, and its own scorer weighs a prompt
// found partly on the GPU and partly on the host as its documented
// weights say (tiers_test.go).
//
// The module is separate (its own go.mod) so that no user of kvevict
// downloads llm-d and its Kubernetes dependencies.
package llmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/llm-d/llm-d-kv-cache/pkg/kvcache/kvblock"
	"github.com/llm-d/llm-d-kv-cache/pkg/kvevents"
	"github.com/llm-d/llm-d-kv-cache/pkg/kvevents/engineadapter"
	"github.com/llm-d/llm-d-kv-cache/pkg/utils/logging"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

const (
	pod       = "pod-0"
	model     = "model-x"
	topic     = "kv@" + pod + "@" + model // llm-d's kv@<pod>@<model>
	traceSize = 512                       // the Mooncake traces' tokens per block: publish's default -block-size

	// drainTimeout bounds the wait, once publish has exited, for llm-d to
	// take the batches still in flight.
	drainTimeout = 30 * time.Second
)

// TestPublishFeedsLLMD builds cmd/kvevict once and publishes each trace
// into a fresh llm-d pipeline. The excerpt always runs (seconds); the full
// Mooncake conversation trace, outside the repository, skips when absent
// unless CI is "true".
func TestPublishFeedsLLMD(t *testing.T) {
	bin := kvevictBinary(t)
	// blockSize is llm-d's token block size, and publish's -block-size;
	// at the trace's own size publish runs with its defaults.
	const excerpt, full = "../../sim/testdata/mooncake_conversation_excerpt.jsonl", "../../../shared/traces/mooncake_conversation.jsonl"
	for _, c := range []struct {
		name      string
		trace     string
		capacity  int
		blockSize int
		optional  bool
		timeout   time.Duration
	}{
		{"Excerpt", excerpt, 1000, 16, false, 30 * time.Second},
		{"ExcerptDefaults", excerpt, 1000, traceSize, false, 30 * time.Second},
		{"FullTrace", full, 2500, 16, true, 4 * time.Minute},
		{"FullTraceDefaults", full, 2500, traceSize, true, 4 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := os.Stat(c.trace); err != nil {
				msg := fmt.Sprintf("trace %s: %v", c.trace, err)
				if !c.optional || os.Getenv("CI") == "true" {
					t.Fatal(msg)
				}
				t.Skip(msg)
			}
			runPublish(t, bin, c.trace, c.capacity, c.blockSize, c.timeout)
		})
	}
}

// publishSummary is the part of publish's -format json summary the test
// reads; the whole object is logged.
type publishSummary struct {
	Batches        *int64        `json:"batches"`
	ResidentBlocks *int          `json:"resident_blocks"`
	Tiers          []tierSummary `json:"tiers"` // with -tier
}

// tierSummary is one tier of publish's summary: its medium and the
// blocks it holds at the end.
type tierSummary struct {
	Medium         string `json:"medium"`
	ResidentBlocks int    `json:"resident_blocks"`
}

func runPublish(t *testing.T, bin, trace string, capacity, blockSize int, timeout time.Duration) {
	start := time.Now()
	args := []string{"-trace", trace, "-capacity", fmt.Sprint(capacity)}
	if blockSize != traceSize {
		args = append(args, "-block-size", fmt.Sprint(blockSize))
	}
	p, sum := publishInto(t, bin, blockSize, timeout, args...)
	batches, resident := *sum.Batches, *sum.ResidentBlocks
	p.checkIndex(t, resident)
	if !t.Failed() {
		t.Logf("%s: llm-d took all %d batches and holds the %d resident blocks, in %v",
			filepath.Base(trace), batches, resident, time.Since(start).Round(time.Millisecond))
	}
}

// publishInto runs kvevict publish with args, to which it adds the
// endpoint, the topic and -format json, into a fresh llm-d pipeline of
// blockSize-token blocks, all within timeout. Once llm-d took every batch
// it stops the pipeline, whose index is then final, checks what llm-d
// decoded (checkPipeline), and returns the pipeline and publish's summary.
func publishInto(t *testing.T, bin string, blockSize int, timeout time.Duration, args ...string) (*pipeline, publishSummary) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)

	// llm-d binds its SUB for a local endpoint (remote=false) and the
	// publisher, given a plain host:port, connects to it: the layout of a
	// vLLM engine publishing to an indexer that listens.
	endpoint := "tcp://" + freeAddr(t)
	p := startPipeline(ctx, t, endpoint, blockSize)
	defer p.stop()

	var stdout, stderr bytes.Buffer
	args = append([]string{"publish", "-endpoint", endpoint, "-topic", topic, "-format", "json"}, args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("kvevict publish: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.Bytes(), stderr.Bytes())
	}
	var sum publishSummary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil || sum.Batches == nil || sum.ResidentBlocks == nil {
		t.Fatalf("publish's JSON summary (err %v) lacks batches or resident_blocks:\n%s", err, stdout.Bytes())
	}
	batches := *sum.Batches
	t.Logf("publish summary: %s", bytes.Join(bytes.Fields(stdout.Bytes()), []byte(" ")))
	if stderr.Len() > 0 {
		t.Logf("publish stderr:\n%s", stderr.Bytes())
	}

	// A pool worker hands each message to the adapter, which counts it;
	// once all are counted, the pool's Shutdown lets the workers finish
	// the last batch (it drains the queues, then waits for them), so the
	// index is final.
	drain, cancelDrain := context.WithTimeout(ctx, drainTimeout)
	defer cancelDrain()
	waitFor(drain, func() bool { return p.adapter.messages() >= batches })
	p.stop()
	if drain.Err() != nil {
		t.Fatalf("%v after publish exited, llm-d had taken %d of the %d batches publish reports",
			drainTimeout, p.adapter.messages(), batches)
	}

	p.checkPipeline(t, batches)
	return p, sum
}

// ---- llm-d's pipeline ----

type pipeline struct {
	ctx     context.Context
	logs    *logRecorder
	adapter *observingAdapter
	index   *recordingIndex
	tp      kvblock.TokenProcessor
	pool    *kvevents.Pool
	subs    *kvevents.SubscriberManager
	once    sync.Once
}

// startPipeline wires llm-d's indexer as its examples/kv_events/offline
// does (a local subscriber that binds, a publisher that dials it), with its
// logger captured, and returns once the SUB socket is bound.
func startPipeline(ctx context.Context, t *testing.T, endpoint string, blockSize int) *pipeline {
	t.Helper()
	logs := newLogRecorder()
	ctx = log.IntoContext(ctx, logr.New(&recordingSink{rec: logs}))

	tp, err := kvblock.NewChunkedTokenDatabase(&kvblock.TokenProcessorConfig{BlockSizeTokens: blockSize})
	if err != nil {
		t.Fatal(err)
	}
	// The test's own token processor, apart from the pool's, recomputes
	// the keys from the decoded events.
	shadowTP, err := kvblock.NewChunkedTokenDatabase(&kvblock.TokenProcessorConfig{BlockSizeTokens: blockSize})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := kvblock.NewInMemoryIndex(kvblock.DefaultInMemoryIndexConfig())
	if err != nil {
		t.Fatal(err)
	}
	p := &pipeline{
		ctx:     ctx,
		logs:    logs,
		adapter: newObservingAdapter(engineadapter.NewVLLMAdapter(), shadowTP, blockSize),
		index:   &recordingIndex{Index: mem, added: map[kvblock.BlockHash]struct{}{}},
		tp:      tp,
	}
	cfg := kvevents.DefaultConfig()
	cfg.DiscoverPods = false
	cfg.ZMQEndpoint = endpoint
	p.pool = kvevents.NewPool(cfg, p.index, tp, p.adapter)
	p.pool.Start(ctx)
	p.subs = kvevents.NewSubscriberManager(p.pool)
	if err := p.subs.EnsureSubscriber(ctx, pod, endpoint, cfg.TopicFilter, false); err != nil {
		p.stop()
		t.Fatal(err)
	}
	select {
	case <-logs.bound:
	case <-time.After(10 * time.Second):
		p.stop()
		t.Fatalf("llm-d's subscriber did not bind %s in 10s; its log:\n%s", endpoint, logs.dump())
	}
	return p
}

// stop ends the subscriber, then drains the pool's queues and waits for its
// workers (the context must still be live for them to drain).
func (p *pipeline) stop() {
	p.once.Do(func() {
		p.subs.Shutdown(p.ctx)
		p.pool.Shutdown(p.ctx)
	})
}

// checkPipeline: every batch publish sent reached the pool, in order, and
// decoded into events, with no error on llm-d's side.
func (p *pipeline) checkPipeline(t *testing.T, batches int64) {
	t.Helper()
	a := p.adapter
	a.mu.Lock()
	defer a.mu.Unlock()
	t.Logf("llm-d decoded %d batches: %d BlockStored (%d blocks), %d BlockRemoved (%d blocks), %d AllBlocksCleared",
		len(a.seqs), a.stored, a.storedBlocks, a.removed, a.removedBlocks, a.cleared)
	if int64(len(a.seqs)) != batches {
		t.Errorf("llm-d's pool took %d batches, publish reports %d", len(a.seqs), batches)
	}
	for i, s := range a.seqs {
		if s != uint64(i) {
			t.Errorf("message %d has sequence %d, want %d: llm-d missed or reordered batches", i, s, i)
			break
		}
	}
	if n := len(a.parseErrs); n > 0 {
		t.Errorf("llm-d's vLLM adapter failed to parse %d batches; first: %v", n, a.parseErrs[0])
	}
	if a.empty > 0 {
		t.Errorf("%d batches decoded to no events", a.empty)
	}
	for tp, n := range a.topics {
		if tp != topic {
			t.Errorf("%d messages on topic %q, want %q", n, tp, topic)
		}
	}
	if a.problems > 0 {
		t.Errorf("%d events llm-d could not index as sent; the first:\n  %s", a.problems, strings.Join(a.firstProblems, "\n  "))
	}

	if n, first := p.logs.failures(); n > 0 {
		t.Errorf("llm-d logged %d errors or skipped events; the first:\n  %s", n, strings.Join(first, "\n  "))
	}
	if d := p.logs.disconnects(); d > 0 {
		t.Logf("llm-d's subscriber saw the publisher hang up %d time(s) (expected once, when publish exits)", d)
	}
}

// checkIndex: llm-d's index holds exactly resident blocks for the pod,
// under the keys recomputed from the events' token ids, and a router
// scoring each resident prefix from its tokens alone finds all of it on the
// pod.
func (p *pipeline) checkIndex(t *testing.T, resident int) {
	t.Helper()
	ctx := p.ctx
	onPod := sets.New(pod)

	// Everything the index holds for the pod: every request key the pool
	// ever added, looked up in llm-d's index.
	held := map[kvblock.BlockHash]struct{}{}
	p.index.mu.Lock()
	added := len(p.index.added)
	for k := range p.index.added {
		got, err := p.index.Lookup(ctx, []kvblock.BlockHash{k}, onPod)
		if err != nil {
			t.Fatalf("llm-d index lookup: %v", err)
		}
		if len(got[k]) > 0 {
			held[k] = struct{}{}
		}
	}
	p.index.mu.Unlock()
	t.Logf("llm-d's index holds %d blocks for %s (of %d keys ever added)", len(held), pod, added)
	if len(held) != resident {
		t.Errorf("llm-d's index holds %d blocks for %s, publish reports resident_blocks %d", len(held), pod, resident)
	}

	a := p.adapter
	a.mu.Lock()
	defer a.mu.Unlock()
	gpu := a.on[gpuTier]
	if len(gpu) != resident {
		t.Errorf("the events leave %d blocks resident, publish reports resident_blocks %d", len(gpu), resident)
	}
	// Each resident engine block maps, in llm-d's index, to the key the
	// test recomputes from its tokens and its parent's key.
	want := map[kvblock.BlockHash]struct{}{}
	bad := 0
	for h := range gpu {
		b := a.blocks[h]
		want[b.key] = struct{}{}
		rk, err := p.index.GetRequestKey(ctx, kvblock.BlockHash(h))
		if err != nil || rk != b.key {
			if bad++; bad <= 5 {
				t.Errorf("engine block %#x: llm-d maps it to request key %v (err %v), recomputed %v", h, rk, err, b.key)
			}
		}
	}
	if bad > 5 {
		t.Errorf("... %d resident engine blocks in all map to the wrong request key", bad)
	}
	missing, extra := 0, 0
	for k := range want {
		if _, ok := held[k]; !ok {
			missing++
		}
	}
	for k := range held {
		if _, ok := want[k]; !ok {
			extra++
		}
	}
	if missing > 0 || extra > 0 {
		t.Errorf("llm-d's index lacks %d of the %d recomputed resident keys and holds %d others for %s",
			missing, len(want), extra, pod)
	}

	// A router's view: tokens of each resident leaf's whole prefix, from
	// the root, hashed by llm-d's token processor, all hit on the pod.
	children := map[uint64]bool{}
	for h := range gpu {
		children[a.blocks[h].parent] = true
	}
	leaves, prefixBlocks, short := 0, 0, 0
	for h := range gpu {
		if children[h] {
			continue
		}
		var chain [][]uint32
		for x := h; x != 0; {
			b, ok := a.blocks[x]
			if !ok || !gpu[x] {
				chain = nil // a resident block under a gone parent: reported above
				break
			}
			chain = append(chain, b.tokens)
			x = b.parent
		}
		if chain == nil {
			short++
			continue
		}
		slices.Reverse(chain)
		keys, err := p.tp.TokensToKVBlockKeys(kvblock.EmptyBlockHash, slices.Concat(chain...), model, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.index.Lookup(ctx, keys, onPod)
		if err != nil {
			t.Fatal(err)
		}
		leaves++
		prefixBlocks += len(keys)
		if len(got) != len(keys) {
			if short++; short <= 5 {
				t.Errorf("a router scoring the %d-block prefix of leaf %#x finds %d blocks on %s", len(keys), h, len(got), pod)
			}
		}
	}
	if short > 0 {
		t.Errorf("%d resident prefixes are not found whole from their tokens", short)
	}
	t.Logf("router view: %d resident leaves, their %d prefix blocks looked up from the tokens alone", leaves, prefixBlocks)
}

// recordingIndex is llm-d's in-memory index, noting every request key the
// pool adds: the in-memory index exports no count, so the test looks each
// noted key up to count what the index holds for the pod.
type recordingIndex struct {
	kvblock.Index
	mu    sync.Mutex
	added map[kvblock.BlockHash]struct{}
}

func (r *recordingIndex) Add(ctx context.Context, engineKeys, requestKeys []kvblock.BlockHash, entries []kvblock.PodEntry) error {
	r.mu.Lock()
	for _, k := range requestKeys {
		r.added[k] = struct{}{}
	}
	r.mu.Unlock()
	return r.Index.Add(ctx, engineKeys, requestKeys, entries)
}

// ---- the adapter, observed ----

// observingAdapter is llm-d's vLLM adapter, passed through unchanged, that
// counts what it decodes and keeps a model of the pod's blocks: for each
// engine hash its parent, its tokens and the request key llm-d's token
// processor derives for it, and the device tiers that hold it, with
// llm-d's own rules (pool.go).
type observingAdapter struct {
	next      kvevents.EngineAdapter
	tp        kvblock.TokenProcessor
	blockSize int

	mu            sync.Mutex
	seqs          []uint64
	topics        map[string]int
	parseErrs     []error
	empty         int
	stored        int
	removed       int
	cleared       int
	storedBlocks  int
	removedBlocks int
	problems      int
	firstProblems []string
	blocks        map[uint64]*shadowBlock    // engine hash -> block; llm-d's engine->request mapping
	on            map[string]map[uint64]bool // device tier, as llm-d names it -> the engine hashes it holds
}

// gpuTier is llm-d's device tier for the GPU, and for an event without a
// medium.
const gpuTier = "gpu"

// deviceTier is the device tier llm-d's pool files an event's medium
// under: lower case, the GPU's when there is none.
func deviceTier(medium string) string {
	if medium == "" {
		return gpuTier
	}
	return strings.ToLower(medium)
}

// tier returns the blocks device tier dt holds.
func (a *observingAdapter) tier(dt string) map[uint64]bool {
	if a.on[dt] == nil {
		a.on[dt] = map[uint64]bool{}
	}
	return a.on[dt]
}

// held reports whether any device tier holds engine block h: llm-d keeps
// its engine->request mapping while one does.
func (a *observingAdapter) held(h uint64) bool {
	for _, set := range a.on {
		if set[h] {
			return true
		}
	}
	return false
}

type shadowBlock struct {
	parent uint64
	tokens []uint32
	key    kvblock.BlockHash
}

func newObservingAdapter(next kvevents.EngineAdapter, tp kvblock.TokenProcessor, blockSize int) *observingAdapter {
	return &observingAdapter{next: next, tp: tp, blockSize: blockSize, topics: map[string]int{},
		blocks: map[uint64]*shadowBlock{}, on: map[string]map[uint64]bool{gpuTier: {}}}
}

func (a *observingAdapter) ShardingKey(msg *kvevents.RawMessage) string {
	return a.next.ShardingKey(msg)
}

func (a *observingAdapter) messages() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return int64(len(a.seqs))
}

//nolint:gocritic // the interface's signature
func (a *observingAdapter) ParseMessage(msg *kvevents.RawMessage) (string, string, kvevents.EventBatch, error) {
	podID, modelName, batch, err := a.next.ParseMessage(msg)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seqs = append(a.seqs, msg.Sequence)
	a.topics[msg.Topic]++
	if err != nil {
		a.parseErrs = append(a.parseErrs, fmt.Errorf("seq %d: %w", msg.Sequence, err))
		return podID, modelName, batch, err
	}
	if len(batch.Events) == 0 {
		a.empty++
	}
	for _, ev := range batch.Events {
		a.observe(msg.Sequence, modelName, ev)
	}
	return podID, modelName, batch, err
}

func (a *observingAdapter) problem(seq uint64, format string, args ...any) {
	a.problems++
	if len(a.firstProblems) < 10 {
		a.firstProblems = append(a.firstProblems, fmt.Sprintf("seq %d: ", seq)+fmt.Sprintf(format, args...))
	}
}

func (a *observingAdapter) observe(seq uint64, modelName string, ev kvevents.GenericEvent) {
	switch ev := ev.(type) {
	case *kvevents.BlockStoredEvent:
		a.stored++
		a.storedBlocks += len(ev.BlockHashes)
		if ev.BlockSize != a.blockSize {
			a.problem(seq, "BlockStored block_size %d, llm-d's is %d", ev.BlockSize, a.blockSize)
		}
		on := a.tier(deviceTier(ev.DeviceTier))
		for _, h := range ev.BlockHashes {
			if on[h] {
				a.problem(seq, "BlockStored %#x on %s, which holds it", h, deviceTier(ev.DeviceTier))
			}
		}
		if len(ev.Tokens) == 0 {
			// A store without tokens (vLLM's offloading, a tier below the
			// GPU): llm-d adds the tier's entry to the request key it maps
			// each block to, and skips the blocks it maps to none.
			for _, h := range ev.BlockHashes {
				if _, ok := a.blocks[h]; !ok {
					a.problem(seq, "BlockStored %#x on %s without tokens, unknown to llm-d (on no other tier)", h, deviceTier(ev.DeviceTier))
					continue
				}
				on[h] = true
			}
			return
		}
		if len(ev.Tokens) != a.blockSize*len(ev.BlockHashes) {
			a.problem(seq, "BlockStored of %d blocks carries %d token ids, want %d", len(ev.BlockHashes), len(ev.Tokens), a.blockSize*len(ev.BlockHashes))
			return
		}
		if ev.ExtraKeys != nil || ev.GroupIdx != nil {
			a.problem(seq, "BlockStored carries extra_keys %v or group_idx %v", ev.ExtraKeys, ev.GroupIdx)
		}
		if ev.LoraName != nil && *ev.LoraName != "" {
			modelName = *ev.LoraName // as llm-d does
		}
		parent := kvblock.EmptyBlockHash
		if ev.ParentHash != 0 {
			b, ok := a.blocks[ev.ParentHash]
			if !ok {
				// llm-d logs "Failed to get request key for parent block"
				// and drops the event.
				a.problem(seq, "BlockStored under parent %#x, unknown to llm-d (never stored, or removed)", ev.ParentHash)
				return
			}
			parent = b.key
		}
		keys, err := a.tp.TokensToKVBlockKeys(parent, ev.Tokens, modelName, nil)
		if err != nil || len(keys) != len(ev.BlockHashes) {
			a.problem(seq, "%d token ids give %d request keys for %d blocks (err %v)", len(ev.Tokens), len(keys), len(ev.BlockHashes), err)
			return
		}
		prev := ev.ParentHash
		for i, h := range ev.BlockHashes {
			if h == 0 {
				a.problem(seq, "BlockStored hash 0, which llm-d reads as no parent")
			}
			a.blocks[h] = &shadowBlock{parent: prev, tokens: ev.Tokens[i*a.blockSize : (i+1)*a.blockSize], key: keys[i]}
			on[h] = true
			prev = h
		}
	case *kvevents.BlockRemovedEvent:
		a.removed++
		a.removedBlocks += len(ev.BlockHashes)
		dt := deviceTier(ev.DeviceTier)
		on := a.tier(dt)
		for _, h := range ev.BlockHashes {
			if !on[h] {
				a.problem(seq, "BlockRemoved %#x on %s, not resident there", h, dt)
			}
			// llm-d drops the pod's entry of that tier and, the key held
			// on no tier any more, the engine->request mapping with it.
			delete(on, h)
			if !a.held(h) {
				delete(a.blocks, h)
			}
		}
	case *kvevents.AllBlocksClearedEvent:
		// llm-d drops the pod's entries but keeps the engine->request
		// mappings (InMemoryIndex.Clear).
		a.cleared++
		for _, set := range a.on {
			clear(set)
		}
	default:
		a.problem(seq, "event of type %T", ev)
	}
}

// ---- llm-d's log, captured ----

type logEntry struct {
	error bool
	level int
	name  string
	msg   string
	err   error
	kv    []any
}

func (e logEntry) String() string {
	var b strings.Builder
	if e.name != "" {
		fmt.Fprintf(&b, "[%s] ", e.name)
	}
	b.WriteString(e.msg)
	if e.err != nil {
		fmt.Fprintf(&b, ": %v", e.err)
	}
	for i := 0; i+1 < len(e.kv); i += 2 {
		fmt.Fprintf(&b, " %v=%v", e.kv[i], e.kv[i+1])
	}
	return b.String()
}

// logRecorder keeps what llm-d logs up to its DEBUG level. logr passes
// every Error through whatever the level (llm-d reports its failures to
// index an event as V(DEBUG).Error), so all errors are kept.
type logRecorder struct {
	mu        sync.Mutex
	entries   []logEntry
	bound     chan struct{}
	boundOnce sync.Once
}

func newLogRecorder() *logRecorder { return &logRecorder{bound: make(chan struct{})} }

const maxLogEntries = 10_000

func (r *logRecorder) add(e logEntry) {
	if !e.error && e.msg == "Bound subscriber socket" {
		r.boundOnce.Do(func() { close(r.bound) })
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.entries) < maxLogEntries {
		r.entries = append(r.entries, e)
	}
}

// isDisconnect reports whether e is llm-d's subscriber noting that its
// peer hung up: it then closes its socket and binds again 5s later, which
// is how it sees a publisher exit.
func isDisconnect(e logEntry) bool {
	return e.error && e.msg == "Failed to receive message from zmq subscriber"
}

// flaggedInfo are llm-d's non-error lines that mean an event was not
// indexed as sent.
var flaggedInfo = []string{
	"Unknown event",
	"no indexed engine keys found for device-tier update, skipping",
	"AllBlocksCleared carried a device tier; clearing all tiers anyway (tier-scoped clear is not supported)",
}

// failures returns how many error lines (but a disconnect) and flagged
// lines llm-d logged, and the first few of them.
func (r *logRecorder) failures() (n int, first []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.entries {
		if isDisconnect(e) || !e.error && !slices.Contains(flaggedInfo, e.msg) {
			continue
		}
		if n++; len(first) < 10 {
			first = append(first, e.String())
		}
	}
	return n, first
}

func (r *logRecorder) disconnects() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.entries {
		if isDisconnect(e) {
			n++
		}
	}
	return n
}

func (r *logRecorder) dump() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, e := range r.entries {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// recordingSink is a logr.LogSink into a logRecorder.
type recordingSink struct {
	rec    *logRecorder
	name   string
	values []any
}

func (s *recordingSink) Init(logr.RuntimeInfo) {}

func (s *recordingSink) Enabled(level int) bool { return level <= logging.DEBUG }

func (s *recordingSink) Info(level int, msg string, kv ...any) {
	s.rec.add(logEntry{level: level, name: s.name, msg: msg, kv: slices.Concat(s.values, kv)})
}

func (s *recordingSink) Error(err error, msg string, kv ...any) {
	s.rec.add(logEntry{error: true, name: s.name, msg: msg, err: err, kv: slices.Concat(s.values, kv)})
}

func (s *recordingSink) WithValues(kv ...any) logr.LogSink {
	c := *s
	c.values = slices.Concat(s.values, kv)
	return &c
}

func (s *recordingSink) WithName(name string) logr.LogSink {
	c := *s
	if c.name != "" {
		name = c.name + "/" + name
	}
	c.name = name
	return &c
}

// ---- helpers ----

// kvevictBinary builds cmd/kvevict through this module's replace of
// github.com/sagellm/kvevict by the working tree, or returns $KVEVICT_BIN
// to run another build of it.
func kvevictBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("KVEVICT_BIN"); bin != "" {
		return bin
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to build kvevict with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "kvevict")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, "github.com/sagellm/kvevict/cmd/kvevict")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build github.com/sagellm/kvevict/cmd/kvevict: %v\n%s", err, out)
	}
	return bin
}

// freeAddr returns a 127.0.0.1 address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(ctx context.Context, cond func() bool) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
