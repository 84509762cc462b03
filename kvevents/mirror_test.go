package kvevents

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/prefix"
)

// checkMirror verifies the mirror's invariants: each topic holds at most
// capacity blocks, its leaves are linked both ways from the oldest to the
// newest and are exactly its resident blocks without resident children,
// each child count is the number of resident blocks naming that parent,
// and a slot is free, resident, or a removed parent of resident blocks.
func checkMirror(t *testing.T, m *Mirror) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	var used int64
	for name, ti := range m.topics {
		if got := ti.measure(); ti.mem != got || ti.bytesLive != int64(len(ti.bytesKeys)) || ti.bytesPeak < ti.bytesLive {
			t.Fatalf("topic %q: %d bytes counted, %d held; %d bytes hashes counted, %d held, at most %d", name, ti.mem, got, ti.bytesLive, len(ti.bytesKeys), ti.bytesPeak)
		}
		used += ti.mem
	}
	if used != m.used || used > m.budget {
		t.Fatalf("the topics hold %d bytes, the mirror counts %d, budget %d", used, m.used, m.budget)
	}
	for name, ti := range m.topics {
		blocks := make(map[blockKey]int32)
		ti.each(func(k blockKey, n int32) { blocks[k] = n })
		if len(blocks) != ti.residents {
			t.Fatalf("topic %q: %d blocks filed, %d counted", name, len(blocks), ti.residents)
		}
		for s := range ti.sets {
			if x := &ti.index[s]; x.ints.count+len(x.bytes) != x.count {
				t.Fatalf("topic %q: set %d files %d blocks, counts %d", name, s, x.ints.count+len(x.bytes), x.count)
			}
		}
		if len(blocks) > m.capacity {
			t.Fatalf("topic %q: %d blocks over capacity %d", name, len(blocks), m.capacity)
		}
		resident := func(n int) bool {
			b := &ti.slab[n]
			got, ok := blocks[ti.key(int32(n))]
			return ok && got == int32(n) && !b.removed
		}
		for h, n := range blocks {
			if b := &ti.slab[n]; ti.key(n) != h || b.removed {
				t.Fatalf("topic %q: block %v filed under %v, removed %v", name, ti.key(n), h, b.removed)
			}
		}
		children := make(map[int32]int32)
		for n := range ti.slab {
			if b := &ti.slab[n]; resident(n) && b.parent != noSlot {
				children[b.parent]++
			}
		}
		free := make(map[int32]bool)
		for _, n := range ti.free {
			if n < 0 || int(n) >= len(ti.slab) || free[n] || resident(int(n)) || ti.slab[n].removed {
				t.Fatalf("topic %q: free slot %d of %d: twice %v, in use %v", name, n, len(ti.slab), free[n], resident(int(n)) || ti.slab[n].removed)
			}
			free[n] = true
		}
		kept, leaves := 0, 0
		for n := range ti.slab {
			b := &ti.slab[n]
			if free[int32(n)] {
				continue
			}
			if !resident(n) && !b.removed {
				t.Fatalf("topic %q: slot %d is neither free nor in use", name, n)
			}
			if b.children != children[int32(n)] {
				t.Fatalf("topic %q: block %v counts %d children, has %d", name, ti.key(int32(n)), b.children, children[int32(n)])
			}
			switch {
			case b.removed && b.children == 0:
				t.Fatalf("topic %q: removed block %v keeps its slot with no children", name, ti.key(int32(n)))
			case b.removed:
				kept++
			case b.children == 0:
				leaves++
			}
			if (b.removed || b.children > 0) && (b.older != noSlot || b.newer != noSlot) {
				t.Fatalf("topic %q: block %v, not a leaf, is linked to %d and %d", name, ti.key(int32(n)), b.older, b.newer)
			}
		}
		if len(blocks)+kept+len(free) != len(ti.slab) {
			t.Fatalf("topic %q: %d resident + %d kept + %d free slots != %d", name, len(blocks), kept, len(free), len(ti.slab))
		}
		walked, prev := 0, noSlot
		for n := ti.oldest; n != noSlot; prev, n = n, ti.slab[n].newer {
			if walked++; walked > leaves || int(n) >= len(ti.slab) {
				t.Fatalf("topic %q: the leaves run past the %d leaves or the slab", name, leaves)
			}
			if b := &ti.slab[n]; !resident(int(n)) || b.children != 0 || b.older != prev {
				t.Fatalf("topic %q: the leaves hold %v (resident %v, %d children), linked back to %d, not %d", name, ti.key(n), resident(int(n)), b.children, b.older, prev)
			}
		}
		if walked != leaves || ti.newest != prev {
			t.Fatalf("topic %q: %d blocks in the leaves ending at %d, want %d ending at %d", name, walked, prev, leaves, ti.newest)
		}
	}
}

func stored(parent *Hash, hashes ...uint64) *BlockStored {
	return &BlockStored{BlockHashes: IntHashes(hashes), ParentBlockHash: parent, TokenIDs: []int64{}, BlockSize: 16}
}

func removed(hashes ...uint64) *BlockRemoved { return &BlockRemoved{BlockHashes: IntHashes(hashes)} }

func residents(m *Mirror, topic string, upTo uint64) []uint64 {
	var out []uint64
	for h := range upTo {
		if m.Resident(topic, IntHash(h)) {
			out = append(out, h)
		}
	}
	return out
}

// TestMirrorSteps applies event scripts whose outcomes follow from vLLM's
// semantics and the mirror's documented eviction order, worked by hand.
func TestMirrorSteps(t *testing.T) {
	for _, tc := range []struct {
		name     string
		capacity int
		events   []Event
		resident string // after all events, hashes 0..9
		evicted  int64
	}{
		{"remove an inner block: its children stay", 10, []Event{
			stored(nil, 1, 2, 3), stored(ptr(IntHash(2)), 5, 6), removed(2),
		}, "[1 3 5 6]", 0},
		{"removed then stored again", 10, []Event{
			stored(nil, 1, 2), removed(2), stored(ptr(IntHash(1)), 2),
		}, "[1 2]", 0},
		{"cleared, then a new chain", 10, []Event{
			stored(nil, 1, 2, 3), &AllBlocksCleared{}, stored(nil, 4),
		}, "[4]", 0},
		{"parent not resident: the chain is resident all the same", 10, []Event{
			stored(ptr(IntHash(9)), 4, 5),
		}, "[4 5]", 0},
		// capacity 3: [1 2 3] fills it; 4 under 1 evicts the oldest leaf, 3;
		// 2 becomes a leaf at the old end, so 5 under 4 evicts 2.
		{"over capacity: oldest leaf first, then its parent", 3, []Event{
			stored(nil, 1, 2, 3), stored(ptr(IntHash(1)), 4), stored(ptr(IntHash(4)), 5),
		}, "[1 4 5]", 2},
		// capacity 2: the head enters, and the rest of the chain is not
		// stored, since only its own prefix could make room: the head is
		// the part a prefix match can use.
		{"chain longer than the capacity", 2, []Event{
			stored(nil, 1, 2, 3, 4),
		}, "[1 2]", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMirror(tc.capacity)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range tc.events {
				m.Apply("e", &EventBatch{Events: []Event{ev}})
				checkMirror(t, m)
			}
			if got := fmt.Sprint(residents(m, "e", 10)); got != tc.resident {
				t.Errorf("resident %s, want %s", got, tc.resident)
			}
			if st := m.Topics()[0]; st.EvictedBlocks != tc.evicted || st.ResidentBlocks != len(residents(m, "e", 10)) {
				t.Errorf("stats %+v, want %d evicted", st, tc.evicted)
			}
		})
	}
	if _, err := NewMirror(0); err == nil {
		t.Error("NewMirror(0) succeeded")
	}
}

// TestMirrorFollowsTree drives a prefix.Tree with random requests and
// evictions, feeds its events through FromPrefix to a mirror as large as
// the tree, and checks that the mirror holds what the tree holds.
func TestMirrorFollowsTree(t *testing.T) {
	m, err := NewMirror(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	var batch EventBatch
	const capacity = 40
	tree := newTestTree(t, capacity, func(e prefix.Event) {
		batch.Events = append(batch.Events, FromPrefix(e, 16, nil))
	})
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		// Prompts share heads: a conversation id, then turns.
		conv := uint64(rng.IntN(8))
		path := []uint64{conv << 32}
		for d := range rng.IntN(12) {
			path = append(path, conv<<32|uint64(d+1)<<16|uint64(rng.IntN(2)))
			// Chained hashes: each names its whole prefix.
			path[len(path)-1] ^= path[len(path)-2] * 31
		}
		if _, err := tree.Insert(path, prefix.Access{Tick: int64(i)}); err != nil {
			t.Fatal(err)
		}
		if over := tree.Len() - capacity; over > 0 {
			if _, err := tree.Evict(over); err != nil {
				t.Fatal(err)
			}
		}
		m.Apply("e", &batch)
		batch.Events = batch.Events[:0]
		checkMirror(t, m)
		if got := m.Topics()[0].ResidentBlocks; got != tree.Len() {
			t.Fatalf("step %d: mirror holds %d blocks, tree %d", i, got, tree.Len())
		}
		if got, want := m.Match("e", IntHashes(path)), tree.Peek(path); got != want {
			t.Fatalf("step %d: mirror matches %d blocks of the path, tree %d", i, got, want)
		}
	}
}

// newTestTree is the one place the tests build a prefix tree, for a pool
// of capacity blocks.
func newTestTree(t *testing.T, capacity int, onEvent func(prefix.Event)) *prefix.Tree {
	t.Helper()
	tree, err := prefix.New(kvevict.LRU, capacity, prefix.WithEvents(onEvent))
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// TestMirrorFromVLLMPublisher feeds a mirror, over TCP, the frames a vLLM
// engine would send (written by hand: one engine with the array encoding
// and int hashes, one with the map encoding and bytes hashes) and checks
// the resident blocks vLLM's semantics give. The subscriber reuses each
// batch's memory for the next, as a mirror's may.
func TestMirrorFromVLLMPublisher(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	m, err := NewMirror(100)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSubscriber(ctx, "tcp://127.0.0.1:0", WithListen(), WithBatchReuse())
	if err != nil {
		t.Fatal(err)
	}
	c := runSubscriber(ctx, t, s, m.Handle)
	pub := rawPub(ctx, t, "tcp://"+s.Addr().String())
	const a, b = "kv@pod-a@m", "kv@pod-b@m"
	frames := []struct {
		topic string
		seq   int64
		hex   string
	}{
		{a, 0, `92 cb3ff0000000000000 91           // [1.0, [event]]
			98 ab426c6f636b53746f726564 93010203 // ["BlockStored", [1, 2, 3],
			c0 90 10 c0 a3475055 c0               //  None, [], 16, None, "GPU", None]`},
		{b, 0, `83 a27473 cb3ff0000000000000 a66576656e7473 91 // {ts: 1.0, events: [
			88 a474797065 ab426c6f636b53746f726564           //  {type: "BlockStored",
			ac626c6f636b5f686173686573 92 c401aa c401bb       //   block_hashes: [bin aa, bin bb],
			b1706172656e745f626c6f636b5f68617368 c0           //   parent_block_hash: None,
			a9746f6b656e5f696473 90 aa626c6f636b5f73697a65 10 //   token_ids: [], block_size: 16,
			a76c6f72615f6964 c0 a66d656469756d a3475055       //   lora_id: None, medium: "GPU",
			a96c6f72615f6e616d65 c0                           //   lora_name: None}],
			b2646174615f706172616c6c656c5f72616e6b 00         //  data_parallel_rank: 0}`},
		{a, 1, `92 cb3ff0000000000000 93
			98 ab426c6f636b53746f726564 9104 03 90 10 c0 a3475055 c0   // stored [4] under 3
			93 ac426c6f636b52656d6f766564 9104 a3475055                // removed [4]
			98 ab426c6f636b53746f726564 920506 02 90 10 c0 a3475055 c0 // stored [5, 6] under 2`},
		{b, 1, `83 a27473 cb3ff0000000000000 a66576656e7473 91
			81 a474797065 b0416c6c426c6f636b73436c6561726564 // {type: "AllBlocksCleared"}
			b2646174615f706172616c6c656c5f72616e6b 00`},
		{a, 2, `92 cb3ff0000000000000 91 93 ac426c6f636b52656d6f766564 9102 a3475055 // removed [2]`},
		{b, 2, `83 a27473 cb3ff0000000000000 a66576656e7473 91
			88 a474797065 ab426c6f636b53746f726564 ac626c6f636b5f686173686573 91 c401cc // stored [bin cc]
			b1706172656e745f626c6f636b5f68617368 c0 a9746f6b656e5f696473 90 aa626c6f636b5f73697a65 10
			a76c6f72615f6964 c0 a66d656469756d a3475055 a96c6f72615f6e616d65 c0
			b2646174615f706172616c6c656c5f72616e6b 00`},
	}
	for _, f := range frames {
		sendRaw(t, pub, []byte(f.topic), seqBytes(f.seq), unhex(t, f.hex))
	}
	c.wait(ctx, t, len(frames))
	if st := s.Stats(); st.Malformed+st.FieldType+st.UnknownEvent+st.Missed != 0 {
		t.Fatalf("bad input in a valid stream: %+v", st)
	}
	checkMirror(t, m)
	// Engine a: stored 1 2 3, stored 4 and removed it, stored 5 6 under 2,
	// removed 2: it holds 1, 3, 5, 6, and a request 1 2 3 finds 1 only.
	// Engine b: stored aa bb, cleared, stored cc: it holds cc.
	stats := m.Topics()
	if len(stats) != 2 || stats[0].Topic != a || stats[0].ResidentBlocks != 4 || stats[1].Topic != b || stats[1].ResidentBlocks != 1 {
		t.Fatalf("topics %+v, want %s with 4 blocks and %s with 1", stats, a, b)
	}
	if got := fmt.Sprint(residents(m, a, 10)); got != "[1 3 5 6]" {
		t.Errorf("%s holds %s, want [1 3 5 6]", a, got)
	}
	if n := m.Match(a, IntHashes([]uint64{1, 2, 3})); n != 1 {
		t.Errorf("%s matches %d blocks of 1 2 3, want 1", a, n)
	}
	cc := []Hash{BytesHash([]byte{0xcc})}
	if m.Match(b, cc) != 1 || m.Match(b, []Hash{BytesHash([]byte{0xaa})}) != 0 || m.Match(a, cc) != 0 {
		t.Errorf("%s should hold cc only, and %s not cc", b, a)
	}
	for _, st := range stats {
		if st.Batches != 3 || st.MissedBatches != 0 {
			t.Errorf("%s: %d batches, %d missed, want 3 and 0", st.Topic, st.Batches, st.MissedBatches)
		}
	}
}

// TestMirrorHandle checks what Handle adds to Apply: a message's missed
// batches are counted on its topic, and a restart empties the topic
// before the message's events apply, since the restarted engine's cache
// started empty. A topic never seen holds nothing.
func TestMirrorHandle(t *testing.T) {
	m, err := NewMirror(10)
	if err != nil {
		t.Fatal(err)
	}
	m.Handle(Message{Topic: "e", Seq: 0, Batch: EventBatch{Events: []Event{stored(nil, 1, 2)}}})
	m.Handle(Message{Topic: "e", Seq: 3, Missed: 2, Batch: EventBatch{Events: []Event{stored(ptr(IntHash(2)), 3)}}})
	checkMirror(t, m)
	if got := fmt.Sprint(residents(m, "e", 10)); got != "[1 2 3]" {
		t.Errorf("before the restart, resident %s, want [1 2 3]", got)
	}
	m.Handle(Message{Topic: "e", Seq: 0, Restart: true, Batch: EventBatch{Events: []Event{stored(nil, 4)}}})
	checkMirror(t, m)
	if got := fmt.Sprint(residents(m, "e", 10)); got != "[4]" {
		t.Errorf("after the restart, resident %s, want [4]", got)
	}
	want := []TopicStats{{Topic: "e", ResidentBlocks: 1, ResidentByMedium: map[string]int{MediumGPU: 1}, Batches: 3, MissedBatches: 2, Restarts: 1}}
	if got := m.Topics(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	if m.Resident("other", IntHash(4)) || m.Match("other", IntHashes([]uint64{4})) != 0 {
		t.Error("a topic never seen holds a block")
	}
}

// refTopic is the reference model of one topic: the leaf-first order with
// pointer blocks and a sentinel list, as container/list would keep it.
type refTopic struct {
	blocks  map[Hash]*refBlock
	leaves  refBlock // sentinel, oldest first
	evicted int64
}

type refBlock struct {
	hash       Hash
	parent     *refBlock
	children   int
	removed    bool
	prev, next *refBlock
}

func newRefTopic() *refTopic {
	r := &refTopic{blocks: make(map[Hash]*refBlock)}
	r.leaves.prev, r.leaves.next = &r.leaves, &r.leaves
	return r
}

func (r *refTopic) pushBack(b *refBlock) {
	b.prev, b.next = r.leaves.prev, &r.leaves
	b.prev.next, r.leaves.prev = b, b
}

func (r *refTopic) pushFront(b *refBlock) {
	b.prev, b.next = &r.leaves, r.leaves.next
	b.next.prev, r.leaves.next = b, b
}

func refUnlink(b *refBlock) { b.prev.next, b.next.prev = b.next, b.prev }

func (r *refTopic) store(h Hash, parent *refBlock) *refBlock {
	if b, ok := r.blocks[h]; ok {
		if b.children == 0 {
			refUnlink(b)
			r.pushBack(b)
		}
		return b
	}
	b := &refBlock{hash: h, parent: parent}
	if parent != nil {
		if parent.children == 0 {
			refUnlink(parent)
		}
		parent.children++
	}
	r.blocks[h] = b
	r.pushBack(b)
	return b
}

func (r *refTopic) remove(b *refBlock) {
	delete(r.blocks, b.hash)
	b.removed = true
	if b.children == 0 {
		refUnlink(b)
	}
	if p := b.parent; p != nil {
		p.children--
		if p.children == 0 && !p.removed {
			r.pushFront(p)
		}
	}
}

// leafHashes returns the hashes of r's leaves, oldest first, as text.
func (r *refTopic) leafHashes() string {
	var out []Hash
	for b := r.leaves.next; b != &r.leaves; b = b.next {
		out = append(out, b.hash)
	}
	return fmt.Sprint(out)
}

// mirrorLeaves returns the hashes of topic's leaves in m, oldest first, as
// text, to compare with refTopic.leafHashes.
func mirrorLeaves(m *Mirror, topic string) string {
	ti := m.topics[topic]
	var out []Hash
	for n := ti.oldest; n != noSlot; n = ti.slab[n].newer {
		out = append(out, ti.key(n).hash)
	}
	return fmt.Sprint(out)
}

func (r *refTopic) apply(capacity int, events []Event) {
	for _, ev := range events {
		switch ev := ev.(type) {
		case *BlockStored:
			var parent *refBlock
			if ev.ParentBlockHash != nil {
				parent = r.blocks[*ev.ParentBlockHash]
			}
			// Room is made before each new block, never by evicting the
			// block the chain hangs from.
			for i, h := range ev.BlockHashes {
				if r.blocks[h] == nil && len(r.blocks) >= capacity {
					if r.leaves.next == parent {
						r.evicted += int64(len(ev.BlockHashes) - i)
						break
					}
					r.remove(r.leaves.next)
					r.evicted++
				}
				parent = r.store(h, parent)
			}
		case *BlockRemoved:
			for _, h := range ev.BlockHashes {
				if b, ok := r.blocks[h]; ok {
					r.remove(b)
				}
			}
		case *AllBlocksCleared:
			clear(r.blocks)
			r.leaves.prev, r.leaves.next = &r.leaves, &r.leaves
		}
	}
}

// TestMirrorAgainstReference applies random batches (stores under resident,
// removed and unknown parents, removals of inner blocks, clears) to a small
// mirror and to the reference model, and compares what each holds, the
// order of its leaves and its evictions after every batch. Odd hashes are
// bytes hashes, so both of a set's indexes are exercised.
func TestMirrorAgainstReference(t *testing.T) {
	const universe, capacity = 64, 24
	hash := func(h uint64) Hash {
		if h%2 == 1 {
			return BytesHash([]byte{byte(h), 0xff})
		}
		return IntHash(h)
	}
	hashes := func(n int, rng *rand.Rand) []Hash {
		hs := make([]Hash, n)
		for i := range hs {
			hs[i] = hash(rng.Uint64N(universe))
		}
		return hs
	}
	rng := rand.New(rand.NewPCG(7, 8))
	m, err := NewMirror(capacity)
	if err != nil {
		t.Fatal(err)
	}
	ref := newRefTopic()
	for step := range 5000 {
		var events []Event
		for range 1 + rng.IntN(3) {
			switch k := rng.IntN(20); {
			case k == 0:
				events = append(events, &AllBlocksCleared{})
			case k < 8:
				events = append(events, &BlockRemoved{BlockHashes: hashes(1+rng.IntN(4), rng)})
			default:
				var parent *Hash
				if rng.IntN(4) > 0 {
					parent = ptr(hash(rng.Uint64N(universe)))
				}
				events = append(events, &BlockStored{BlockHashes: hashes(1+rng.IntN(5), rng), ParentBlockHash: parent, TokenIDs: []int64{}, BlockSize: 16})
			}
		}
		m.Apply("e", &EventBatch{Events: events})
		ref.apply(capacity, events)
		checkMirror(t, m)

		if got, want := mirrorLeaves(m, "e"), ref.leafHashes(); got != want {
			t.Fatalf("step %d: leaves %v, reference %v", step, got, want)
		}
		for h := range uint64(universe) {
			if got, want := m.Resident("e", hash(h)), ref.blocks[hash(h)] != nil; got != want {
				t.Fatalf("step %d: block %d resident %v, reference %v", step, h, got, want)
			}
		}
		if got := m.Topics()[0].EvictedBlocks; got != ref.evicted {
			t.Fatalf("step %d: %d evicted, reference %d", step, got, ref.evicted)
		}
	}
}

// TestMirrorGroups follows a hybrid model's events, worked by hand from
// vLLM's semantics: a block is resident per (group, medium), a removal
// touches only its own group and medium, and an absent group_idx and
// medium are group 0 and the GPU.
func TestMirrorGroups(t *testing.T) {
	m, err := NewMirror(100)
	if err != nil {
		t.Fatal(err)
	}
	full, window := ptr(int64(0)), ptr(int64(1))
	cpu := ptr("CPU")
	in := func(group *int64, medium *string, ev Event) Event {
		switch ev := ev.(type) {
		case *BlockStored:
			ev.GroupIdx, ev.Medium = group, medium
		case *BlockRemoved:
			ev.GroupIdx, ev.Medium = group, medium
		}
		return ev
	}
	m.Apply("e", &EventBatch{Events: []Event{
		stored(nil, 1, 2, 3),                   // group 0 on the GPU, by default
		in(window, nil, stored(nil, 1, 2, 3)),  // the sliding-window group holds them too
		in(window, nil, removed(1)),            // slid out of the window: group 0 still holds 1
		in(full, cpu, stored(nil, 1, 2, 3, 4)), // offloaded copies
		in(nil, cpu, removed(9)),               // not resident there: nothing happens
		in(ptr(int64(0)), nil, removed(2)),     // group 0 frees 2; group 1 still holds it
	}})
	checkMirror(t, m)
	hashes := IntHashes([]uint64{1, 2, 3, 4})
	for _, tc := range []struct {
		name string
		got  int
		want int
	}{
		{"Match, any group on the GPU", m.Match("e", hashes), 3},
		{"MatchGroup 0", m.MatchGroup("e", 0, hashes), 1},
		{"MatchGroup 1", m.MatchGroup("e", 1, hashes), 0},
		{"MatchGroup 7, never seen", m.MatchGroup("e", 7, hashes), 0},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	st := m.Topics()[0]
	if st.ResidentBlocks != 3 || fmt.Sprint(st.ResidentByMedium) != "map[CPU:4 GPU:3]" {
		t.Errorf("resident %d by medium %v, want 3 and map[CPU:4 GPU:3]", st.ResidentBlocks, st.ResidentByMedium)
	}
	m.Apply("e", &EventBatch{Events: []Event{&AllBlocksCleared{}}})
	if st := m.Topics()[0]; st.ResidentBlocks != 0 || len(st.ResidentByMedium) != 0 {
		t.Errorf("after AllBlocksCleared: %+v", st)
	}
	// Pairs past MaxGroups are refused, not kept.
	for g := range int64(MaxGroups + 2) {
		m.Apply("e", &EventBatch{Events: []Event{in(ptr(g), nil, stored(nil, 1))}})
	}
	if st := m.Topics()[0]; st.RefusedEvents != 2 || st.ResidentBlocks != 1 {
		t.Errorf("%d groups stored: refused %d, resident %d; want 2 refused, 1 resident", MaxGroups+2, st.RefusedEvents, st.ResidentBlocks)
	}
}

// TestMirrorCapacityWithinAnEvent stores, into a mirror of 1,000 blocks,
// one event of a million blocks: the mirror never holds more than its
// capacity, even while the event applies, and keeps the chain's head.
func TestMirrorCapacityWithinAnEvent(t *testing.T) {
	const capacity, n = 1000, 1 << 20
	m, err := NewMirror(capacity)
	if err != nil {
		t.Fatal(err)
	}
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = uint64(i) + 1
	}
	m.Apply("e", &EventBatch{Events: []Event{stored(nil, n+1), stored(nil, hashes...)}})
	checkMirror(t, m)
	st := m.Topics()[0]
	if st.ResidentBlocks != capacity || st.EvictedBlocks != n+1-capacity {
		t.Errorf("resident %d, evicted %d; want %d and %d", st.ResidentBlocks, st.EvictedBlocks, capacity, n+1-capacity)
	}
	if got := m.Match("e", IntHashes(hashes)); got != capacity {
		t.Errorf("the chain's head: %d blocks match, want %d", got, capacity)
	}
	if len(m.topics["e"].slab) > capacity {
		t.Errorf("%d slots for a capacity of %d", len(m.topics["e"].slab), capacity)
	}
}

// TestMirrorLarge holds more blocks than fit a core's cache, where the
// mirror loads a batch's buckets ahead of probing them (prefetch): the
// same blocks must be resident, found and evicted as at any size. Chains
// of 16 blocks, each its own root: 3,000 stored into a mirror of 40,000
// blocks evict the oldest 8,000 blocks (500 chains, deepest first), then
// removing every other of the chains held leaves half of the 40,000.
func TestMirrorLarge(t *testing.T) {
	const capacity, chains, length = 40_000, 3_000, 16
	m, err := NewMirror(capacity)
	if err != nil {
		t.Fatal(err)
	}
	chain := func(c int) []Hash { return intChain(c, length) }
	for c := range chains {
		m.Apply("e", &EventBatch{Events: []Event{&BlockStored{BlockHashes: chain(c)}}})
	}
	st := m.Topics()[0]
	if st.ResidentBlocks != capacity || st.EvictedBlocks != chains*length-capacity {
		t.Fatalf("after storing: %d resident, %d evicted; want %d and %d",
			st.ResidentBlocks, st.EvictedBlocks, capacity, chains*length-capacity)
	}
	evictedChains := (chains*length - capacity) / length
	if got := m.Match("e", chain(evictedChains-1)); got != 0 {
		t.Fatalf("the last evicted chain matches %d blocks", got)
	}
	for c := evictedChains; c < chains; c += 2 {
		m.Apply("e", &EventBatch{Events: []Event{&BlockRemoved{BlockHashes: chain(c)}}})
	}
	checkMirror(t, m)
	if got := m.Topics()[0].ResidentBlocks; got != capacity/2 {
		t.Fatalf("after removing every other chain: %d resident, want %d", got, capacity/2)
	}
	for c := evictedChains; c < chains; c++ {
		want := length * ((c - evictedChains) % 2)
		if got := m.Match("e", chain(c)); got != want {
			t.Fatalf("chain %d matches %d blocks, want %d", c, got, want)
		}
	}
}

// TestMirrorConcurrentQueries scores requests from several goroutines
// while batches apply, as a router does: a chain stored before the
// queries start and never touched again matches whole every time, one
// stored and removed meanwhile matches a leading part of itself, and the
// race detector sees the queries share the mirror with the events. Each
// batch applies whole: a chain whose back half goes in one batch and its
// front half in the next matches 16, 8 or 0 blocks, never another count.
func TestMirrorConcurrentQueries(t *testing.T) {
	m, err := NewMirror(10_000)
	if err != nil {
		t.Fatal(err)
	}
	const length = 16
	chain := func(c int) []Hash { return intChain(c, length) }
	fixed := chain(0)
	m.Apply("e", &EventBatch{Events: []Event{&BlockStored{BlockHashes: fixed}}})
	done := make(chan struct{})
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := 1; ; c = c%50 + 1 {
				select {
				case <-done:
					return
				default:
				}
				if got := m.Match("e", fixed); got != length {
					errs <- fmt.Errorf("the fixed chain matches %d blocks, want %d", got, length)
					return
				}
				if got := m.Match("e", chain(c)); got != 0 && got != length/2 && got != length {
					errs <- fmt.Errorf("chain %d matches %d blocks", c, got)
					return
				}
				_ = m.Topics()
				_ = m.ResidentOn("e", MediumGPU, fixed[0])
			}
		}()
	}
	for step := range 2000 {
		c := step%50 + 1
		m.Apply("e", &EventBatch{Events: []Event{&BlockStored{BlockHashes: chain(c)}}})
		m.Apply("e", &EventBatch{Events: []Event{&BlockRemoved{BlockHashes: chain(c)[length/2:]}}})
		m.Apply("e", &EventBatch{Events: []Event{&BlockRemoved{BlockHashes: chain(c)[:length/2]}}})
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// intChain returns the integer hashes of chain c of length blocks: blocks
// c x length + 1 on, so that no two chains share one (and none is 0).
func intChain(c, length int) []Hash {
	hs := make([]Hash, length)
	for i := range hs {
		hs[i] = IntHash(uint64(c*length + i + 1))
	}
	return hs
}

// TestMirrorLongBytesHash: a chain stored up to a bytes hash longer than
// MaxHashBytes stops there, counted as refused; a digest of vLLM's length
// is stored as any other hash.
func TestMirrorLongBytesHash(t *testing.T) {
	m, err := NewMirror(100)
	if err != nil {
		t.Fatal(err)
	}
	digest, long := BytesHash(bytes.Repeat([]byte{1}, 32)), BytesHash(bytes.Repeat([]byte{2}, MaxHashBytes+1))
	after := BytesHash([]byte{3})
	m.Apply("kv", &EventBatch{Events: []Event{&BlockStored{BlockHashes: []Hash{digest, long, after}}}})
	checkMirror(t, m)
	if m.Match("kv", []Hash{digest, long, after}) != 1 || m.Resident("kv", long) || m.Resident("kv", after) {
		t.Errorf("matched %d of the chain; want the digest alone", m.Match("kv", []Hash{digest, long, after}))
	}
	if st := m.Topics()[0]; st.RefusedEvents != 1 || st.ResidentBlocks != 1 {
		t.Errorf("stats %+v, want one refusal and one block", st)
	}
}
