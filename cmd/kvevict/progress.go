package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// progress reports the runs of compare and cluster on stderr: a bar
// redrawn in place when stderr is a terminal and the output a table, and
// nothing otherwise, so that a pipe, a log or a csv or json run is never
// written over. The runs report from their own goroutines: its methods are
// safe for concurrent use.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	drawn    bool // the bar is drawn: a terminal, and a table
	runsDone int
	total    int // requests over all runs
	done     int
	percent  int  // last percentage the bar drew
	stopped  bool // nothing more is drawn
}

// newProgress returns the progress of runs of requests requests in all,
// on stderr, drawn if stderr is a terminal and format is "table".
func newProgress(stderr io.Writer, format string, requests int) *progress {
	f, ok := stderr.(*os.File)
	return &progress{w: stderr, drawn: ok && isTerminal(f) && format == "table",
		total: max(requests, 1), percent: -1}
}

// isTerminal reports whether f is a character device, as a terminal is.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// callback returns the sim.Config.Progress of one run, to be called from
// that run's goroutine only.
func (p *progress) callback() func(done, total int) {
	last := 0 // the run's requests counted so far
	return func(done, _ int) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.done += done - last
		last = done
		p.report()
	}
}

// finished counts a run that ended.
func (p *progress) finished() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runsDone++
	p.report()
}

const barWidth = 40

// report draws the bar when its percentage moved. The caller holds mu.
func (p *progress) report() {
	if p.stopped || !p.drawn {
		return
	}
	if pct := min(100*p.done/p.total, 100); pct != p.percent {
		p.percent = pct
		n := barWidth * pct / 100
		fmt.Fprintf(p.w, "\r[%s%s] %3d%%", strings.Repeat("#", n), strings.Repeat(" ", barWidth-n), pct)
	}
}

// stop clears the bar; nothing is drawn after it, though abandoned runs
// may still report.
func (p *progress) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn && p.percent >= 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", barWidth+8))
	}
	p.stopped = true
}
