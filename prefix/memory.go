package prefix

// memory remembers the request counts of evicted blocks by hash, for a
// tree ranked by a history ([kvevict.Auto]): a block whose hash is
// inserted again takes back the requests it had. It holds at most cap
// hashes and forgets the least recently evicted first, so its memory is
// bounded whatever passes through the tree. Every operation is O(1).
type memory struct {
	cap   int
	index map[uint64]int32 // hash -> slot in entries
	slots []memoryEntry
	free  []int32
	// newest and oldest are the ends of the list of remembered hashes,
	// most recently evicted first; -1 when it is empty.
	newest, oldest int32
}

// memoryEntry is one remembered hash, linked in eviction order.
type memoryEntry struct {
	hash         uint64
	requests     uint32
	newer, older int32 // -1 at the ends
}

func newMemory(capacity int) memory {
	return memory{cap: capacity, index: make(map[uint64]int32), newest: -1, oldest: -1}
}

// len returns the number of hashes remembered.
func (m *memory) len() int { return len(m.index) }

// put remembers that a block of hash was evicted after requests requests.
// A hash already remembered (the same block on another path) keeps the
// larger count and becomes the newest. Beyond cap the oldest is forgotten.
func (m *memory) put(hash uint64, requests uint32) {
	if i, ok := m.index[hash]; ok {
		m.slots[i].requests = max(m.slots[i].requests, requests)
		m.unlink(i)
		m.linkNewest(i)
		return
	}
	if len(m.index) >= m.cap {
		i := m.oldest
		m.unlink(i)
		delete(m.index, m.slots[i].hash)
		m.free = append(m.free, i)
	}
	var i int32
	if k := len(m.free); k > 0 {
		i = m.free[k-1]
		m.free = m.free[:k-1]
	} else {
		i = int32(len(m.slots))
		m.slots = append(m.slots, memoryEntry{})
	}
	m.slots[i] = memoryEntry{hash: hash, requests: requests}
	m.index[hash] = i
	m.linkNewest(i)
}

// take returns and forgets the requests remembered for hash, if any.
func (m *memory) take(hash uint64) (requests uint32, ok bool) {
	i, ok := m.index[hash]
	if !ok {
		return 0, false
	}
	requests = m.slots[i].requests
	m.unlink(i)
	delete(m.index, hash)
	m.free = append(m.free, i)
	return requests, true
}

func (m *memory) linkNewest(i int32) {
	e := &m.slots[i]
	e.newer, e.older = -1, m.newest
	if m.newest >= 0 {
		m.slots[m.newest].newer = i
	} else {
		m.oldest = i
	}
	m.newest = i
}

func (m *memory) unlink(i int32) {
	e := &m.slots[i]
	if e.newer >= 0 {
		m.slots[e.newer].older = e.older
	} else {
		m.newest = e.older
	}
	if e.older >= 0 {
		m.slots[e.older].newer = e.newer
	} else {
		m.oldest = e.newer
	}
	e.newer, e.older = -1, -1
}
