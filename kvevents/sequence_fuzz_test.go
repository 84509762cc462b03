package kvevents

import (
	"context"
	"encoding/binary"
	"testing"
)

// FuzzSequence hands a Subscriber without a socket (as TestSequenceRules
// does) messages read from arbitrary bytes: five topics where it follows
// three, sequence numbers that go on, repeat, go back, jump a little or
// far, or are any 64 bits, on three connections, with two payloads so that
// a repeat may be a duplicate or another publisher's batch, and frames of
// the wrong shape. Whatever comes, what it delivers keeps the rules its
// documentation gives: per topic, each message follows the one delivered
// before it (Seq one more, plus the Missed before it) unless it is marked
// Restart, when Missed counts from 0, as it does for a topic's first
// message; a repeat of the last number delivered is dropped if it carries
// the same batch and delivered as a restart if it carries another (a
// second publisher); at most three topics are followed, a fourth taking
// the place of the one heard from least recently, which is released and,
// heard again, starts over as a join; the counts in Stats add up to
// what was delivered and missed; and held payloads stay within their
// budget.
func FuzzSequence(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1, 0, 2, 0, 0, 1, 3, 9, 0})
	f.Add([]byte{0, 1, 0, 4, 0, 5, 0, 1, 2, 1, 3, 2, 4, 1, 0, 6})
	f.Add([]byte{16, 2, 17, 2, 18, 2, 19, 2, 20, 2, 0, 7, 1, 2, 3, 4, 5, 6, 7, 8})
	payloads := [2][]byte{}
	for i := range payloads {
		p, err := Encode(&EventBatch{TS: float64(i + 1), Events: []Event{stored(nil, uint64(i))}}, EncodingMixed)
		if err != nil {
			f.Fatal(err)
		}
		payloads[i] = p
	}
	topics := []string{"a", "b", "c", "d", "e"}
	f.Fuzz(func(t *testing.T, data []byte) {
		const maxTopics, maxGap = 3, 100
		s := newSequenceSubscriber(maxTopics, maxGap)
		in := fuzzInput(data)
		next := in.next
		sent := make(map[string]int64) // the last number sent per topic
		delivered := make(map[string]int64)
		batch := make(map[string]float64) // the TS of the batch delivered last per topic
		var count, missed, released int64
		check := func(m Message) {
			if m.Released { // followed again, it starts over as a join
				if _, followed := s.streams[m.Topic]; followed {
					t.Fatalf("%q released, yet followed", m.Topic)
				}
				delete(delivered, m.Topic)
				delete(batch, m.Topic)
				released++
				return
			}
			count++
			missed += m.Missed
			if m.Missed < 0 || m.Seq < 0 {
				t.Fatalf("delivered %q %d with %d missed", m.Topic, m.Seq, m.Missed)
			}
			prev, seen := delivered[m.Topic]
			switch {
			case !seen || m.Restart:
				if m.Missed != m.Seq {
					t.Fatalf("%q %d, first or a restart (%v), missed %d, want %d", m.Topic, m.Seq, m.Restart, m.Missed, m.Seq)
				}
			case m.Seq != prev+1+m.Missed:
				t.Fatalf("%q %d after %d with %d missed", m.Topic, m.Seq, prev, m.Missed)
			}
			delivered[m.Topic], batch[m.Topic] = m.Seq, m.Batch.TS
			if len(delivered) > maxTopics {
				t.Fatalf("%d topics delivered, at most %d followed", len(delivered), maxTopics)
			}
		}
		for len(in) > 0 {
			op := next()
			topic := topics[op%8%5]
			var seq int64
			switch op >> 3 % 8 {
			case 0, 1, 2:
				seq = sent[topic] + 1
			case 3:
				seq = sent[topic] // a repeat
			case 4:
				seq = max(0, sent[topic]-int64(next()%8)) // back
			case 5:
				seq = sent[topic] + int64(next()) // a gap, within the limit or not
			case 6:
				seq = sent[topic] + maxGap + 1 + int64(next()%4) // a jump past it
			default:
				var b [8]byte
				for i := range b {
					b[i] = next()
				}
				seq = int64(binary.BigEndian.Uint64(b[:]))
			}
			sent[topic] = seq
			frames := [][]byte{[]byte(topic), seqBytes(seq), payloads[op>>6&1]}
			if op>>7 == 1 && next()%8 == 0 {
				frames = frames[:2] // the wrong shape
			}
			before, last := count, delivered[topic]
			repeat := len(frames) == 3 && batch[topic] != 0 && seq == last
			same := batch[topic] == float64(op>>6&1+1)
			s.handle(context.Background(), frames, uint64(op%3), check)
			if repeat {
				if got := count - before; same && got != 0 || !same && (got != 1 || delivered[topic] != seq) {
					t.Fatalf("%q %d repeated, the same batch %v: %d delivered", topic, seq, same, got)
				}
			}
		}
		st := s.Stats()
		if st.Delivered != count || st.Missed != missed || st.Released != released {
			t.Fatalf("stats: %d delivered, %d missed, %d released; the handler saw %d, %d and %d", st.Delivered, st.Missed, st.Released, count, missed, released)
		}
		if len(s.streams) > maxTopics {
			t.Fatalf("%d topics followed, at most %d", len(s.streams), maxTopics)
		}
		held := 0
		for _, st := range s.streams {
			held += len(st.heldPayload)
		}
		if held != s.heldBytes || held > s.heldBudget {
			t.Fatalf("%d bytes held, %d counted, budget %d", held, s.heldBytes, s.heldBudget)
		}
	})
}
