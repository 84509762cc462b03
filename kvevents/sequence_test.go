package kvevents

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"testing"
)

// newSequenceSubscriber is a Subscriber without a socket or replay, for
// driving its sequence rules message by message.
func newSequenceSubscriber(maxTopics int, maxGap int64) *Subscriber {
	return &Subscriber{
		maxTopics:  maxTopics,
		maxGap:     maxGap,
		once:       onceLog{log: slog.New(slog.NewTextHandler(io.Discard, nil))},
		streams:    make(map[string]*stream),
		heldBudget: int(subscriberShares(DefaultSubscriberMemory).held),
	}
}

// TestSequenceRules feeds scripts of (topic, seq) and checks what is
// delivered, with the counts that the rules give, worked by hand: a join
// misses what came before it; a sequence below one delivered is a new
// publisher; a jump past the gap limit waits for the next message to
// confirm it; numbers no publisher sends are malformed.
func TestSequenceRules(t *testing.T) {
	payload, err := Encode(&EventBatch{TS: 1}, EncodingMixed)
	if err != nil {
		t.Fatal(err)
	}
	type in struct {
		topic string
		seq   int64
	}
	type out struct {
		seq     int64
		missed  int64
		restart bool
	}
	for _, tc := range []struct {
		name  string
		in    []in
		want  []out
		stats Stats
	}{
		{"join late, then in order", []in{{"a", 5}, {"a", 6}},
			[]out{{5, 5, false}, {6, 0, false}}, Stats{Delivered: 2, Missed: 5, Gaps: 1}},
		{"a restarted publisher that the mirror met at 6", []in{{"a", 9}, {"a", 6}, {"a", 7}},
			[]out{{9, 9, false}, {6, 6, true}, {7, 0, false}},
			Stats{Delivered: 3, Missed: 15, Gaps: 2, Restarts: 1}},
		{"a duplicate of the last message", []in{{"a", 0}, {"a", 1}, {"a", 1}, {"a", 2}},
			[]out{{0, 0, false}, {1, 0, false}, {2, 0, false}}, Stats{Delivered: 3, Stale: 1}},
		{"a restart at 0", []in{{"a", 0}, {"a", 1}, {"a", 0}},
			[]out{{0, 0, false}, {1, 0, false}, {0, 0, true}}, Stats{Delivered: 3, Restarts: 1}},
		{"a forged jump, then the real publisher goes on", []in{{"a", 0}, {"a", 1 << 40}, {"a", 1}, {"a", 2}},
			[]out{{0, 0, false}, {1, 0, false}, {2, 0, false}}, Stats{Delivered: 3, Refused: 1}},
		{"a jump the next message confirms", []in{{"a", 0}, {"a", 500}, {"a", 501}},
			[]out{{0, 0, false}, {500, 499, false}, {501, 0, false}}, Stats{Delivered: 3, Missed: 499, Gaps: 1}},
		{"a gap within the limit", []in{{"a", 0}, {"a", 50}},
			[]out{{0, 0, false}, {50, 49, false}}, Stats{Delivered: 2, Missed: 49, Gaps: 1}},
		{"sequence numbers no publisher sends", []in{{"a", -1}, {"a", math.MaxInt64}, {"a", 0}},
			[]out{{0, 0, false}}, Stats{Delivered: 1, Malformed: 2}},
		// c takes the place of a, heard from least recently; a, back,
		// joins again and takes b's.
		{"topics past the limit", []in{{"a", 0}, {"b", 0}, {"c", 0}, {"a", 1}},
			[]out{{0, 0, false}, {0, 0, false}, {0, 0, false}, {1, 1, false}}, Stats{Delivered: 4, Missed: 1, Gaps: 1, Released: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSequenceSubscriber(2, 100)
			var got []out
			for _, m := range tc.in {
				s.handle(context.Background(), [][]byte{[]byte(m.topic), seqBytes(m.seq), payload}, 1, func(msg Message) {
					if !msg.Released { // counted in Stats
						got = append(got, out{msg.Seq, msg.Missed, msg.Restart})
					}
				})
			}
			if len(got) != len(tc.want) {
				t.Fatalf("delivered %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("delivery %d: %+v, want %+v", i, got[i], tc.want[i])
				}
			}
			if st := s.Stats(); st != tc.stats {
				t.Errorf("stats %+v\nwant %+v", st, tc.stats)
			}
		})
	}
}

// TestParseReplay reads replay answers as vLLM's ROUTER socket sends them
// to a DEALER (whose socket takes the identity frame off), written by hand
// from kv_events.py: current vLLM's [empty, topic, seq, payload] and end
// marker [empty, topic, -1, empty], and the first layout without the
// topic frame.
func TestParseReplay(t *testing.T) {
	seq7 := []byte{0, 0, 0, 0, 0, 0, 0, 7}
	end := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	payload := []byte{0x93, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x90, 0x00} // [0.0, [], 0]
	for _, tc := range []struct {
		name    string
		frames  [][]byte
		topic   string // "-" for none
		seq     int64
		payload []byte
		bad     bool
	}{
		{"current, a batch", [][]byte{{}, []byte("kv@pod-0@m"), seq7, payload}, "kv@pod-0@m", 7, payload, false},
		{"current, the end", [][]byte{{}, []byte("kv@pod-0@m"), end, {}}, "kv@pod-0@m", -1, []byte{}, false},
		{"current, empty topic", [][]byte{{}, {}, seq7, payload}, "", 7, payload, false},
		{"first layout, a batch", [][]byte{{}, seq7, payload}, "-", 7, payload, false},
		{"first layout, the end", [][]byte{{}, end, {}}, "-", -1, []byte{}, false},
		{"no delimiter", [][]byte{seq7, payload}, "-", 7, payload, false},
		{"a 4-byte sequence", [][]byte{{}, []byte("t"), {0, 0, 0, 7}, payload}, "", 0, nil, true},
		{"a frame alone", [][]byte{seq7}, "", 0, nil, true},
	} {
		topic, seq, p, err := parseReplay(tc.frames)
		if tc.bad {
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("%s: err %v, want ErrMalformed", tc.name, err)
			}
			continue
		}
		gotTopic := "-"
		if topic != nil {
			gotTopic = string(topic)
		}
		if err != nil || gotTopic != tc.topic || seq != tc.seq || !bytes.Equal(p, tc.payload) {
			t.Errorf("%s: topic %q seq %d payload %x err %v; want %q %d %x", tc.name, gotTopic, seq, p, err, tc.topic, tc.seq, tc.payload)
		}
	}
}

// TestHeldPayloadsBounded forges a jump on each of 50 topics with a 1 MiB
// payload: the payloads held stay within the budget, and a confirmed jump
// whose payload was not kept counts its batch as missed (without replay)
// instead of delivering it.
func TestHeldPayloadsBounded(t *testing.T) {
	s := newSequenceSubscriber(100, 100)
	small, err := Encode(&EventBatch{TS: 1}, EncodingMixed)
	if err != nil {
		t.Fatal(err)
	}
	big := append([]byte(nil), small...)
	big = append(big, make([]byte, 1<<20)...) // undecodable, but only held
	var got []Message
	fn := func(m Message) { got = append(got, m) }
	for i := range 50 {
		topic := []byte(fmt.Sprint("t", i))
		s.handle(context.Background(), [][]byte{topic, seqBytes(0), small}, 1, fn)
		s.handle(context.Background(), [][]byte{topic, seqBytes(1 << 20), big}, 1, fn)
		if s.heldBytes > s.heldBudget {
			t.Fatalf("after %d topics, %d bytes held, budget %d", i+1, s.heldBytes, s.heldBudget)
		}
	}
	if s.heldBytes == 0 || s.streams["t49"].heldPayload != nil {
		t.Fatalf("held %d bytes; the last topic's payload kept: %v", s.heldBytes, s.streams["t49"].heldPayload != nil)
	}
	got = got[:0]
	s.handle(context.Background(), [][]byte{[]byte("t49"), seqBytes(1<<20 + 1), small}, 1, fn)
	if len(got) != 1 || got[0].Seq != 1<<20+1 || got[0].Missed != 1<<20 {
		t.Errorf("confirmed jump without its payload: delivered %+v, want seq %d with %d missed", got, 1<<20+1, 1<<20)
	}
}
