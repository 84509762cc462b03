package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// errTerminated is what publish and mirror return when SIGTERM stopped
// them: exit status 143, as a shell reports a command that SIGTERM ended
// (errInterrupted is SIGINT's, 130).
var errTerminated = errors.New("terminated")

// untilSignal returns a context that parent's end, SIGINT or SIGTERM ends,
// and stop, which stops catching them (a second signal then ends the
// process as usual) and returns the one caught, or nil.
func untilSignal(parent context.Context) (ctx context.Context, stop func() os.Signal) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	var caught os.Signal
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case caught = <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() os.Signal {
		signal.Stop(sigs)
		cancel()
		<-done
		return caught
	}
}

// stoppedBy is the error of a command that sig stopped before its end,
// what it printed being partial.
func stoppedBy(sig os.Signal, what string) error {
	kind := errInterrupted
	if sig == syscall.SIGTERM {
		kind = errTerminated
	}
	return fmt.Errorf("%w by %s: %s", kind, signalName(sig), what)
}

// signalName names SIGINT and SIGTERM as a shell does.
func signalName(sig os.Signal) string {
	if sig == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGINT"
}
