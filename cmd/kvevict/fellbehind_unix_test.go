//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sagellm/kvevict/kvevents"
)

// TestMirrorFellBehind freezes a mirror (SIGSTOP) while a publisher sends
// it 40 MB of batches with a queue of two: what the kernel's buffers and
// the queue hold reaches it, the rest is dropped, and no later batch comes
// to show the gap. At the end of -duration the mirror asks the replay
// socket for what came after its last batch: with a buffer that holds
// every batch, it applies them all and exits 0 with the publisher's every
// block; with a buffer of 10 batches, it counts what the buffer no longer
// held as missed and exits 1.
func TestMirrorFellBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("freezes a mirror for seconds")
	}
	if raceEnabled {
		t.Skip("40 MB of batches under the race detector outlast the mirror's replay timeout")
	}
	const batches = 400
	for _, buffer := range []int{batches + 100, 10} {
		t.Run(fmt.Sprint("buffer=", buffer), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p, err := kvevents.NewPublisher(ctx, "tcp://127.0.0.1:0", kvevents.WithPublisherDirection(kvevents.Bind),
				kvevents.WithReplay("tcp://127.0.0.1:0", buffer), kvevents.WithHighWaterMark(2), kvevents.WithLinger(0),
				kvevents.WithPublisherLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			mirror := startChild(t, "mirror", "-connect", "tcp://"+p.Addr().String(), "-replay-connect", "tcp://"+p.ReplayAddr().String(),
				"-duration", "8s", "-format", "json")
			tokens := make([]int64, 30_000) // 90 KB a batch
			hash := uint64(0)
			publish := func() {
				hash++
				b := kvevents.EventBatch{Events: []kvevents.Event{&kvevents.BlockStored{
					BlockHashes: kvevents.IntHashes([]uint64{hash}), TokenIDs: tokens, BlockSize: int64(len(tokens))}}}
				if _, err := p.Publish(&b); err != nil {
					t.Fatal(err)
				}
			}
			// Batches until one reached the mirror: it has subscribed.
			for p.Stats().Reached == 0 {
				if ctx.Err() != nil {
					t.Fatal("the mirror never subscribed")
				}
				publish()
				time.Sleep(10 * time.Millisecond)
			}
			mirror.cmd.Process.Signal(syscall.SIGSTOP)
			for range batches {
				publish()
			}
			for p.Stats().Dropped == 0 && ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond)
			}
			mirror.cmd.Process.Signal(syscall.SIGCONT)
			res := mirror.wait()
			var rows []mirrorRow
			if err := json.Unmarshal([]byte(res.out), &rows); err != nil || len(rows) != 1 {
				t.Fatalf("exit %d, stdout %q (%v), stderr %q", res.code, res.out, err, res.err)
			}
			r, published := rows[0], int64(hash)
			t.Logf("exit %d, %+v of %d published, %d dropped for it", res.code, r, published, p.Stats().Dropped)
			if r.Batches+r.MissedBatches != published {
				t.Errorf("%d batches applied and %d missed of %d published", r.Batches, r.MissedBatches, published)
			}
			if buffer > batches {
				if res.code != 0 || r.MissedBatches != 0 || r.ResidentBlocks != int(published) {
					t.Errorf("exit %d, %d missed, %d blocks of %d; want 0, none, all: %s", res.code, r.MissedBatches, r.ResidentBlocks, published, res.err)
				}
				return
			}
			if res.code != 1 || r.MissedBatches == 0 || r.MissedBatches > published-int64(buffer) {
				t.Errorf("exit %d, %d missed; want 1 and some of the %d the buffer let go: %s", res.code, r.MissedBatches, published-int64(buffer), res.err)
			}
			if want := "partial state: " + strconv.FormatInt(r.MissedBatches, 10) + " batches missed"; !strings.Contains(res.err, want) {
				t.Errorf("stderr %q lacks %q", res.err, want)
			}
		})
	}
}
