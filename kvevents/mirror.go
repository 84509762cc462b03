package kvevents

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/sagellm/kvevict/internal/dlist"
)

// Mirror keeps, per topic (one engine each), the blocks that engine holds,
// as its events report them, so that a router can score each engine by the
// longest resident prefix of a request ([Mirror.Match]).
//
// It follows vLLM's semantics: BlockStored makes its blocks resident,
// BlockRemoved makes them not, AllBlocksCleared (or a publisher restart)
// empties the topic. A block stays resident when its parent is removed, as
// in vLLM's block pool, though no prefix match can reach it then. Blocks
// are named by their hashes, which cover their prefix, so a request's
// resident prefix is its leading run of resident hashes.
//
// Each topic is bounded by the capacity given to [NewMirror]: past it the
// mirror evicts leaves first, oldest stored first; a parent that becomes a
// leaf is next, so a path is shed from its deepest block up. A mirror sized
// at or above the engine's capacity never evicts.
//
// A Mirror is safe for concurrent use. Its memory is O(capacity) per topic.
type Mirror struct {
	capacity int

	mu     sync.Mutex
	topics map[string]*topicIndex
}

// topicIndex is one engine's resident blocks, each in a slot of slab.
type topicIndex struct {
	blocks map[Hash]int32 // resident blocks' slots
	slab   []block
	links  dlist.Slots // the leaf list's links, indexed like slab, and the free slots
	leaves dlist.List  // resident blocks without resident children, oldest first
	stats  TopicStats
}

// block is the block in one slot. A removed block that still has resident
// children keeps its slot (marked removed) until the last of them goes, so
// that their parent slot stays its own rather than being found and
// re-linked.
type block struct {
	hash     Hash
	parent   int32 // the parent's slot; dlist.None for a root or a parent that was not resident
	children int   // resident blocks naming this one as parent
	removed  bool
}

// TopicStats describes one topic of a [Mirror].
type TopicStats struct {
	Topic          string
	ResidentBlocks int   // blocks the topic holds now
	Batches        int64 // batches applied
	MissedBatches  int64 // batches the subscriber reported lost (Message.Missed)
	EvictedBlocks  int64 // blocks the mirror evicted to stay within capacity
}

// maxMirrorCapacity bounds a mirror's capacity so that the slots of a
// topic's blocks, resident and removed parents kept for their children (no
// more than the resident ones), fit an int32.
const maxMirrorCapacity = 1 << 29

// NewMirror returns an empty mirror holding at most capacity blocks per
// topic (1 <= capacity <= 2^29).
func NewMirror(capacity int) (*Mirror, error) {
	if capacity < 1 || capacity > maxMirrorCapacity {
		return nil, fmt.Errorf("kvevents: mirror capacity %d, want 1 to %d", capacity, maxMirrorCapacity)
	}
	return &Mirror{capacity: capacity, topics: make(map[string]*topicIndex)}, nil
}

// Handle applies a [Subscriber]'s message: pass it as Run's handler.
func (m *Mirror) Handle(msg Message) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.topic(msg.Topic)
	if msg.Restart {
		t.clear()
	}
	t.stats.MissedBatches += msg.Missed
	m.apply(t, &msg.Batch)
}

// Apply applies the events of b to topic. O(blocks in b), plus O(1) per
// block evicted.
func (m *Mirror) Apply(topic string, b *EventBatch) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.apply(m.topic(topic), b)
}

func (m *Mirror) topic(name string) *topicIndex {
	t, ok := m.topics[name]
	if !ok {
		t = &topicIndex{blocks: make(map[Hash]int32), leaves: dlist.Empty(), stats: TopicStats{Topic: name}}
		m.topics[name] = t
	}
	return t
}

func (m *Mirror) apply(t *topicIndex, b *EventBatch) {
	t.stats.Batches++
	for _, ev := range b.Events {
		switch ev := ev.(type) {
		case *BlockStored:
			parent := dlist.None
			if ev.ParentBlockHash != nil {
				if p, ok := t.blocks[*ev.ParentBlockHash]; ok {
					parent = p
				}
			}
			for _, h := range ev.BlockHashes {
				parent = t.store(h, parent)
			}
			for len(t.blocks) > m.capacity {
				t.remove(t.leaves.Front)
				t.stats.EvictedBlocks++
			}
		case *BlockRemoved:
			for _, h := range ev.BlockHashes {
				if n, ok := t.blocks[h]; ok {
					t.remove(n)
				}
			}
		case *AllBlocksCleared:
			t.clear()
		}
	}
}

// store makes h resident under the block in slot parent (dlist.None: a
// root, or a parent that is not resident) and returns its slot. A block
// already resident moves to the newest end of the leaves if it is one.
func (t *topicIndex) store(h Hash, parent int32) int32 {
	if n, ok := t.blocks[h]; ok {
		if t.slab[n].children == 0 {
			t.links.Remove(&t.leaves, n)
			t.links.PushBack(&t.leaves, n)
		}
		return n
	}
	if parent != dlist.None {
		p := &t.slab[parent]
		if p.children == 0 {
			t.links.Remove(&t.leaves, parent)
		}
		p.children++
	}
	n := t.alloc()
	t.slab[n] = block{hash: h, parent: parent}
	t.blocks[h] = n
	t.links.PushBack(&t.leaves, n)
	return n
}

// remove drops the resident block in slot n. Its children, if any, stay
// resident; its parent, if it becomes a leaf, goes to the oldest end of the
// leaves.
func (t *topicIndex) remove(n int32) {
	bl := &t.slab[n]
	delete(t.blocks, bl.hash)
	parent := bl.parent
	if bl.children == 0 {
		t.links.Remove(&t.leaves, n)
		t.release(n)
	} else {
		bl.removed, bl.parent = true, dlist.None // its parent counts it no more
	}
	if parent == dlist.None {
		return
	}
	p := &t.slab[parent]
	p.children--
	switch {
	case p.children > 0:
	case p.removed:
		t.release(parent)
	default:
		t.links.PushFront(&t.leaves, parent)
	}
}

// alloc returns a slot for a new block, reusing a released one.
func (t *topicIndex) alloc() int32 {
	n, grown := t.links.Alloc()
	if grown {
		t.slab = append(t.slab, block{})
	}
	return n
}

// release frees slot n, whose block is in no list and is no resident
// block's parent.
func (t *topicIndex) release(n int32) {
	t.slab[n] = block{} // drop the hash's bytes
	t.links.Free(n)
}

func (t *topicIndex) clear() {
	clear(t.blocks)
	clear(t.slab)
	t.slab = t.slab[:0]
	t.links.Reset()
	t.leaves = dlist.Empty()
}

// Match returns how many leading blocks of hashes topic holds: the prefix
// a request would reuse on that engine. O(matched).
func (m *Mirror) Match(topic string, hashes []Hash) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.topics[topic]
	if !ok {
		return 0
	}
	for i, h := range hashes {
		if _, ok := t.blocks[h]; !ok {
			return i
		}
	}
	return len(hashes)
}

// Resident reports whether topic holds the block h. O(1).
func (m *Mirror) Resident(topic string, h Hash) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.topics[topic]
	if !ok {
		return false
	}
	_, ok = t.blocks[h]
	return ok
}

// Topics returns the stats of every topic seen, by topic name. O(topics).
func (m *Mirror) Topics() []TopicStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]TopicStats, 0, len(m.topics))
	for _, t := range m.topics {
		s := t.stats
		s.ResidentBlocks = len(t.blocks)
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b TopicStats) int { return strings.Compare(a.Topic, b.Topic) })
	return out
}
