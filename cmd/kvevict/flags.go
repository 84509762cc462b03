package main

// The flag handling the subcommands share.

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// newFlagSet returns a flag set that reports mistakes as one line and
// prints its defaults for -h.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("kvevict "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlagSet parses args, printing usage to help on -h.
func parseFlagSet(fs *flag.FlagSet, args []string, usage string, help io.Writer) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(help)
			fmt.Fprintln(help, "usage: "+usage)
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

// checkFormat refuses a -format publish and mirror cannot write.
func checkFormat(format string) error {
	if format != "table" && format != "json" {
		return usagef("-format must be table or json, got %q", format)
	}
	return nil
}

// The most a count flag takes, beside the bounds of its own file
// (maxCapacity, maxEngines, maxTierBlocks, maxBlockSize and
// kvevents.MaxMirrorCapacity): each is checked before any work, so that a
// slip of the finger is refused at once rather than found out by memory.
const (
	// maxRequests bounds -requests: a synthetic workload is held in memory
	// whole, as a trace is, and each run's bookkeeping grows with it
	// (docs/simulator.md, Bounds, gives what the largest costs).
	maxRequests = 1_000_000
	// maxSampling bounds -sampling: a sample that large costs more than
	// the exact selection it approximates on any pool a replay holds.
	maxSampling = 1 << 16
	// maxReplayBuffer bounds publish's -replay-buffer, the batches it
	// keeps for a subscriber that missed them.
	maxReplayBuffer = 1 << 20
	// maxSubscribers bounds -require-subscribers: more connections than a
	// process holds sockets.
	maxSubscribers = 1 << 16
)

// checkCount refuses a count flag's value outside least to most, unit
// naming what it counts.
func checkCount(name string, v, least, most int, unit string) error {
	if v < least || v > most {
		return usagef("-%s must be %d to %d %s, got %d", name, least, most, unit, v)
	}
	return nil
}
