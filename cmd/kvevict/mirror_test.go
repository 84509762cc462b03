package main

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sagellm/kvevict/internal/zmtp"
)

// TestMirrorCommand feeds mirror, over TCP, frames a vLLM engine would send
// (written by hand, array encoding) for two topics.
func TestMirrorCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), socketTimeout)
	defer cancel()
	pub := zmtp.NewPub(zmtp.PubOptions{})
	defer pub.Close(0)
	if err := pub.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := runArgs(t, "mirror", "-endpoint", "tcp://"+pub.Addr().String(), "-duration", "3s", "-format", "json")
		done <- result{code, out, errOut}
	}()
	if err := pub.WaitSubscribers(ctx, 1); err != nil {
		t.Fatalf("mirror never subscribed: %v", err)
	}
	stored := "98 ab426c6f636b53746f726564" // ["BlockStored", then 7 fields
	removed := "93 ac426c6f636b52656d6f766564"
	frames := []struct {
		topic string
		seq   uint64
		hex   string
	}{
		// [1.0, [["BlockStored", [1, 2, 3], None, [], 16, None, "GPU", None]]]
		{"a", 0, "92 cb3ff0000000000000 91" + stored + "93010203 c0 90 10 c0 a3475055 c0"},
		// [1.0, [["BlockStored", [7], None, ...], ["BlockRemoved", [7], "GPU"]]]
		{"b", 0, "92 cb3ff0000000000000 92" + stored + "9107 c0 90 10 c0 a3475055 c0" + removed + "9107 a3475055"},
		// [1.0, [["BlockRemoved", [3], "GPU"], ["BlockStored", [4, 5], 2, ...]]]
		{"a", 1, "92 cb3ff0000000000000 92" + removed + "9103 a3475055" + stored + "920405 02 90 10 c0 a3475055 c0"},
		// sequence 1 of b is lost: [1.0, [["BlockStored", [8], None, ...]]]
		{"b", 2, "92 cb3ff0000000000000 91" + stored + "9108 c0 90 10 c0 a3475055 c0"},
	}
	for _, f := range frames {
		payload, err := hex.DecodeString(strings.ReplaceAll(f.hex, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		seq := binary.BigEndian.AppendUint64(nil, f.seq)
		if err := pub.Send([][]byte{[]byte(f.topic), seq, payload}); err != nil {
			t.Fatal(err)
		}
	}
	r := <-done
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(r.out), &rows); err != nil {
		t.Fatalf("%q: %v", r.out, err)
	}
	// a holds 1 2 4 5 (3 removed); b stored and removed 7, then 8 after a gap.
	want := `[map[batches:2 missed_batches:0 resident_blocks:4 resident_by_medium:map[GPU:4] restarts:0 topic:a] ` +
		`map[batches:2 missed_batches:1 resident_blocks:1 resident_by_medium:map[GPU:1] restarts:0 topic:b]]`
	if got := fmt.Sprint(rows); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
