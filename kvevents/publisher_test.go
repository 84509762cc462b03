package kvevents

import (
	"context"
	"fmt"
	"testing"
)

// TestBinds checks vLLM's rule on the endpoints its docs and llm-d use.
func TestBinds(t *testing.T) {
	for ep, want := range map[string]bool{
		"tcp://*:5557":              true,
		"tcp://[::]:5557":           true,
		"ipc:///tmp/kv.ipc":         true,
		"inproc://cache":            true,
		"tcp://127.0.0.1:5557":      false,
		"tcp://vllm-pod-0:5557":     false,
		"tcp://kv-indexer.svc:5557": false,
	} {
		if got := Binds(ep); got != want {
			t.Errorf("Binds(%q) = %v, want %v", ep, got, want)
		}
	}
}

// TestReplayBufferBounded publishes more batches than the buffer holds and
// checks that the latest ones, in order, are what replay would send.
func TestReplayBufferBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p, err := NewPublisher(ctx, "inproc://kvevents-buffer", WithReplay("inproc://kvevents-buffer-replay", 3), WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for range 5 {
		if _, err := p.Publish(&EventBatch{Events: []Event{&AllBlocksCleared{}}}); err != nil {
			t.Fatal(err)
		}
	}
	for start, want := range map[int64]string{0: "[2 3 4]", 3: "[3 4]", 5: "[]"} {
		var seqs []int64
		for _, b := range p.since(start) {
			seqs = append(seqs, b.seq)
		}
		if got := fmt.Sprint(seqs); got != want {
			t.Errorf("since(%d) = %s, want %s", start, got, want)
		}
	}
	if p.Published() != 5 {
		t.Errorf("Published() = %d, want 5", p.Published())
	}
	for _, bad := range []PublisherOption{WithReplay("inproc://x", 0), WithEncoding(Encoding(9)), WithLinger(-1)} {
		if _, err := NewPublisher(ctx, "inproc://kvevents-bad", bad); err == nil {
			t.Error("a bad option was accepted")
		}
	}
}
