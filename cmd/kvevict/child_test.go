package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// childArgs, in the environment, makes this test binary run the command
// with the arguments it holds (a JSON array) in place of the tests:
// startChild's child process.
const childArgs = "KVEVICT_CHILD_ARGS"

func TestMain(m *testing.M) {
	if env, ok := os.LookupEnv(childArgs); ok {
		var args []string
		if err := json.Unmarshal([]byte(env), &args); err != nil {
			panic(err)
		}
		// Catch SIGINT and SIGTERM before saying ready, so that none ends
		// the process before the command listens; the catch is never
		// stopped, for one handed out after the command stops listening.
		signal.Notify(make(chan os.Signal, 1), os.Interrupt, syscall.SIGTERM)
		os.NewFile(3, "ready").Close()
		os.Exit(run(args, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// child is the command running in a child process. A signal sent to this
// process could be handed out after one command stopped listening, to the
// next test's, which it would stop: a child of its own has none but
// those sent to it.
type child struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{} // closed once it exited
}

// startChild runs the command with args in a child process, this test
// binary started again, and returns once the child catches SIGINT and
// SIGTERM. The test's end kills it if it is still running.
func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	ready, readyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer ready.Close()
	c := &child{cmd: exec.Command(os.Args[0]), done: make(chan struct{})}
	env, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Env = append(os.Environ(), childArgs+"="+string(env))
	c.cmd.Stdout, c.cmd.Stderr, c.cmd.ExtraFiles = &c.stdout, &c.stderr, []*os.File{readyW}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readyW.Close()
	io.Copy(io.Discard, ready) // until the child closes its end
	go func() {
		c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.done
	})
	return c
}

// signalUntilExit sends sig to the child every 20 ms until it exits (its
// command may listen only later), for a minute at most, after which it
// kills it, and returns what it did.
func (c *child) signalUntilExit(sig os.Signal) result {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	hung := time.After(time.Minute)
	for {
		select {
		case <-c.done:
			return c.result()
		case <-tick.C:
			c.cmd.Process.Signal(sig)
		case <-hung: // the test's checks fail on what a killed child did
			c.cmd.Process.Kill()
		}
	}
}

// wait waits for the child to exit, a minute at most, and returns what it
// did.
func (c *child) wait() result {
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		c.cmd.Process.Kill()
		<-c.done
	}
	return c.result()
}

func (c *child) result() result {
	return result{c.cmd.ProcessState.ExitCode(), c.stdout.String(), c.stderr.String()}
}
