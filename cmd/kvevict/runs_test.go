package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sagellm/kvevict/sim"
)

// TestCompareParallel: runs on several workers at once write the same
// table, CSV and JSON as runs one at a time, but for the latencies, which
// are measurements; under -race this also checks that the runs of one
// workload share nothing they write.
func TestCompareParallel(t *testing.T) {
	for _, args := range [][]string{
		{"-requests", "300", "-capacity", "50,200"},
		{"-requests", "300", "-capacity", "100,400", "-mode", "serve"},
		{"-workload", "agentic", "-requests", "200", "-capacity", "300", "-mode", "serve", "-granularity", "block"},
	} {
		o, err := parseFlags(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		w, err := loadWorkload(o, nil)
		if err != nil {
			t.Fatal(err)
		}
		var outputs []string
		for _, workers := range []int{1, 4} {
			reports, err := runAll(o, w, io.Discard, workers, nil)
			if err != nil {
				t.Fatalf("%v, %d workers: %v", args, workers, err)
			}
			for i := range reports {
				reports[i].EvictionP50, reports[i].EvictionP99 = 0, 0
			}
			var out bytes.Buffer
			for _, format := range []string{"table", "csv", "json"} {
				o.format = format
				if err := write(&out, o, w, reports); err != nil {
					t.Fatal(err)
				}
			}
			outputs = append(outputs, out.String())
		}
		if outputs[0] != outputs[1] {
			t.Errorf("%v: one worker wrote\n%s\nfour wrote\n%s", args, outputs[0], outputs[1])
		}
	}
}

// TestRunJobsInterrupt: an interrupt keeps the runs that finished and
// returns without waiting for the one in progress, which never ends.
func TestRunJobsInterrupt(t *testing.T) {
	interrupt := make(chan os.Signal, 1)
	hang := make(chan struct{})
	defer close(hang)
	reports, finished, err := runJobs(6, 1, func(i int) (sim.Report, error) {
		if i == 3 { // one worker: runs 0-2 are recorded before 3 starts
			interrupt <- os.Interrupt
			<-hang
		}
		return sim.Report{CapacityBlocks: i}, nil
	}, interrupt)
	if !errors.Is(err, errInterrupted) {
		t.Fatalf("err %v, want errInterrupted", err)
	}
	want := []bool{true, true, true, false, false, false}
	if !reflect.DeepEqual(finished, want) || reports[2].CapacityBlocks != 2 {
		t.Errorf("finished %v, want %v; reports %v", finished, want, reports)
	}
}

// TestRunJobsError: whatever the workers and their timing, the error
// returned is the first failed run's in order, as one worker's would be.
func TestRunJobsError(t *testing.T) {
	for _, workers := range []int{1, 2, 8} {
		_, _, err := runJobs(8, workers, func(i int) (sim.Report, error) {
			if i >= 2 {
				time.Sleep(time.Duration(8-i) * time.Millisecond) // later runs fail sooner
				return sim.Report{}, fmt.Errorf("run %d failed", i)
			}
			return sim.Report{}, nil
		}, nil)
		if err == nil || err.Error() != "run 2 failed" {
			t.Errorf("%d workers: %v, want run 2's error", workers, err)
		}
	}
}

// TestCompareInterrupt sends SIGINT to the command as a terminal's Ctrl-C
// does: it exits with status 130 and writes the capacities whose runs all
// finished, each with all its rows, and says which it left out.
func TestCompareInterrupt(t *testing.T) {
	capacities := "20,40,60,80,100,120,140,160,180,200,220,240,260,280,300,320,340,360,380,400"
	r := startChild(t, "compare", "-requests", "5000", "-capacity", capacities, "-format", "json").signalUntilExit(syscall.SIGINT)
	said := regexp.MustCompile(`^kvevict: interrupted: left out capacit(y|ies) ([0-9, ]+), whose runs had not all finished\n$`).
		FindStringSubmatch(r.err)
	if r.code != 130 || said == nil {
		t.Fatalf("exit %d, stderr %q; want 130 and the capacities left out", r.code, r.err)
	}
	var rows []row
	if err := json.Unmarshal([]byte(r.out), &rows); err != nil {
		t.Fatalf("%v:\n%s", err, r.out)
	}
	perCapacity := map[string]int{}
	for _, rw := range rows {
		perCapacity[strconv.Itoa(rw.CapacityBlocks)]++
	}
	left := strings.Split(said[2], ", ")
	for _, c := range strings.Split(capacities, ",") {
		switch n := perCapacity[c]; {
		case slices.Contains(left, c) == (n > 0):
			t.Errorf("capacity %s: %d rows written, and said left out: %v", c, n, slices.Contains(left, c))
		case n > 0 && n != len(strings.Split(strategyNames(), ", "))+1:
			t.Errorf("capacity %s: %d rows, want every strategy and belady", c, n)
		}
	}
}

// TestProgressLines: on a stderr that is not a terminal, or for csv or
// json, nothing; on a terminal, a bar redrawn as the percentage moves and
// cleared at the end; the counts stay right when the runs report from
// goroutines of their own.
func TestProgressLines(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, "table", 400)
	a, b := p.callback(), p.callback()
	a(100, 100)
	p.finished()
	b(100, 100)
	p.stop()
	if out.Len() != 0 {
		t.Fatalf("not a terminal: %q, want nothing", out.String())
	}
	p = newProgress(&out, "table", 200)
	p.drawn = true // as on a terminal
	p.callback()(100, 100)
	p.stop()
	if want := "\r[" + strings.Repeat("#", barWidth/2) + strings.Repeat(" ", barWidth/2) + "]  50%\r" + strings.Repeat(" ", barWidth+8) + "\r"; out.String() != want {
		t.Errorf("on a terminal %q, want %q", out.String(), want)
	}
	if f, err := os.Open(os.DevNull); err == nil { // a character device, as a terminal is
		defer f.Close()
		if newProgress(f, "json", 1).drawn || newProgress(f, "csv", 1).drawn {
			t.Error("a bar drawn for json or csv")
		}
	}

	out.Reset()
	p = newProgress(&out, "table", 8*1000)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cb := p.callback()
			for done := 1; done <= 1000; done++ {
				cb(done, 1000)
			}
			p.finished()
		}()
	}
	wg.Wait()
	p.stop()
	if p.done != p.total || p.runsDone != 8 {
		t.Errorf("counted %d of %d requests, %d of 8 runs", p.done, p.total, p.runsDone)
	}
}
