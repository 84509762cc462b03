package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// progress draws a bar on stderr when stderr is a terminal, and nothing
// otherwise, so that scripts and logs get only the results.
type progress struct {
	w       io.Writer // nil: not a terminal
	total   int
	base    int // work finished by earlier runs
	last    int // latest done within the current run
	percent int // last percentage drawn
}

func newProgress(stderr io.Writer, total int) *progress {
	p := &progress{total: max(total, 1), percent: -1}
	if f, ok := stderr.(*os.File); ok && isTerminal(f) {
		p.w = stderr
	}
	return p
}

// isTerminal reports whether f is a character device, as a terminal is.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// callback returns the sim.Config.Progress of one run.
func (p *progress) callback() func(done, total int) {
	if p.w == nil {
		return nil
	}
	return func(done, total int) {
		if done < p.last { // a new run started
			p.base += p.last
		}
		p.last = done
		p.draw(p.base + done)
		if done == total {
			p.base += total
			p.last = 0
		}
	}
}

const barWidth = 40

func (p *progress) draw(done int) {
	pct := min(100*done/p.total, 100)
	if pct == p.percent {
		return
	}
	p.percent = pct
	n := barWidth * pct / 100
	fmt.Fprintf(p.w, "\r[%s%s] %3d%%", strings.Repeat("#", n), strings.Repeat(" ", barWidth-n), pct)
}

// done clears the bar.
func (p *progress) done() {
	if p.w != nil && p.percent >= 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", barWidth+8))
	}
}
