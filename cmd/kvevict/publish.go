package main

// kvevict publish speaks vLLM's KV events (package kvevents):
//
//	kvevict publish -bind ADDR | -connect ADDR -trace FILE -capacity N [-strategy S]
//	                [-tier MEDIUM:BLOCKS:STRATEGY ... [-write through|selective=N|back]
//	                 [-inclusive|-exclusive]]
//	                [-topic T] [-block-size N] [-dp-rank N] [-encoding mixed|map|array]
//	                [-replay-bind ADDR [-replay-buffer N]] [-warmup D] [-linger D]
//	                [-require-subscribers N] [-allow CIDR,...] [-memory BYTES]
//	                [-curve-secret FILE [-curve-server-key FILE] [-curve-clients FILE]]
//	                [-format table|json]
//
// It replays a Mooncake trace through a prefix tree of N blocks, as a
// kvevict-managed pool would hold them, and publishes every store and
// removal as a vLLM engine does, one batch per request, for kvevict mirror
// or a KV-aware router to follow. With -tier the tree is the GPU over
// tiers below it (a tier.Tree, as a cluster's engine), and the batches
// carry each tier's stores and removals too, with its medium (CPU or
// STORAGE), as vLLM's offloading sends them. A run fails unless
// -require-subscribers subscribers received batches of its topic, and
// when one of those lost batches (its queue was full, or it had not taken
// them when -linger ran out). SIGINT and SIGTERM stop the replay: the
// summary of what was published then is printed, flagged partial, and
// the exit status is 130 or 143.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/kvevents"
	"github.com/sagellm/kvevict/prefix"
	"github.com/sagellm/kvevict/tier"
)

// Defaults of kvevict publish.
const (
	defaultWarmup     = time.Second
	defaultLinger     = 5 * time.Second
	defaultPublishKey = kvevict.LRU
)

// publishOptions are publish's parsed flags.
type publishOptions struct {
	endpoint, replay, trace, topic, format string
	direction                              kvevents.Direction
	capacity, blockSize, replayBuffer      int
	requireSubscribers                     int
	rank                                   int64
	encoding                               kvevents.Encoding
	strategy                               kvevict.Strategy
	warmup, linger                         time.Duration
	tiers                                  tierOptions // -tier, -write, -inclusive, -exclusive
	allow                                  []netip.Prefix
	curve                                  *kvevents.Curve
	memory                                 memoryFlag
}

func parsePublish(args []string, help io.Writer) (*publishOptions, error) {
	fs := newFlagSet("publish")
	o := &publishOptions{}
	var strategy string
	var sock socketFlags
	sock.register(fs, "PUB", "subscriber", "kvevict mirror", "it holds a wildcard host (*, 0.0.0.0, [::]) or port (*) or is ipc:// or inproc://")
	var access accessFlags
	access.register(fs, "the PUB socket (with -bind) and the replay socket")
	fs.StringVar(&o.trace, "trace", "", "Mooncake JSONL trace `file` to replay, plain or gzip-compressed, read once (a pipe serves); - reads standard input")
	fs.IntVar(&o.capacity, "capacity", 0, "blocks the pool holds, 1 to "+strconv.Itoa(maxCapacity))
	fs.StringVar(&strategy, "strategy", string(defaultPublishKey), "eviction strategy of the pool's prefix tree: "+keyStrategyNames())
	var write string
	var inclusive bool
	tierFlags(fs, &o.tiers, &write, &inclusive, false)
	fs.StringVar(&o.topic, "topic", "", "topic frame of every message (llm-d uses kv@<pod>@<model>)")
	fs.IntVar(&o.blockSize, "block-size", 0, "tokens per block written in every BlockStored, with as many token ids per block, 1 to "+strconv.Itoa(maxBlockSize)+" (default the trace's)")
	fs.Int64Var(&o.rank, "dp-rank", 0, "data_parallel_rank written on every batch")
	var encoding string
	fs.StringVar(&encoding, "encoding", kvevents.EncodingMixed.String(), "payload encoding: mixed (current vLLM: an array batch of map events), map or array")
	var replayBind, replayOlder string
	fs.StringVar(&replayBind, "replay-bind", "", "bind a ROUTER socket on `ADDR` that answers replay requests (kvevict mirror -replay-connect); none by default")
	fs.StringVar(&replayOlder, "replay-endpoint", "", "the older name of -replay-bind: `ADDR` is always bound")
	fs.IntVar(&o.replayBuffer, "replay-buffer", kvevents.DefaultReplayBuffer, "batches the replay socket keeps (vLLM's buffer_steps)")
	fs.DurationVar(&o.warmup, "warmup", defaultWarmup, "wait after the socket is up before the first message, for subscribers to connect")
	fs.DurationVar(&o.linger, "linger", defaultLinger, "at the end, wait at most this long for the subscribers to take what is queued for them and for replay answers under way")
	fs.IntVar(&o.requireSubscribers, "require-subscribers", 1, "fail (exit 1) unless at least `N` subscribers received batches of the topic (on the stream, or by replay alone), or if one that did lost batches; 0 publishes to nobody without complaint")
	fs.StringVar(&o.format, "format", "table", "output: table or json")
	registerMemory(fs, &o.memory, "the replay buffer, the subscribers' queues, connections and subscriptions (docs/kvevents.md, Limits)")
	if err := parseFlagSet(fs, args, "kvevict publish -bind ADDR | -connect ADDR -trace FILE -capacity N [flags]", help); err != nil {
		return nil, err
	}
	var err error
	if o.endpoint, o.direction, err = sock.resolve(kvevents.Binds); err != nil {
		return nil, err
	}
	if o.replay, err = replayAddress("-replay-bind", replayBind, replayOlder, false); err != nil {
		return nil, err
	}
	if o.allow, err = access.prefixes(); err != nil {
		return nil, err
	}
	if len(o.allow) > 0 && o.direction != kvevents.Bind && o.replay == "" {
		return nil, usagef("-allow applies to the sockets publish binds, and it binds none: its PUB socket connects (-connect) and there is no -replay-bind")
	}
	if o.curve, err = access.curve(o.direction == kvevents.Bind || o.replay != "", o.direction != kvevents.Bind); err != nil {
		return nil, err
	}
	if err := checkCount("replay-buffer", o.replayBuffer, 1, maxReplayBuffer, "batches"); err != nil {
		return nil, err
	}
	if err := checkMemory(o.memory); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.replay == "" && set["replay-buffer"] {
		return nil, usagef("-replay-buffer needs -replay-bind")
	}
	if err := checkCount("require-subscribers", o.requireSubscribers, 0, maxSubscribers, "connections"); err != nil {
		return nil, err
	}
	if set["block-size"] { // unset, it is the trace's
		if err := checkCount("block-size", o.blockSize, 1, maxBlockSize, "tokens"); err != nil {
			return nil, err
		}
	}
	if o.rank < 0 {
		return nil, usagef("-dp-rank must not be negative, got %d", o.rank)
	}
	e, err := kvevents.ParseEncoding(encoding)
	if err != nil {
		return nil, usagef("-encoding must be mixed, map or array, got %q", encoding)
	}
	o.encoding = e
	if o.trace == "" {
		return nil, usagef("-trace is required")
	}
	if err := checkCount("capacity", o.capacity, 1, maxCapacity, "blocks"); err != nil {
		return nil, err
	}
	if o.warmup < 0 {
		return nil, usagef("-warmup must not be negative, got %v", o.warmup)
	}
	if o.linger < 0 {
		return nil, usagef("-linger must not be negative, got %v", o.linger)
	}
	if err := checkFormat(o.format); err != nil {
		return nil, err
	}
	s, err := kvevict.ParseStrategy(strategy)
	if err != nil {
		return nil, usagef("%v", err)
	}
	if prefix.Ranks(s) != nil {
		return nil, usagef("-strategy %s ranks by lists of sequences; a prefix tree evicts by a key strategy or auto", s)
	}
	o.strategy = s
	if err := o.tiers.check(set, write, inclusive, []int{o.capacity}); err != nil {
		return nil, err
	}
	if o.tiers.write == tier.WriteVLLM {
		return nil, usagef("-write vllm replays vLLM's own GPU pool, and publish's pool is a prefix tree: use through, selective=N or back")
	}
	return o, nil
}

// keyStrategyNames lists the strategies a prefix tree can evict by.
func keyStrategyNames() string {
	var names []string
	for _, s := range kvevict.Strategies() {
		if prefix.Ranks(s) == nil {
			names = append(names, string(s))
		}
	}
	return strings.Join(names, ", ")
}

// maxBlockSize bounds -block-size: the token ids publish writes per block.
const maxBlockSize = 1 << 16

// publishSummary is publish's result; -format json prints it as is. Sent,
// dropped and unsent add up over the subscribers connected at each batch
// (see kvevents.PublisherStats): a batch sent to two subscribers counts
// twice, and one published before any subscriber connected not at all.
// Connections counts the subscriber connections made during the run, the
// ones gone included; Reached, those that received at least one batch,
// and Lossy, those of them that lost batches; ReplayReached, the replay
// connections answered with at least one batch. The blocks stored, removed
// and resident are the GPU's; with -tier, Tiers gives them for every
// tier, the GPU first. Partial is set when a signal stopped the replay
// before the trace's end.
type publishSummary struct {
	Batches        int64              `json:"batches"`
	StoredBlocks   int64              `json:"stored_blocks"`
	RemovedBlocks  int64              `json:"removed_blocks"`
	ResidentBlocks int                `json:"resident_blocks"`
	Write          string             `json:"write,omitempty"`     // with -tier: through, selective=N or back
	Inclusion      string             `json:"inclusion,omitempty"` // with -tier: inclusive or exclusive
	Tiers          []tierResult       `json:"tiers,omitempty"`
	Sent           int64              `json:"sent"`
	Dropped        int64              `json:"dropped"`
	Unsent         int64              `json:"unsent"`
	Subscribers    []subscriberResult `json:"subscribers"`
	Connections    int64              `json:"connections"`
	Reached        int64              `json:"reached"`
	ReplayReached  int64              `json:"replay_reached"`
	Lossy          int64              `json:"lossy"`
	Partial        bool               `json:"partial,omitempty"`
}

// tierResult is one tier's part of the summary: the blocks its events
// stored and removed, those it holds at the end (stored less removed),
// the blocks requests found there (on the GPU their cached prefix, below
// the blocks loaded from it) and those offered to it and not stored.
type tierResult struct {
	Medium         tier.Medium `json:"medium"`
	CapacityBlocks int         `json:"capacity_blocks"`
	Strategy       string      `json:"strategy"`
	StoredBlocks   int64       `json:"stored_blocks"`
	RemovedBlocks  int64       `json:"removed_blocks"`
	ResidentBlocks int         `json:"resident_blocks"`
	Hits           int64       `json:"hits"`
	FailedStores   int64       `json:"failed_stores"`
}

// subscriberResult is one subscriber connection's part of the summary.
type subscriberResult struct {
	Peer    string `json:"peer"`
	Sent    int64  `json:"sent"`
	Dropped int64  `json:"dropped"`
	Unsent  int64  `json:"unsent"`
}

// newPool builds publish's pool: a prefix tree of o.capacity blocks
// ranked by o.strategy, the GPU, over the tiers of -tier, if any. onGPU
// receives the tree's events and onTier the tiers', in the order the pool
// makes the changes (tier.Tree.Request).
func newPool(o *publishOptions, onGPU func(prefix.Event), onTier func(tier.Event)) (*tier.Tree, error) {
	levels := []tier.Level{{Medium: tier.GPU, Capacity: o.capacity, Strategy: o.strategy}}
	for _, s := range o.tiers.specs {
		levels = append(levels, tier.Level{Medium: s.medium, Capacity: s.capacity(o.capacity), Strategy: s.strategy})
	}
	return tier.NewTree(tier.Config{Levels: levels, Write: o.tiers.write, Threshold: o.tiers.threshold,
		Exclusive: o.tiers.exclusive, Events: onTier}, onGPU)
}

func publish(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	o, err := parsePublish(args, stdout)
	if err != nil {
		return err
	}
	w, err := loadTrace(o.trace, stdin)
	if err != nil {
		return err
	}
	if o.blockSize == 0 {
		o.blockSize = w.BlockTokens
	}
	var pending []kvevents.Event
	var sum publishSummary
	// Per tier, the GPU first: the blocks its events stored and removed.
	stored, removed := make([]int64, 1+len(o.tiers.specs)), make([]int64, 1+len(o.tiers.specs))
	count := func(i int, kind prefix.EventKind, n int) {
		switch kind {
		case prefix.Stored:
			stored[i] += int64(n)
		case prefix.Removed:
			removed[i] += int64(n)
		}
	}
	medium := kvevents.MediumGPU
	pool, err := newPool(o, func(e prefix.Event) {
		count(0, e.Kind, len(e.Hashes))
		ev := kvevents.FromPrefix(e, int64(o.blockSize), &medium)
		if s, ok := ev.(*kvevents.BlockStored); ok {
			s.TokenIDs = blockTokens(e.Hashes, o.blockSize)
		}
		pending = append(pending, ev)
	}, func(e tier.Event) {
		for i, s := range o.tiers.specs {
			if s.medium == e.Medium {
				count(1+i, e.Kind, len(e.Hashes))
			}
		}
		// No token ids: vLLM's offloading sends none, and a router finds
		// the block through its GPU entry, stored with them.
		pending = append(pending, kvevents.FromTier(e, int64(o.blockSize)))
	})
	if err != nil {
		return err
	}
	ctx, stopSignals := untilSignal(context.Background())
	defer stopSignals()
	defer limitMemory(int64(o.memory))()
	opts := []kvevents.PublisherOption{kvevents.WithPublisherMemory(int64(o.memory)), kvevents.WithTopic(o.topic), kvevents.WithEncoding(o.encoding), kvevents.WithLinger(o.linger),
		kvevents.WithDataParallelRank(o.rank), kvevents.WithPublisherLogger(slog.New(slog.NewTextHandler(stderr, nil))),
		kvevents.WithPublisherDirection(o.direction), kvevents.WithPublisherAllow(o.allow...)}
	if o.replay != "" {
		opts = append(opts, kvevents.WithReplay(o.replay, o.replayBuffer))
	}
	if o.curve != nil {
		opts = append(opts, kvevents.WithPublisherCurve(*o.curve))
	}
	// The publisher closes itself when ctx ends: it outlives a signal,
	// which must still see its queues written and its counts final.
	pub, err := kvevents.NewPublisher(context.Background(), o.endpoint, opts...)
	if err != nil {
		return err
	}
	select {
	case <-time.After(o.warmup):
	case <-ctx.Done():
	}
	var hashes []uint64
	replayed := 0
	for i := range w.Requests {
		if ctx.Err() != nil {
			break
		}
		replayed++
		req := &w.Requests[i]
		hashes = chainHashes(hashes[:0], req.HashIDs)
		if _, err := pool.Request(hashes, prefix.Access{Tick: int64(i)}); err != nil {
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
	sig := stopSignals()
	if err := pub.Close(); err != nil {
		return err
	}
	st := pub.Stats()
	sum.StoredBlocks, sum.RemovedBlocks, sum.ResidentBlocks = stored[0], removed[0], pool.Len(0)
	if len(o.tiers.specs) > 0 {
		sum.Write, sum.Inclusion = o.tiers.writeName(), o.tiers.inclusion()
		for i, ts := range pool.Stats() {
			sum.Tiers = append(sum.Tiers, tierResult{Medium: ts.Medium, CapacityBlocks: ts.Capacity, Strategy: string(ts.Strategy),
				StoredBlocks: stored[i], RemovedBlocks: removed[i], ResidentBlocks: pool.Len(i), Hits: ts.Hits, FailedStores: ts.Failed})
		}
	}
	sum.Sent, sum.Dropped, sum.Unsent, sum.Connections = st.Sent, st.Dropped, st.Unsent, st.Connected
	sum.Reached, sum.ReplayReached, sum.Lossy, sum.Partial = st.Reached, st.ReplayReached, st.Lossy, sig != nil
	sum.Subscribers = []subscriberResult{}
	for _, s := range st.Subscribers {
		sum.Subscribers = append(sum.Subscribers, subscriberResult(s))
	}
	if err := writePublishSummary(stdout, o, w.Name, len(w.Requests), sum); err != nil {
		return err
	}
	switch {
	case sig != nil:
		return stoppedBy(sig, fmt.Sprintf("published the events of %d of %d requests", replayed, len(w.Requests)))
	case o.requireSubscribers == 0:
	case receivers(st) < int64(o.requireSubscribers):
		return unheard(o, st, pub.DialError())
	case st.Lossy > 0:
		return fmt.Errorf("%d of the %d subscribers that received batches lost some (%d dropped at a full queue, %d not taken when -linger ran out): their state is partial unless replay (-replay-bind) filled the gaps",
			st.Lossy, st.Reached, st.Dropped, st.Unsent)
	}
	return nil
}

// receivers is how many subscribers received batches of the topic: those
// the stream reached or, if more, the replay connections answered with
// batches, so that a subscriber that joined after the last batch and
// caught up by replay alone counts, and one that took batches both ways
// counts once.
func receivers(st kvevents.PublisherStats) int64 { return max(st.Reached, st.ReplayReached) }

// unheard is the error of a run that fewer subscribers than required
// heard, with what the socket knows of why.
func unheard(o *publishOptions, st kvevents.PublisherStats, dialErr error) error {
	msg := fmt.Sprintf("%d subscribers received batches of topic %q from %s (%d connections made), -require-subscribers %d",
		receivers(st), o.topic, o.endpoint, st.Connected, o.requireSubscribers)
	if st.Connected > st.Reached {
		msg += "; a subscriber that connects and leaves, or subscribes to other topics only, receives none"
	}
	if st.RefusedSubscribers > 0 {
		msg += fmt.Sprintf("; %d refused for breaking the protocol or a limit (the first is logged above)", st.RefusedSubscribers)
	}
	if o.direction == kvevents.Connect {
		if dialErr != nil {
			msg += fmt.Sprintf("; the last attempt to connect: %v", dialErr)
		}
		if dialErr == nil || kvevents.NothingBinds(dialErr) {
			msg += fmt.Sprintf(" (a publisher that connects needs a subscriber that binds %s: kvevict mirror -bind %s)", o.endpoint, o.endpoint)
		}
	} else {
		msg += " (subscribers connect to it: kvevict mirror -connect ADDR; raise -warmup if they come late)"
	}
	return errors.New(msg)
}

// writePublishSummary prints sum as -format asks.
func writePublishSummary(stdout io.Writer, o *publishOptions, trace string, requests int, sum publishSummary) error {
	if o.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	}
	fmt.Fprintf(stdout, "published %s (%d requests) to %s, topic %q, capacity %d blocks, %s, %s encoding\n",
		trace, requests, o.endpoint, o.topic, o.capacity, o.strategy, o.encoding)
	if sum.Partial {
		fmt.Fprintln(stdout, "partial: a signal stopped the replay before the trace's end")
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(sum.Tiers) > 0 {
		specs := make([]string, len(o.tiers.specs))
		for i, s := range o.tiers.specs {
			specs[i] = s.String()
		}
		fmt.Fprintf(stdout, "below the GPU: %s; %s; %d batches\n", strings.Join(specs, ", "), o.tiers.policy(), sum.Batches)
		fmt.Fprintln(tw, "medium\tcapacity\tstrategy\tstored_blocks\tremoved_blocks\tresident_blocks\thits\tfailed_stores\t")
		for _, t := range sum.Tiers {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t\n", t.Medium, t.CapacityBlocks, t.Strategy,
				t.StoredBlocks, t.RemovedBlocks, t.ResidentBlocks, t.Hits, t.FailedStores)
		}
	} else {
		fmt.Fprintln(tw, "batches\tstored_blocks\tremoved_blocks\tresident_blocks\t")
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t\n", sum.Batches, sum.StoredBlocks, sum.RemovedBlocks, sum.ResidentBlocks)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "subscribers connected at the end: %d; received batches: %d, of which lost some: %d\n", len(sum.Subscribers), sum.Reached, sum.Lossy)
	tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "peer\tsent\tdropped\tunsent\t")
	for _, s := range sum.Subscribers {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t\n", s.Peer, s.Sent, s.Dropped, s.Unsent)
	}
	return tw.Flush()
}

// chainHashes appends to dst the 64-bit block hashes of a request whose
// blocks have the trace ids ids, chained as an engine chains them: each
// block's hash mixes its parent's hash with its own id, so it names the
// whole prefix, a repeated id gets a new hash at each position, and no hash
// is 0, which consumers read as no parent.
func chainHashes(dst []uint64, ids []uint64) []uint64 {
	h := uint64(0xcbf29ce484222325) // the chain's root: FNV-1a's offset basis
	for _, id := range ids {
		h = splitmix(h ^ splitmix(id))
		if h == 0 {
			h = 1
		}
		dst = append(dst, h)
	}
	return dst
}

// splitmix is SplitMix64's finalizer, a bijection of uint64 that spreads
// every input bit over the output.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// vocabulary is the range of the token ids publish makes up.
const vocabulary = 32_000

// blockTokens returns blockSize token ids for each block hash, made up
// from the hash alone: the same block gets the same tokens wherever it is
// stored, and a router that keys blocks by their tokens (llm-d's indexer)
// finds as many distinct blocks as there are hashes.
func blockTokens(hashes []uint64, blockSize int) []int64 {
	out := make([]int64, 0, len(hashes)*blockSize)
	for _, h := range hashes {
		for j := range blockSize {
			out = append(out, int64(splitmix(h+uint64(j))%vocabulary))
		}
	}
	return out
}
