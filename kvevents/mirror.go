package kvevents

import (
	"fmt"
	"slices"
	"strings"
	"sync"
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

// topicIndex is one engine's resident blocks.
type topicIndex struct {
	blocks map[Hash]*block
	leaves block // sentinel of the list of leaves, oldest first
	stats  TopicStats
}

// block is one resident block. A block whose parent was removed keeps a
// pointer to it (marked removed) rather than being found and re-linked.
type block struct {
	hash       Hash
	parent     *block
	children   int
	removed    bool
	prev, next *block // in the leaf list while children == 0
}

// TopicStats describes one topic of a [Mirror].
type TopicStats struct {
	Topic          string
	ResidentBlocks int   // blocks the topic holds now
	Batches        int64 // batches applied
	MissedBatches  int64 // batches the subscriber reported lost (Message.Missed)
	EvictedBlocks  int64 // blocks the mirror evicted to stay within capacity
}

// NewMirror returns an empty mirror holding at most capacity blocks per
// topic (capacity >= 1).
func NewMirror(capacity int) (*Mirror, error) {
	if capacity < 1 {
		return nil, fmt.Errorf("kvevents: mirror capacity %d, want at least 1", capacity)
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
		t = &topicIndex{blocks: make(map[Hash]*block), stats: TopicStats{Topic: name}}
		t.leaves.prev, t.leaves.next = &t.leaves, &t.leaves
		m.topics[name] = t
	}
	return t
}

func (m *Mirror) apply(t *topicIndex, b *EventBatch) {
	t.stats.Batches++
	for _, ev := range b.Events {
		switch ev := ev.(type) {
		case *BlockStored:
			var parent *block
			if ev.ParentBlockHash != nil {
				parent = t.blocks[*ev.ParentBlockHash]
			}
			for _, h := range ev.BlockHashes {
				parent = t.store(h, parent)
			}
			for len(t.blocks) > m.capacity {
				t.remove(t.leaves.next)
				t.stats.EvictedBlocks++
			}
		case *BlockRemoved:
			for _, h := range ev.BlockHashes {
				if bl, ok := t.blocks[h]; ok {
					t.remove(bl)
				}
			}
		case *AllBlocksCleared:
			t.clear()
		}
	}
}

// store makes h resident under parent (nil: a root, or a parent that is
// not resident) and returns its block. A block already resident moves to
// the newest end of the leaves if it is one.
func (t *topicIndex) store(h Hash, parent *block) *block {
	if bl, ok := t.blocks[h]; ok {
		if bl.children == 0 {
			unlink(bl)
			t.pushBack(bl)
		}
		return bl
	}
	bl := &block{hash: h, parent: parent}
	if parent != nil {
		if parent.children == 0 {
			unlink(parent)
		}
		parent.children++
	}
	t.blocks[h] = bl
	t.pushBack(bl)
	return bl
}

// remove drops bl. Its children, if any, stay resident; its parent, if it
// becomes a leaf, goes to the oldest end of the leaves.
func (t *topicIndex) remove(bl *block) {
	delete(t.blocks, bl.hash)
	bl.removed = true
	if bl.children == 0 {
		unlink(bl)
	}
	if p := bl.parent; p != nil {
		p.children--
		if p.children == 0 && !p.removed {
			p.prev, p.next = &t.leaves, t.leaves.next
			p.next.prev, t.leaves.next = p, p
		}
	}
}

func (t *topicIndex) pushBack(bl *block) {
	bl.prev, bl.next = t.leaves.prev, &t.leaves
	bl.prev.next, t.leaves.prev = bl, bl
}

func unlink(bl *block) {
	bl.prev.next, bl.next.prev = bl.next, bl.prev
	bl.prev, bl.next = nil, nil
}

func (t *topicIndex) clear() {
	clear(t.blocks)
	t.leaves.prev, t.leaves.next = &t.leaves, &t.leaves
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
