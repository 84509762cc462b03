package main

// The flag handling the subcommands share.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sagellm/kvevict/kvevents"
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

// checkEndpoint refuses an endpoint ZeroMQ cannot use, before any socket
// opens: publish's and mirror's.
func checkEndpoint(ep string) error {
	if ep == "" {
		return usagef("-endpoint is required, such as tcp://*:5557 (bind) or tcp://host:5557 (connect)")
	}
	scheme, rest, ok := strings.Cut(ep, "://")
	if !ok || rest == "" || !slices.Contains(kvevents.Transports(), scheme) {
		return usagef("endpoint %q must be transport://address with transport one of %s", ep, strings.Join(kvevents.Transports(), ", "))
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
