package main

// The memory budget publish and mirror share: -memory, and the runtime's
// memory limit set from it.

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/sagellm/kvevict/kvevents"
)

// minMemory is the least -memory takes: each share of mirror's split
// must hold kvevents.MinMemory.
const minMemory = 64 << 20

// memoryFlag is -memory: a number of bytes, with an optional suffix KiB,
// MiB or GiB.
type memoryFlag int64

func (m *memoryFlag) String() string { return strconv.FormatInt(int64(*m), 10) }

func (m *memoryFlag) Set(s string) error {
	unit := int64(1)
	for _, u := range []struct {
		suffix string
		bytes  int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, unit = rest, u.bytes
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<50)/unit {
		return fmt.Errorf("not a size in bytes (such as 536870912, 512MiB or 2GiB)")
	}
	*m = memoryFlag(n * unit)
	return nil
}

// registerMemory adds -memory to fs, which the budget parts of what.
func registerMemory(fs *flag.FlagSet, m *memoryFlag, what string) {
	*m = kvevents.DefaultMemory
	fs.Var(m, "memory", "the process's memory budget in `BYTES` (512MiB, 2GiB): "+what+" each take a share, what would go past one is refused and counted, and the runtime's memory limit is set to it unless GOMEMLIMIT is")
}

// checkMemory refuses a budget too small to split.
func checkMemory(m memoryFlag) error {
	if m < minMemory {
		return usagef("-memory must be at least %d bytes (64MiB), got %d", minMemory, int64(m))
	}
	return nil
}

// limitMemory sets the runtime's soft memory limit to budget, so that the
// collector works harder as the heap nears it, unless GOMEMLIMIT is set:
// the environment's word wins. The returned func puts back the limit
// there was, once every command that set one has returned: tests run
// publish and mirror side by side in one process.
func limitMemory(budget int64) (restore func()) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	limits.Lock()
	defer limits.Unlock()
	if limits.running == 0 {
		limits.before = debug.SetMemoryLimit(budget)
	} else {
		debug.SetMemoryLimit(budget)
	}
	limits.running++
	return func() {
		limits.Lock()
		defer limits.Unlock()
		if limits.running--; limits.running == 0 {
			debug.SetMemoryLimit(limits.before)
		}
	}
}

// limits is what limitMemory puts back, and when.
var limits struct {
	sync.Mutex
	running int   // commands that set a limit and have not returned
	before  int64 // the limit before the first of them
}
