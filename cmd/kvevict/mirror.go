package main

// kvevict mirror speaks vLLM's KV events (package kvevents):
//
//	kvevict mirror -bind ADDR | -connect ADDR -duration D [-capacity N]
//	               [-replay-connect ADDR] [-allow-gaps] [-format table|json]
//
// It subscribes to a stream of KV events (kvevict publish's or a vLLM
// engine's) and keeps each topic's blocks in a bounded mirror, as a
// KV-aware router does. A mirror that missed batches, or whose replay
// requests failed, prints what it holds and exits 1: its state is partial.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
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
}

func parseMirror(args []string, help io.Writer) (*mirrorOptions, error) {
	fs := newFlagSet("mirror")
	o := &mirrorOptions{}
	var sock socketFlags
	sock.register(fs, "SUB", "publisher", "kvevict publish", "it holds a wildcard host (*, 0.0.0.0, [::]) or port (*)")
	fs.DurationVar(&o.duration, "duration", 0, "how long to mirror; batches received but not applied by then make the state partial")
	fs.IntVar(&o.capacity, "capacity", defaultMirrorCapacity, "blocks the mirror holds per topic, evicting leaves first past it")
	var replayConnect, replayOlder string
	fs.StringVar(&replayConnect, "replay-connect", "", "connect to the publisher's replay (ROUTER) socket at `ADDR` (kvevict publish -replay-bind), asked for missed batches after a gap, a late join or a restart")
	fs.StringVar(&replayOlder, "replay-endpoint", "", "the older name of -replay-connect: `ADDR` is always connected to")
	fs.BoolVar(&o.allowGaps, "allow-gaps", false, "exit 0 even if batches were missed, replay requests failed or received batches were not applied in time (the state is then partial)")
	fs.StringVar(&o.format, "format", "table", "output: table or json")
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
	if o.duration <= 0 {
		return nil, usagef("-duration must be positive, such as 30s, got %v", o.duration)
	}
	if err := checkCount("capacity", o.capacity, 1, kvevents.MaxMirrorCapacity, "blocks"); err != nil {
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
}

func mirror(args []string, stdout, stderr io.Writer) error {
	o, err := parseMirror(args, stdout)
	if err != nil {
		return err
	}
	m, err := kvevents.NewMirror(o.capacity)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.duration)
	defer cancel()
	opts := []kvevents.SubscriberOption{kvevents.WithSubscriberLogger(slog.New(slog.NewTextHandler(stderr, nil))),
		kvevents.WithSubscriberDirection(o.direction), kvevents.WithBatchReuse()}
	if o.replay != "" {
		opts = append(opts, kvevents.WithReplayEndpoint(o.replay, kvevents.DefaultReplayTimeout))
	}
	sub, err := kvevents.NewSubscriber(ctx, o.endpoint, opts...)
	if err != nil {
		return err
	}
	sub.Run(ctx, m.Handle)
	rows := []mirrorRow{}
	for _, t := range m.Topics() {
		rows = append(rows, mirrorRow{t.Topic, t.ResidentBlocks, t.ResidentByMedium, t.Batches, t.MissedBatches, t.Restarts})
	}
	st := sub.Stats()
	if st.Malformed+st.Oversized+st.UnknownEvent+st.FieldType+st.Refused > 0 {
		fmt.Fprintf(stderr, "kvevict: skipped bad input: %d malformed, %d oversized, %d refused messages; %d unknown, %d mistyped events\n",
			st.Malformed, st.Oversized, st.Refused, st.UnknownEvent, st.FieldType)
	}
	if st.ReplayFailures > 0 {
		fmt.Fprintf(stderr, "kvevict: %d replay requests failed\n", st.ReplayFailures)
	}
	if st.Restarts > 0 && o.replay == "" {
		fmt.Fprintf(stderr, "kvevict: %d publisher restarts without -replay-connect: each topic started over at the first batch heard from its new publisher, and the batches before it count as missed\n", st.Restarts)
	}
	if err := writeMirrorRows(stdout, o, rows); err != nil {
		return err
	}
	if (st.Missed > 0 || st.ReplayFailures > 0 || st.Unhandled > 0) && !o.allowGaps {
		return partial(o, st)
	}
	return nil
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

// writeMirrorRows prints rows as -format asks.
func writeMirrorRows(stdout io.Writer, o *mirrorOptions, rows []mirrorRow) error {
	if o.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	fmt.Fprintf(stdout, "mirrored %s for %v, capacity %d blocks per topic\n", o.endpoint, o.duration, o.capacity)
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
