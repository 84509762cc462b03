package kvevents

import "testing"

// fuzzEvents reads batches of events from data, a few bits at a time, for
// FuzzMirror: hashes from a small universe (odd ones as bytes hashes, so
// that both of a set's indexes are used), parents resident or not, and,
// when several is set, any of 20 groups on one of four media (nil and
// "GPU" are the same pair), so that more pairs than MaxGroups arrive. Each
// batch comes with whether its message is marked Restart.
func fuzzEvents(data []byte, several bool) (batches [][]Event, restarts []bool) {
	in := fuzzInput(data)
	next := in.next
	hash := func() Hash {
		h := uint64(next() % 48)
		if h%2 == 1 {
			return BytesHash([]byte{byte(h), 0xff})
		}
		return IntHash(h)
	}
	media := []*string{nil, ptr(MediumGPU), ptr("CPU"), ptr("DISK")}
	pair := func() (*int64, *string) {
		if !several {
			return nil, nil
		}
		b := next()
		var group *int64
		if b%21 != 20 {
			group = ptr(int64(b % 21))
		}
		return group, media[next()%4]
	}
	var batch []Event
	for len(in) > 0 {
		switch op := next(); op % 8 {
		case 0:
			batch = append(batch, &AllBlocksCleared{})
		case 1, 2:
			ev := &BlockRemoved{}
			for range 1 + next()%4 {
				ev.BlockHashes = append(ev.BlockHashes, hash())
			}
			ev.GroupIdx, ev.Medium = pair()
			batch = append(batch, ev)
		case 7:
			batches, restarts = append(batches, batch), append(restarts, op&8 != 0)
			batch = nil
		default:
			ev := &BlockStored{TokenIDs: []int64{}, BlockSize: 16}
			if op&16 != 0 {
				ev.ParentBlockHash = ptr(hash())
			}
			for range 1 + next()%5 {
				ev.BlockHashes = append(ev.BlockHashes, hash())
			}
			ev.GroupIdx, ev.Medium = pair()
			batch = append(batch, ev)
		}
	}
	return append(batches, batch), append(restarts, false)
}

// fuzzInput is a fuzz target's bytes, read one at a time.
type fuzzInput []byte

// next returns the next byte, or 0 once none is left.
func (in *fuzzInput) next() byte {
	if len(*in) == 0 {
		return 0
	}
	b := (*in)[0]
	*in = (*in)[1:]
	return b
}

// FuzzMirror hands a Mirror batches read from arbitrary bytes, as a
// subscriber delivers whatever a publisher sent, with restarts and missed
// batches. After every batch the mirror's invariants hold (checkMirror)
// and its queries answer; when every event is of one (group, medium) pair,
// what it holds, the order of its leaves and its evictions are the
// reference model's, as TestMirrorAgainstReference checks on random
// batches.
func FuzzMirror(f *testing.F) {
	f.Add([]byte{4, 0, 3, 2, 0, 2, 4, 19, 1, 6, 3, 10, 12, 14, 7})
	f.Add([]byte{1, 0, 3, 4, 0, 2, 4, 6, 8, 19, 2, 4, 6, 2, 1, 1, 2, 15, 0, 7})
	f.Add([]byte{3, 1, 3, 4, 0, 2, 4, 6, 8, 5, 1, 19, 2, 4, 6, 21, 3, 7, 2, 0, 8, 2, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 || len(data) > 4096 {
			return
		}
		capacity, several := 1+int(data[0]%24), data[1]%2 == 1
		batches, restarts := fuzzEvents(data[2:], several)
		m, err := NewMirror(capacity)
		if err != nil {
			t.Fatal(err)
		}
		ref := newRefTopic()
		var lost int64
		for i, events := range batches {
			m.Handle(Message{Topic: "e", Batch: EventBatch{Events: events}, Restart: restarts[i], Missed: int64(i % 3)})
			lost += int64(i % 3)
			checkMirror(t, m)
			st := m.Topics()[0]
			if st.Batches != int64(i+1) || st.MissedBatches != lost {
				t.Fatalf("batch %d: %d batches, %d missed; want %d, %d", i, st.Batches, st.MissedBatches, i+1, lost)
			}
			for h := range uint64(48) {
				m.Match("e", []Hash{IntHash(h), IntHash(h + 1)})
				m.MatchGroup("e", int64(h%3), []Hash{IntHash(h)})
				m.ResidentOn("e", "CPU", IntHash(h))
			}
			if several {
				continue
			}
			if restarts[i] {
				ref.apply(capacity, []Event{&AllBlocksCleared{}})
			}
			ref.apply(capacity, events)
			if got, want := mirrorLeaves(m, "e"), ref.leafHashes(); got != want {
				t.Fatalf("batch %d: leaves %v, reference %v", i, got, want)
			}
			if st.ResidentBlocks != len(ref.blocks) || st.EvictedBlocks != ref.evicted {
				t.Fatalf("batch %d: %d resident, %d evicted; reference %d, %d", i, st.ResidentBlocks, st.EvictedBlocks, len(ref.blocks), ref.evicted)
			}
		}
	})
}
