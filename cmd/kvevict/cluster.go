package main

// The cluster commands speak vLLM's KV events (package kvevents):
//
//	kvevict publish -endpoint E -trace FILE -capacity N [-strategy S] [-topic T]
//	                [-warmup D] [-format table|json]
//	kvevict mirror -endpoint E -duration D [-capacity N] [-format table|json]
//
// publish replays a Mooncake trace through a prefix tree of N blocks, as a
// kvevict-managed pool would hold them, and publishes every store and
// removal as a vLLM engine does, one batch per request. mirror subscribes
// to such a stream (or a vLLM engine's) and keeps each topic's blocks in a
// bounded mirror, as a KV-aware router does.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/kvevents"
	"github.com/sagellm/kvevict/prefix"
	"github.com/sagellm/kvevict/sim"
)

// Defaults of the cluster commands.
const (
	defaultWarmup         = time.Second
	defaultMirrorCapacity = 1_000_000 // blocks per topic: above any one engine's pool
	defaultPublishKey     = kvevict.LRU
)

// newClusterFlags returns a flag set that reports mistakes as one line and
// prints its defaults for -h.
func newClusterFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("kvevict "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseCluster parses args, printing usage on -h.
func parseCluster(fs *flag.FlagSet, args []string, usage string, stderr io.Writer) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fmt.Fprintln(stderr, "usage: "+usage)
			fs.PrintDefaults()
			return err
		}
		return usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// checkEndpoint refuses an endpoint ZeroMQ cannot use, before any socket
// opens.
func checkEndpoint(ep string) error {
	if ep == "" {
		return usagef("-endpoint is required, such as tcp://*:5557 (bind) or tcp://host:5557 (connect)")
	}
	scheme, rest, ok := strings.Cut(ep, "://")
	if !ok || rest == "" || !slices.Contains(zmq4.Transports(), scheme) {
		return usagef("-endpoint %q must be transport://address with transport one of %s", ep, strings.Join(zmq4.Transports(), ", "))
	}
	return nil
}

func checkFormat(format string) error {
	if format != "table" && format != "json" {
		return usagef("-format must be table or json, got %q", format)
	}
	return nil
}

// publishOptions are publish's parsed flags.
type publishOptions struct {
	endpoint, trace, topic, format string
	capacity                       int
	strategy                       kvevict.Strategy
	warmup                         time.Duration
}

func parsePublish(args []string, stderr io.Writer) (*publishOptions, error) {
	fs := newClusterFlags("publish")
	o := &publishOptions{}
	var strategy string
	fs.StringVar(&o.endpoint, "endpoint", "", "ZeroMQ PUB `endpoint`; binds if it holds * or :: or is ipc:// or inproc://, else connects")
	fs.StringVar(&o.trace, "trace", "", "Mooncake JSONL trace `file` to replay")
	fs.IntVar(&o.capacity, "capacity", 0, "blocks the pool holds")
	fs.StringVar(&strategy, "strategy", string(defaultPublishKey), "eviction strategy of the pool's prefix tree: "+keyStrategyNames())
	fs.StringVar(&o.topic, "topic", "", "topic frame of every message (llm-d uses kv@<pod>@<model>)")
	fs.DurationVar(&o.warmup, "warmup", defaultWarmup, "wait after the socket is up before the first message, for subscribers to connect")
	fs.StringVar(&o.format, "format", "table", "output: table or json")
	if err := parseCluster(fs, args, "kvevict publish -endpoint E -trace FILE -capacity N [flags]", stderr); err != nil {
		return nil, err
	}
	if err := checkEndpoint(o.endpoint); err != nil {
		return nil, err
	}
	if o.trace == "" {
		return nil, usagef("-trace is required")
	}
	if o.capacity < 1 {
		return nil, usagef("-capacity must be at least 1 block, got %d", o.capacity)
	}
	if o.warmup < 0 {
		return nil, usagef("-warmup must not be negative, got %v", o.warmup)
	}
	if err := checkFormat(o.format); err != nil {
		return nil, err
	}
	s, err := kvevict.ParseStrategy(strategy)
	if err != nil {
		return nil, usagef("%v", err)
	}
	if !prefix.Supports(s) {
		return nil, usagef("-strategy %s ranks by lists of sequences; a prefix tree evicts by a key strategy or auto", s)
	}
	o.strategy = s
	return o, nil
}

// keyStrategyNames lists the strategies a prefix tree can evict by.
func keyStrategyNames() string {
	var names []string
	for _, s := range kvevict.Strategies() {
		if prefix.Supports(s) {
			names = append(names, string(s))
		}
	}
	return strings.Join(names, ", ")
}

// publishSummary is publish's result; -format json prints it as is.
type publishSummary struct {
	Batches        int64 `json:"batches"`
	StoredBlocks   int64 `json:"stored_blocks"`
	RemovedBlocks  int64 `json:"removed_blocks"`
	ResidentBlocks int   `json:"resident_blocks"`
}

// newPoolTree is the one place the commands build a prefix tree, for a
// pool of capacity blocks.
func newPoolTree(s kvevict.Strategy, capacity int, onEvent func(prefix.Event)) (*prefix.Tree, error) {
	opts := []prefix.Option{prefix.WithEvents(onEvent)}
	if s.Adaptive() {
		// Auto's miniature caches simulate a pool of the pool's size.
		opts = append(opts, prefix.WithStrategyOptions(kvevict.WithCapacity(capacity)))
	}
	return prefix.New(s, opts...)
}

func publish(args []string, stdout, stderr io.Writer) error {
	o, err := parsePublish(args, stderr)
	if err != nil {
		return err
	}
	w, err := sim.LoadTrace(o.trace)
	if err != nil {
		return err
	}
	var pending []kvevents.Event
	var sum publishSummary
	medium := kvevents.MediumGPU
	tree, err := newPoolTree(o.strategy, o.capacity, func(e prefix.Event) {
		switch e.Kind {
		case prefix.Stored:
			sum.StoredBlocks += int64(len(e.Hashes))
		case prefix.Removed:
			sum.RemovedBlocks += int64(len(e.Hashes))
		}
		pending = append(pending, kvevents.FromPrefix(e, int64(w.BlockTokens), &medium))
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pub, err := kvevents.NewPublisher(ctx, o.endpoint, kvevents.WithTopic(o.topic))
	if err != nil {
		return err
	}
	time.Sleep(o.warmup)
	for i := range w.Requests {
		req := &w.Requests[i]
		if err := admit(tree, req.HashIDs, int64(i), o.capacity); err != nil {
			pub.Close()
			return err
		}
		if len(pending) == 0 {
			continue
		}
		b := kvevents.EventBatch{TS: float64(req.Timestamp) / 1000, Events: pending}
		if _, err := pub.Publish(&b); err != nil {
			pub.Close()
			return err
		}
		sum.Batches++
		pending = pending[:0]
	}
	if err := pub.Close(); err != nil {
		return err
	}
	sum.ResidentBlocks = tree.Len()
	if o.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	}
	fmt.Fprintf(stdout, "published %s (%d requests) to %s, topic %q, capacity %d blocks, %s\n",
		w.Name, len(w.Requests), o.endpoint, o.topic, o.capacity, o.strategy)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "batches\tstored_blocks\tremoved_blocks\tresident_blocks\t")
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t\n", sum.Batches, sum.StoredBlocks, sum.RemovedBlocks, sum.ResidentBlocks)
	return tw.Flush()
}

// admit serves one request on a pool of capacity blocks, as an engine's
// prefix cache does: the resident prefix is locked while room is made, the
// room comes from evicting leaves, and the rest of the prompt is stored,
// cut short if the pool cannot hold it. So the tree never holds more than
// capacity blocks, and every block stored hangs under a resident parent.
func admit(tree *prefix.Tree, hashes []uint64, tick int64, capacity int) error {
	if len(hashes) == 0 {
		return nil
	}
	a := prefix.Access{Tick: tick}
	matched, err := tree.MatchLocked(hashes, a)
	if err != nil {
		return err
	}
	if need := len(hashes) - matched - (capacity - tree.Len()); need > 0 {
		if _, err := tree.Evict(min(need, tree.Evictable())); err != nil {
			return err
		}
	}
	if fit := matched + capacity - tree.Len(); fit > matched {
		if _, err := tree.Insert(hashes[:min(fit, len(hashes))], a); err != nil {
			return err
		}
	}
	if matched > 0 {
		return tree.Unlock(hashes[:matched])
	}
	return nil
}

// mirrorOptions are mirror's parsed flags.
type mirrorOptions struct {
	endpoint, format string
	duration         time.Duration
	capacity         int
}

func parseMirror(args []string, stderr io.Writer) (*mirrorOptions, error) {
	fs := newClusterFlags("mirror")
	o := &mirrorOptions{}
	fs.StringVar(&o.endpoint, "endpoint", "", "ZeroMQ SUB `endpoint`; binds if it holds * or :: (publishers connect to it), else connects (to a publisher that binds)")
	fs.DurationVar(&o.duration, "duration", 0, "how long to mirror")
	fs.IntVar(&o.capacity, "capacity", defaultMirrorCapacity, "blocks the mirror holds per topic, evicting leaves first past it")
	fs.StringVar(&o.format, "format", "table", "output: table or json")
	if err := parseCluster(fs, args, "kvevict mirror -endpoint E -duration D [flags]", stderr); err != nil {
		return nil, err
	}
	if err := checkEndpoint(o.endpoint); err != nil {
		return nil, err
	}
	if o.duration <= 0 {
		return nil, usagef("-duration must be positive, such as 30s, got %v", o.duration)
	}
	if o.capacity < 1 {
		return nil, usagef("-capacity must be at least 1 block, got %d", o.capacity)
	}
	if err := checkFormat(o.format); err != nil {
		return nil, err
	}
	return o, nil
}

// mirrorRow is one topic of mirror's output; -format json prints an array
// of them.
type mirrorRow struct {
	Topic          string `json:"topic"`
	ResidentBlocks int    `json:"resident_blocks"`
	Batches        int64  `json:"batches"`
	MissedBatches  int64  `json:"missed_batches"`
}

func mirror(args []string, stdout, stderr io.Writer) error {
	o, err := parseMirror(args, stderr)
	if err != nil {
		return err
	}
	m, err := kvevents.NewMirror(o.capacity)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.duration)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	sub, err := kvevents.NewSubscriber(ctx, o.endpoint, kvevents.WithSubscriberLogger(logger))
	if err != nil {
		return err
	}
	sub.Run(ctx, m.Handle)
	rows := []mirrorRow{}
	for _, t := range m.Topics() {
		rows = append(rows, mirrorRow{t.Topic, t.ResidentBlocks, t.Batches, t.MissedBatches})
	}
	if st := sub.Stats(); st.Malformed+st.Oversized+st.UnknownEvent+st.FieldType > 0 {
		fmt.Fprintf(stderr, "kvevict: skipped bad input: %d malformed, %d oversized messages; %d unknown, %d mistyped events\n",
			st.Malformed, st.Oversized, st.UnknownEvent, st.FieldType)
	}
	if o.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	fmt.Fprintf(stdout, "mirrored %s for %v, capacity %d blocks per topic\n", o.endpoint, o.duration, o.capacity)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "topic\tresident_blocks\tbatches\tmissed_batches\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%q\t%d\t%d\t%d\t\n", r.Topic, r.ResidentBlocks, r.Batches, r.MissedBatches)
	}
	return tw.Flush()
}

// helpFor names the command whose -h explains a usage error in args.
func helpFor(args []string) string {
	if len(args) > 0 && (args[0] == "publish" || args[0] == "mirror") {
		return args[0]
	}
	return "compare"
}
