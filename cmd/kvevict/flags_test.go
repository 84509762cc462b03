package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestPublishMirrorFlags: every bad flag of publish and mirror is refused
// before anything starts.
func TestPublishMirrorFlags(t *testing.T) {
	ok := []string{"-endpoint", "tcp://127.0.0.1:1", "-trace", excerpt, "-capacity", "10"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"publish", "-trace", excerpt, "-capacity", "10"}, "-bind ADDR or -connect ADDR is required"},
		{[]string{"publish", "-bind", "tcp://127.0.0.1:1", "-connect", "tcp://127.0.0.1:1", "-trace", excerpt, "-capacity", "10"}, "-bind and -connect: give one of"},
		{[]string{"publish", "-bind", "tcp://127.0.0.1:1", "-endpoint", "tcp://127.0.0.1:1", "-trace", excerpt, "-capacity", "10"}, "-bind and -endpoint: give one of"},
		{[]string{"publish", "-connect", "tcp://*:5557", "-trace", excerpt, "-capacity", "10"}, "a wildcard address can only be bound"},
		{[]string{"publish", "-connect", "tcp://[::]:5557", "-trace", excerpt, "-capacity", "10"}, "a wildcard address can only be bound"},
		{[]string{"publish", "-bind", "127.0.0.1:5557", "-trace", excerpt, "-capacity", "10"}, "must be transport://address"},
		{[]string{"publish", "-endpoint", "127.0.0.1:5557", "-trace", excerpt, "-capacity", "10"}, "must be transport://address"},
		{[]string{"publish", "-endpoint", "carrier://x", "-trace", excerpt, "-capacity", "10"}, "must be transport://address"},
		{[]string{"publish", "-endpoint", "tcp://127.0.0.1:1", "-capacity", "10"}, "-trace is required"},
		{[]string{"publish", "-endpoint", "tcp://127.0.0.1:1", "-trace", excerpt}, "-capacity must be 1 to 100000000 blocks, got 0"},
		{append(ok, "-capacity", "100000001"), "-capacity must be 1 to 100000000 blocks"},
		{append(ok, "-strategy", "arc"), "ranks by lists of sequences"},
		{append(ok, "-strategy", "nope"), `unknown strategy "nope"`},
		{append(ok, "-warmup", "-1s"), "-warmup must not be negative"},
		{append(ok, "-linger", "-1s"), "-linger must not be negative"},
		{append(ok, "-format", "csv"), "-format must be table or json"},
		{append(ok, "extra"), `unexpected argument "extra"`},
		{append(ok, "-tier", "gpu:10:lru"), "-tier names the tiers below the GPU"},
		{append(ok, "-tier", "cpu:0:lru"), "the size must be 1 to"},
		{append(ok, "-tier", "storage:4x:lru", "-tier", "cpu:4x:lru"), "list the tiers from the GPU down"},
		{append(ok, "-tier", "cpu:4x:lru", "-tier", "cpu:8x:lru"), "so each medium is one tier"},
		{append(ok, "-tier", "cpu:4x:lru", "-write", "vllm"), "-write vllm replays vLLM's own GPU pool"},
		{append(ok, "-tier", "cpu:4x:lru", "-exclusive"), "-exclusive needs -write back"},
		{append(ok, "-tier", "cpu:4x:lru", "-write", "back", "-inclusive", "-exclusive"), "-inclusive and -exclusive: choose one"},
		{append(ok, "-write", "back"), "-write needs -tier"},
		{append(ok, "-tier", "cpu:4x:lru", "-model", "llama-3-8b"), "flag provided but not defined: -model"},
		{append(ok, "-tier", "cpu:4x:lru", "-link", "cpu=pcie5"), "flag provided but not defined: -link"},
		{[]string{"mirror", "-duration", "1s"}, "-bind ADDR or -connect ADDR is required"},
		{[]string{"mirror", "-connect", "tcp://0.0.0.0:5557", "-duration", "1s"}, "a wildcard address can only be bound"},
		{[]string{"mirror", "-connect", "tcp://127.0.0.1:1", "-duration", "1s", "-replay-connect", "tcp://*:5558"}, "a wildcard address can only be bound"},
		{[]string{"mirror", "-connect", "tcp://127.0.0.1:1", "-duration", "1s", "-replay-connect", "tcp://h:1", "-replay-endpoint", "tcp://h:1"}, "-replay-connect and -replay-endpoint: give one"},
		{append(ok, "-replay-bind", "tcp://*:1", "-replay-endpoint", "tcp://*:1"), "-replay-bind and -replay-endpoint: give one"},
		{append(ok, "-replay-buffer", "100"), "-replay-buffer needs -replay-bind"},
		{append(ok, "-replay-bind", "tcp://*:1", "-replay-buffer", "0"), "-replay-buffer must be 1 to 1048576 batches, got 0"},
		{append(ok, "-replay-bind", "tcp://*:1", "-replay-buffer", "1048577"), "-replay-buffer must be 1 to 1048576 batches"},
		{append(ok, "-require-subscribers", "-1"), "-require-subscribers must be 0 to 65536 connections, got -1"},
		{append(ok, "-require-subscribers", "65537"), "-require-subscribers must be 0 to 65536"},
		{[]string{"mirror", "-endpoint", "tcp://127.0.0.1:1"}, "-duration must be positive"},
		{[]string{"mirror", "-endpoint", "tcp://127.0.0.1:1", "-duration", "1s", "-capacity", "0"}, "-capacity must be 1 to 536870912"},
		{[]string{"mirror", "-endpoint", "tcp://127.0.0.1:1", "-duration", "1s", "-capacity", "536870913"}, "-capacity must be 1 to 536870912"},
		{[]string{"mirror", "-endpoint", "tcp://127.0.0.1:1", "-duration", "1s", "-replay-endpoint", "x"}, "must be transport://address"},
		{append(ok, "-block-size", "-1"), "-block-size must be 1 to 65536"},
		{append(ok, "-block-size", "0"), "-block-size must be 1 to 65536 tokens, got 0"},
		{append(ok, "-block-size", "65537"), "-block-size must be 1 to 65536"},
		{append(ok, "-dp-rank", "-1"), "-dp-rank must not be negative"},
		{append(ok, "-encoding", "json"), "-encoding must be mixed, map or array"},
		{append(ok, "-replay-endpoint", "carrier://x"), "must be transport://address"},
		{[]string{"mirror", "-endpoint", "tcp://127.0.0.1:1", "-duration", "1s", "-format", "xml"}, "-format must be table or json"},
		{[]string{"mirror", "-endpoint", "tcp://127.0.0.1:1", "-duration", "soon"}, `invalid value "soon"`},
		{append(ok, "-memory", "lots"), "not a size in bytes"},
		{append(ok, "-memory", "-1MiB"), "not a size in bytes"},
		{append(ok, "-memory", "63MiB"), "-memory must be at least 67108864 bytes (64MiB), got 66060288"},
		{[]string{"mirror", "-endpoint", "tcp://127.0.0.1:1", "-duration", "1s", "-memory", "1KiB"}, "-memory must be at least"},
	} {
		args := tc.args
		if args[0] != "publish" && args[0] != "mirror" {
			args = append([]string{"publish"}, args...)
		}
		code, _, errOut := runArgs(t, args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 ||
			!strings.Contains(errOut, "see kvevict "+args[0]+" -h") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", args, code, errOut, tc.want)
		}
	}
}

// TestMemoryFlag: -memory reads bytes with an optional binary suffix, and
// sets the runtime's memory limit unless GOMEMLIMIT does.
func TestMemoryFlag(t *testing.T) {
	for in, want := range map[string]int64{"536870912": 512 << 20, "512MiB": 512 << 20, "2GiB": 2 << 30, "64KiB": 64 << 10} {
		var m memoryFlag
		if err := m.Set(in); err != nil || int64(m) != want {
			t.Errorf("-memory %s: %d, %v; want %d", in, int64(m), err, want)
		}
	}
	before := debug.SetMemoryLimit(-1)
	t.Setenv("GOMEMLIMIT", "")
	restore := limitMemory(300 << 20)
	if got := debug.SetMemoryLimit(-1); got != 300<<20 {
		t.Errorf("the memory limit is %d after -memory 300MiB", got)
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	limitMemory(200 << 20)()
	if got := debug.SetMemoryLimit(-1); got != 300<<20 {
		t.Errorf("the memory limit is %d with GOMEMLIMIT set, want it left at %d", got, 300<<20)
	}
	restore()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("the memory limit is %d once the command returned, want %d as before", got, before)
	}
}
