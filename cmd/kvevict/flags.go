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
