package main

// kvevict mirror speaks vLLM's KV events (package kvevents):
//
//	kvevict mirror -bind ADDR | -connect ADDR -duration D [-capacity N]
//	               [-replay-connect ADDR] [-allow CIDR,...] [-memory BYTES]
//	               [-curve-secret FILE [-curve-server-key FILE] [-curve-clients FILE]]
//	               [-allow-gaps] [-format table|json]
//
// It subscribes to a stream of KV events (kvevict publish's or a vLLM
// engine's) and keeps each topic's blocks in a bounded mirror, as a
// KV-aware router does. At the end of -duration, with -replay-connect, it
// asks the publisher for what it published since the last batch the
// mirror applied, so that batches still on their way, or dropped while
// the mirror fell behind, are applied or counted missed. A mirror that
// heard nothing exits 1; one that missed batches, whose replay requests
// for a gap failed, or that had batches left unapplied prints what it
// holds and exits 1 too (its state is partial; -allow-gaps accepts that).
// SIGINT and SIGTERM end it early: it prints what it holds, flagged
// partial, and exits 130 or 143.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sagellm/kvevict/kvevents"
)

// defaultMirrorCapacity is mirror's blocks per topic: above any one
// engine's pool.
const defaultMirrorCapacity = 1_000_000

// mirrorOptions are mirror's parsed flags.
type mirrorOptions struct {
	endpoint, replay, format string
	direction                kvevents.Direction
	duration                 time.Duration
	capacity                 int
	allowGaps                bool
	allow                    []netip.Prefix
	curve                    *kvevents.Curve
	memory                   memoryFlag
}

func parseMirror(args []string, help io.Writer) (*mirrorOptions, error) {
	fs := newFlagSet("mirror")
	o := &mirrorOptions{}
	var sock socketFlags
	sock.register(fs, "SUB", "publisher", "kvevict publish", "it holds a wildcard host (*, 0.0.0.0, [::]) or port (*)")
	var access accessFlags
	access.register(fs, "the SUB socket (with -bind)")
	fs.DurationVar(&o.duration, "duration", 0, "how long to mirror; batches received but not applied by then make the state partial")
	fs.IntVar(&o.capacity, "capacity", defaultMirrorCapacity, "blocks the mirror holds per topic, evicting leaves first past it")
	var replayConnect, replayOlder string
	fs.StringVar(&replayConnect, "replay-connect", "", "connect to the publisher's replay (ROUTER) socket at `ADDR` (kvevict publish -replay-bind), asked for missed batches after a gap, a late join or a restart")
	fs.StringVar(&replayOlder, "replay-endpoint", "", "the older name of -replay-connect: `ADDR` is always connected to")
	fs.BoolVar(&o.allowGaps, "allow-gaps", false, "exit 0 even if batches were missed, replay requests failed or received batches were not applied in time (the state is then partial); a mirror that heard nothing still fails")
	fs.StringVar(&o.format, "format", "table", "output: table or json")
	registerMemory(fs, &o.memory, "the subscriber (connections, queued and held messages, the payload being decoded) and the mirror's topics (docs/kvevents.md, Limits)")
	if err := parseFlagSet(fs, args, "kvevict mirror -bind ADDR | -connect ADDR -duration D [flags]", help); err != nil {
		return nil, err
	}
	var err error
	if o.endpoint, o.direction, err = sock.resolve(kvevents.Wildcard); err != nil {
		return nil, err
	}
	if o.replay, err = replayAddress("-replay-connect", replayConnect, replayOlder, true); err != nil {
		return nil, err
	}
	if o.allow, err = access.prefixes(); err != nil {
		return nil, err
	}
	if len(o.allow) > 0 && o.direction != kvevents.Bind {
		return nil, usagef("-allow applies to the socket mirror binds, and it binds none: its SUB socket connects (give -bind to take publishers' connections)")
	}
	if o.curve, err = access.curve(o.direction == kvevents.Bind, o.direction != kvevents.Bind || o.replay != ""); err != nil {
		return nil, err
	}
	if o.duration <= 0 {
		return nil, usagef("-duration must be positive, such as 30s, got %v", o.duration)
	}
	if err := checkCount("capacity", o.capacity, 1, kvevents.MaxMirrorCapacity, "blocks"); err != nil {
		return nil, err
	}
	if err := checkMemory(o.memory); err != nil {
		return nil, err
	}
	if err := checkFormat(o.format); err != nil {
		return nil, err
	}
	return o, nil
}

// mirrorRow is one topic of mirror's output; -format json prints an array
// of them.
type mirrorRow struct {
	Topic            string         `json:"topic"`
	ResidentBlocks   int            `json:"resident_blocks"`
	ResidentByMedium map[string]int `json:"resident_by_medium"`
	Batches          int64          `json:"batches"`
	MissedBatches    int64          `json:"missed_batches"`
	Restarts         int64          `json:"restarts"`
	Partial          bool           `json:"partial,omitempty"` // a signal ended the mirror before -duration did
}

func mirror(args []string, stdout, stderr io.Writer) error {
	o, err := parseMirror(args, stdout)
	if err != nil {
		return err
	}
	defer limitMemory(int64(o.memory))()
	subMemory, mirrorMemory := kvevents.MirrorShares(int64(o.memory))
	m, err := kvevents.NewMirror(o.capacity, kvevents.WithMirrorMemory(mirrorMemory))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.duration)
	defer cancel()
	ctx, stopSignals := untilSignal(ctx)
	defer stopSignals()
	opts := []kvevents.SubscriberOption{kvevents.WithSubscriberLogger(slog.New(slog.NewTextHandler(stderr, nil))),
		kvevents.WithSubscriberDirection(o.direction), kvevents.WithBatchReuse(), kvevents.WithSubscriberMemory(subMemory)}
	if len(o.allow) > 0 {
		opts = append(opts, kvevents.WithSubscriberAllow(o.allow...))
	}
	if o.curve != nil {
		opts = append(opts, kvevents.WithSubscriberCurve(*o.curve))
	}
	if o.replay != "" {
		opts = append(opts, kvevents.WithReplayEndpoint(o.replay, kvevents.DefaultReplayTimeout))
	}
	sub, err := kvevents.NewSubscriber(ctx, o.endpoint, opts...)
	if err != nil {
		return err
	}
	sub.Run(ctx, m.Handle)
	sig := stopSignals()
	if sig == nil && o.replay != "" {
		// What the publisher sent last may not have reached the mirror,
		// and no later batch would show it: ask for it.
		var stopCatchUp func() os.Signal
		ctx, stopCatchUp = untilSignal(context.Background())
		sub.CatchUp(ctx, m.Handle)
		sig = stopCatchUp()
	}
	rows := []mirrorRow{}
	for _, t := range m.Topics() {
		rows = append(rows, mirrorRow{t.Topic, t.ResidentBlocks, t.ResidentByMedium, t.Batches, t.MissedBatches, t.Restarts, sig != nil})
	}
	st := sub.Stats()
	if st.Malformed+st.Oversized+st.UnknownEvent+st.FieldType+st.Refused > 0 {
		fmt.Fprintf(stderr, "kvevict: skipped bad input: %d malformed, %d oversized, %d refused messages; %d unknown, %d mistyped events\n",
			st.Malformed, st.Oversized, st.Refused, st.UnknownEvent, st.FieldType)
	}
	if st.ReplayFailures > 0 {
		fmt.Fprintf(stderr, "kvevict: %d replay requests failed\n", st.ReplayFailures)
	}
	if st.Released > 0 {
		fmt.Fprintf(stderr, "kvevict: %d topics released, each to follow a new one past the %d a mirror follows: the topic heard from least recently, whose state went with it\n", st.Released, kvevents.DefaultMaxTopics)
	}
	if ms := m.Stats(); ms.Released > 0 {
		fmt.Fprintf(stderr, "kvevict: %d topics let go by the mirror, emptied to make room for others within its %d bytes (-memory): their counts went with them\n", ms.Released, ms.Budget)
	}
	if st.Restarts > 0 && o.replay == "" {
		fmt.Fprintf(stderr, "kvevict: %d publisher restarts without -replay-connect: each topic started over at the first batch heard from its new publisher, and the batches before it count as missed\n", st.Restarts)
	}
	if err := writeMirrorRows(stdout, o, rows, sig); err != nil {
		return err
	}
	switch {
	case sig != nil:
		return stoppedBy(sig, "the state printed is partial")
	case st.Delivered == 0:
		return heardNothing(o, st)
	case (st.Missed > 0 || st.ReplayFailures > 0 || st.Unhandled > 0) && !o.allowGaps:
		return partial(o, st)
	}
	return nil
}

// heardNothing is the error of a mirror that applied no batch: whatever
// it prints, it knows nothing of any engine's cache.
func heardNothing(o *mirrorOptions, st kvevents.Stats) error {
	msg := fmt.Sprintf("no batch heard from %s in %v", o.endpoint, o.duration)
	if bad := st.Malformed + st.Oversized + st.Refused + st.TimedOut; bad > 0 {
		msg += fmt.Sprintf("; %d messages or connections refused (above)", bad)
	}
	if o.direction == kvevents.Bind {
		return fmt.Errorf("%s (publishers connect to it: kvevict publish -connect ADDR, or an engine's endpoint)", msg)
	}
	return fmt.Errorf("%s (is the publisher publishing? -allow-gaps does not accept an empty state)", msg)
}

// partial is the error of a mirror whose state lacks batches.
func partial(o *mirrorOptions, st kvevents.Stats) error {
	why := "no -replay-connect to fill gaps"
	if o.replay != "" {
		why = "the publisher's replay buffer no longer held them, or replay failed"
	}
	return fmt.Errorf("partial state: %d batches missed in %d gaps (%s), %d replay requests failed, %d received but not applied when -duration ended; -allow-gaps accepts a partial state",
		st.Missed, st.Gaps, why, st.ReplayFailures, st.Unhandled)
}

// writeMirrorRows prints rows as -format asks; sig is the signal that
// ended the mirror early, if one did.
func writeMirrorRows(stdout io.Writer, o *mirrorOptions, rows []mirrorRow, sig os.Signal) error {
	if o.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	fmt.Fprintf(stdout, "mirrored %s for %v, capacity %d blocks per topic\n", o.endpoint, o.duration, o.capacity)
	if sig != nil {
		fmt.Fprintf(stdout, "partial: %s ended the mirror before -duration did\n", signalName(sig))
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "topic\tresident_blocks\tbatches\tmissed_batches\trestarts\tby_medium\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%q\t%d\t%d\t%d\t%d\t%s\t\n", r.Topic, r.ResidentBlocks, r.Batches, r.MissedBatches, r.Restarts, byMedium(r.ResidentByMedium))
	}
	return tw.Flush()
}

// byMedium prints counts per medium as GPU=n,CPU=m, in name order.
func byMedium(counts map[string]int) string {
	var parts []string
	for _, medium := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s=%d", medium, counts[medium]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}
