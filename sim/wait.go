package sim

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Wait is what a trace says a request waits for before a closed loop
// ([Serve]) sends it, as DynoSim's traces say it (docs/simulator.md): the
// requests it names finish, then its pause passes. A request without one
// follows its session's previous request by the pause its timestamps
// leave.
type Wait struct {
	// For are earlier requests of the workload, by index, that must all
	// finish before this one is sent (a trace's wait_for); empty, it
	// waits for its session's previous request, if it has one.
	For []int
	// Pause is how long after the last of them finished the request is
	// sent (a trace's delay plus tool_wait_ms): 0 to [MaxPause].
	Pause time.Duration
}

// MaxPause is the longest [Wait.Pause]: 30 days, the longest hint a trace
// may give ([MaxHintMs]), far beyond any turn's think time or tool call.
const MaxPause = MaxHintMs * time.Millisecond

// check reports a wait request i of a workload cannot have: one on a
// request after it or on itself, which would never be sent, or a pause out
// of range.
func (w *Wait) check(i int) error {
	if w.Pause < 0 || w.Pause > MaxPause {
		return fmt.Errorf("pause %v is out of range: want 0 to %v", w.Pause, MaxPause)
	}
	for _, f := range w.For {
		if f < 0 || f >= i {
			return fmt.Errorf("waits for request %d, not an earlier one", f)
		}
	}
	return nil
}

// pauseMs converts a pause a trace gives in milliseconds, as DynoSim
// writes it (a JSON number, whole or not), after checking its range, so
// that the conversion cannot overflow.
func pauseMs(field string, ms float64) (time.Duration, error) {
	if !(ms >= 0 && ms <= MaxHintMs) {
		return 0, fmt.Errorf("%q must be 0 to %d milliseconds, got %v", field, MaxHintMs, ms)
	}
	return time.Duration(math.Round(ms * float64(time.Millisecond))), nil
}

// readPause reads a line's pause: delay (which DynoSim also reads as
// delay_ms, and so does this) plus tool_wait_ms, and whether it gives
// any of them.
func readPause(l *traceLine) (time.Duration, bool, error) {
	delay, name := l.Delay, "delay"
	switch {
	case l.Delay != nil && l.DelayMs != nil:
		return 0, false, errors.New(`"delay" and "delay_ms" are one field: give one of them`)
	case l.DelayMs != nil:
		delay, name = l.DelayMs, "delay_ms"
	}
	var pause time.Duration
	if delay != nil {
		d, err := pauseMs(name, *delay)
		if err != nil {
			return 0, false, err
		}
		pause = d
	}
	if l.ToolWaitMs != nil {
		d, err := pauseMs("tool_wait_ms", *l.ToolWaitMs)
		if err != nil {
			return 0, false, err
		}
		if pause += d; pause > MaxPause {
			return 0, false, fmt.Errorf("%q plus \"tool_wait_ms\" is %v, more than %v", name, pause, MaxPause)
		}
	}
	return pause, delay != nil || l.ToolWaitMs != nil, nil
}
