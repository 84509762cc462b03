package prefix

import "github.com/sagellm/kvevict/internal/dlist"

// memory remembers the request counts of evicted blocks by hash, for a
// tree ranked by a history ([kvevict.Auto]): a block whose hash is
// inserted again takes back the requests it had. It holds at most cap
// hashes and forgets the least recently evicted first, so its memory is
// bounded whatever passes through the tree. Every operation is O(1).
type memory struct {
	cap     int
	index   map[uint64]int32 // hash -> slot in entries and slots
	entries []memoryEntry
	slots   dlist.Slots
	order   dlist.List // remembered hashes, most recently evicted at the front
}

// memoryEntry is one remembered hash.
type memoryEntry struct {
	hash     uint64
	requests uint32
}

func newMemory(capacity int) memory {
	return memory{cap: capacity, index: make(map[uint64]int32), order: dlist.Empty()}
}

// len returns the number of hashes remembered.
func (m *memory) len() int { return len(m.index) }

// put remembers that a block of hash was evicted after requests requests.
// A hash already remembered (the same block on another path) keeps the
// larger count and becomes the newest. Beyond cap the oldest is forgotten.
func (m *memory) put(hash uint64, requests uint32) {
	if i, ok := m.index[hash]; ok {
		m.entries[i].requests = max(m.entries[i].requests, requests)
		m.slots.Remove(&m.order, i)
		m.slots.PushFront(&m.order, i)
		return
	}
	if len(m.index) >= m.cap {
		m.forget(m.order.Back)
	}
	i, grown := m.slots.Alloc()
	if grown {
		m.entries = append(m.entries, memoryEntry{})
	}
	m.entries[i] = memoryEntry{hash: hash, requests: requests}
	m.index[hash] = i
	m.slots.PushFront(&m.order, i)
}

// take returns and forgets the requests remembered for hash, if any.
func (m *memory) take(hash uint64) (requests uint32, ok bool) {
	i, ok := m.index[hash]
	if !ok {
		return 0, false
	}
	requests = m.entries[i].requests
	m.forget(i)
	return requests, true
}

// forget drops the remembered hash in slot i.
func (m *memory) forget(i int32) {
	m.slots.Remove(&m.order, i)
	delete(m.index, m.entries[i].hash)
	m.slots.Free(i)
}
