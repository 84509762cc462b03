package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// progress reports compare's runs on stderr: a bar redrawn in place when
// stderr is a terminal, else a plain line every progressInterval, so that
// a log or CI shows a long run alive without filling up, and a short one
// prints nothing. The runs report from their own goroutines: its methods
// are safe for concurrent use.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	terminal bool
	now      func() time.Time
	start    time.Time
	next     time.Time // when the next line is due (not a terminal)
	runs     int
	runsDone int
	total    int // requests over all runs
	done     int
	percent  int  // last percentage the bar drew
	stopped  bool // nothing more is drawn
}

// progressInterval is the time between two lines on a stderr that is not
// a terminal.
const progressInterval = 5 * time.Second

// newProgress returns the progress of runs runs of requests requests in
// all, on stderr.
func newProgress(stderr io.Writer, runs, requests int) *progress {
	f, ok := stderr.(*os.File)
	p := &progress{w: stderr, terminal: ok && isTerminal(f), now: time.Now,
		runs: runs, total: max(requests, 1), percent: -1}
	p.start = p.now()
	p.next = p.start.Add(progressInterval)
	return p
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

// report draws the bar when its percentage moved, or prints a line when
// one is due. The caller holds mu.
func (p *progress) report() {
	if p.stopped {
		return
	}
	pct := min(100*p.done/p.total, 100)
	if p.terminal {
		if pct != p.percent {
			p.percent = pct
			n := barWidth * pct / 100
			fmt.Fprintf(p.w, "\r[%s%s] %3d%%", strings.Repeat("#", n), strings.Repeat(" ", barWidth-n), pct)
		}
		return
	}
	if now := p.now(); !now.Before(p.next) {
		p.next = now.Add(progressInterval)
		fmt.Fprintf(p.w, "kvevict: %d/%d runs finished, %d%%, %v elapsed\n",
			p.runsDone, p.runs, pct, now.Sub(p.start).Round(time.Second))
	}
}

// stop clears the bar; nothing is drawn after it, though abandoned runs
// may still report.
func (p *progress) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.terminal && p.percent >= 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", barWidth+8))
	}
	p.stopped = true
}
