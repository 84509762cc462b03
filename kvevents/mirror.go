package kvevents

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unsafe"
)

// Mirror keeps, per topic (one engine each), the blocks that engine holds,
// as its events report them, so that a router can score each engine by the
// longest resident prefix of a request ([Mirror.Match]).
//
// It follows vLLM's semantics. A block is resident per KV cache group and
// medium: BlockStored makes its blocks resident in its group_idx on its
// medium, BlockRemoved makes them not in that group on that medium only,
// and AllBlocksCleared (or a publisher restart) empties the topic. An
// absent group_idx is group 0, as a model with one group has; an absent
// medium is [MediumGPU], vLLM's default. A block stays resident when its
// parent is removed, as in vLLM's block pool, though no prefix match can
// reach it then. Blocks are named by their hashes, which cover their
// prefix, so a request's resident prefix is its leading run of resident
// hashes.
//
// Each topic holds at most the capacity given to [NewMirror], counting a
// block once per group and medium that holds it, and enforced while an
// event is applied: past it the mirror evicts leaves first, oldest stored
// first; a parent that becomes a leaf is next, so a path is shed from its
// deepest block up. A mirror sized at or above the engine's capacity never
// evicts. This is not [prefix.Tree]'s leaf-first order, and cannot be: the
// mirror holds what vLLM reports, where a block outlives its removed parent
// and one hash lives in several groups and media, which a tree of locked
// paths does not represent; its bound only keeps a misbehaving engine from
// growing it, oldest first, and ranks nothing. A topic keeps at most [MaxGroups] (group, medium) pairs; events
// of another are refused and counted. A bytes hash longer than
// [MaxHashBytes] is not stored: the event stops there, counted as refused.
//
// A Mirror is safe for concurrent use: its queries (Match, MatchGroup,
// Resident, ResidentOn, Topics) run in parallel with one another, as a
// router's requests score engines, and each batch of events applies alone,
// between them.
//
// Its memory is bounded in bytes too, over all its topics
// ([WithMirrorMemory]): each topic counts what it has allocated, its
// slots, tables and hashes, and a topic may always fill the room it has
// allocated. A block that needs more room than the budget has left is
// stored, if its topic holds its share of the budget (the budget over the
// topics) or more, in place of its topic's oldest leaf, as past the
// capacity; otherwise the topic that holds the most gives up its oldest
// leaves and the room they held, and an empty one goes (counted in
// [MirrorStats]). So a topic that grows takes room from the largest, and
// one at its share evicts its own.
type Mirror struct {
	capacity int
	budget   int64 // bytes over every topic

	mu       sync.RWMutex // readers (Match and the other queries) share it; events hold it alone
	topics   map[string]*topicIndex
	used     int64 // bytes every topic holds, as topicIndex.mem counts them
	released int64 // topics let go to make room
}

// MirrorStats describe a [Mirror]'s memory.
type MirrorStats struct {
	Bytes  int64 // what its topics hold, as its budget counts it
	Budget int64 // [WithMirrorMemory]'s
	// Released counts the topics let go, empty of blocks, to make room
	// for another's: their counts went with them.
	Released int64
}

// MirrorOption configures a [Mirror] made by [NewMirror].
type MirrorOption func(*mirrorConfig)

type mirrorConfig struct {
	budget int64
	errs   []error
}

// WithMirrorMemory bounds the bytes a mirror's topics hold, all together
// (n >= [MinMemory]); see [Mirror]. The default is [DefaultMirrorMemory].
func WithMirrorMemory(n int64) MirrorOption {
	return func(c *mirrorConfig) {
		c.budget, c.errs = memory("mirror", n, c.errs)
	}
}

// MaxGroups is how many (group, medium) pairs a [Mirror] keeps per topic:
// vLLM's hybrid models have a few KV cache groups, and blocks live on the
// GPU or in one or two offload tiers.
const MaxGroups = 16

// MaxHashBytes is the longest bytes hash a [Mirror] stores: vLLM's are
// 32-byte digests, and a block's share of the mirror's memory stays
// bounded in bytes, not in blocks alone.
const MaxHashBytes = 256

// set is one (group, medium) pair of a topic: the blocks of one KV cache
// group on one medium.
type set struct {
	group  int64
	medium string
}

// blockKey names a resident block: its hash within one set, by the set's
// index in topicIndex.sets.
type blockKey struct {
	hash Hash
	set  uint8
}

// setIndex finds the resident blocks of one set by hash. Integer hashes,
// which vLLM sends, have a table of their own: a uint64 key mixes and
// compares in a few instructions, where a Hash, with its string, takes a
// generic hash of every field.
type setIndex struct {
	ints  intTable         // integer hashes' slots
	bytes map[string]int32 // bytes hashes' slots, by their marked bytes (Hash.b)
	count int              // resident blocks: the entries of both
}

// topicIndex is one engine's resident blocks, each in a slot of slab.
//
// The leaves, resident blocks without resident children, are a list
// threaded through the slab by the blocks' older and newer slots, oldest
// first: the eviction order, with the O(1) removal from anywhere that a
// BlockRemoved or a new child needs. Links that are slots rather than
// pointers (as container/list's are) cost a block no allocation of its own.
type topicIndex struct {
	index     [MaxGroups]setIndex // resident blocks' slots, indexed like sets; maps kept across clear
	residents int                 // resident blocks in all sets
	slab      []block
	bytesKeys map[int32]string // the marked bytes (Hash.b) of the bytes hashes, by slot
	free      []int32          // released slots, reused before the slab grows
	oldest    int32            // the first leaf to evict; noSlot when there is none
	newest    int32            // the leaf stored last; noSlot when there is none
	sets      []set            // the pairs seen, at most MaxGroups
	stats     TopicStats
	loaded    int32 // the sum of what the prefetches loaded, kept so that the compiler keeps their loads

	// mem is what the topic holds, as the mirror's budget counts it (see
	// measure); used is the mirror's count of every topic's, which mem's
	// changes go to. bytesLive counts the bytes hashes in the slots,
	// bytesPeak the most there were at once (their maps do not shrink),
	// and hashBytes their bytes.
	mem, bytesLive, bytesPeak, hashBytes int64
	used                                 *int64
}

// What the mirror's budget counts: a slot (a block and its place in the
// free list), a bucket of an integer table, an entry of the two maps of a
// bytes hash, and a topic's own structures beside its name.
const (
	slotBytes       = int64(unsafe.Sizeof(block{})) + 8
	bucketBytes     = int64(unsafe.Sizeof(intEntry{}))
	bytesEntryBytes = 128
	topicBytes      = int64(unsafe.Sizeof(topicIndex{})) + 512
)

// hashCost is what a bytes hash of n bytes takes: its string, rounded up
// as the allocator's size classes do.
func hashCost(n int) int64 { return int64(n + n/8 + 16) }

// measure returns what t holds: its slab, free list and tables as
// allocated, and its bytes hashes. O(MaxGroups).
func (t *topicIndex) measure() int64 {
	n := topicBytes + int64(len(t.stats.Topic)) + int64(cap(t.slab))*slotBytes + t.bytesPeak*bytesEntryBytes + t.hashBytes
	for s := range t.index { // a clear keeps the tables of the sets it forgets
		n += int64(len(t.index[s].ints.entries)) * bucketBytes
	}
	return n
}

// freeable returns about what compact would give back: the slots and
// bytes hashes' entries not in use. O(1).
func (t *topicIndex) freeable() int64 {
	return int64(cap(t.slab)-len(t.slab)+len(t.free))*slotBytes + (t.bytesPeak-t.bytesLive)*bytesEntryBytes
}

// compact moves t's blocks into a slab just large enough, and its tables
// and maps into ones sized for their entries, so that the memory of the
// blocks it let go goes back. The caller accounts for it. O(slots).
func (t *topicIndex) compact() {
	const gone = -2
	to := make([]int32, len(t.slab))
	for _, n := range t.free {
		to[n] = gone
	}
	slab := make([]block, 0, len(t.slab)-len(t.free))
	for n := range t.slab {
		if to[n] != gone {
			to[n] = int32(len(slab))
			slab = append(slab, t.slab[n])
		}
	}
	re := func(n int32) int32 {
		if n == noSlot {
			return noSlot
		}
		return to[n]
	}
	for i := range slab {
		b := &slab[i]
		b.parent, b.older, b.newer = re(b.parent), re(b.older), re(b.newer)
	}
	t.slab, t.free = slab, nil
	t.oldest, t.newest = re(t.oldest), re(t.newest)
	if t.bytesKeys != nil {
		keys := make(map[int32]string, len(t.bytesKeys))
		for n, h := range t.bytesKeys {
			keys[to[n]] = h
		}
		t.bytesKeys = keys
	}
	for s := range t.index {
		x := &t.index[s]
		x.ints.refile(to)
		if x.bytes != nil {
			bytes := make(map[string]int32, len(x.bytes))
			for h, n := range x.bytes {
				bytes[h] = to[n]
			}
			x.bytes = bytes
		}
	}
	t.bytesPeak = t.bytesLive
}

// account brings t.mem, and the mirror's count, up to date.
func (t *topicIndex) account() {
	m := t.measure()
	*t.used += m - t.mem
	t.mem = m
}

// growth returns the bytes storing k, not resident, adds to t.
func (t *topicIndex) growth(k blockKey) int64 {
	var g int64
	if len(t.free) == 0 && len(t.slab) == cap(t.slab) {
		g += int64(slabGrowth(cap(t.slab))-cap(t.slab)) * slotBytes
	}
	if !k.hash.isBytes() {
		if x := &t.index[k.set].ints; x.full() {
			g += int64(x.grown()-len(x.entries)) * bucketBytes
		}
	} else {
		g += hashCost(len(k.hash.b))
		if t.bytesLive == t.bytesPeak {
			g += bytesEntryBytes
		}
	}
	return g
}

// slabGrowth returns the slots a full slab of n grows to: by half, so
// that a large topic's next step is a fraction of the budget.
func slabGrowth(n int) int { return n + n/2 + 64 }

// lookup returns the slot of the resident block k, and a probe that
// stores k after a miss. O(1).
func (t *topicIndex) lookup(k blockKey) (n int32, probe uint32, ok bool) {
	x := &t.index[k.set]
	if !k.hash.isBytes() {
		return x.ints.find(k.hash.n, t.slab)
	}
	n, ok = x.bytes[k.hash.b]
	return n, 0, ok
}

// insert files the block k, not resident, under slot n; probe is
// lookup's. O(1) amortized.
func (t *topicIndex) insert(k blockKey, probe uint32, n int32) {
	x := &t.index[k.set]
	if !k.hash.isBytes() {
		x.ints.put(probe, n)
	} else {
		if x.bytes == nil {
			x.bytes = make(map[string]int32)
		}
		x.bytes[k.hash.b] = n
	}
	x.count++
	t.residents++
}

// drop unfiles the resident block in slot n. O(1).
func (t *topicIndex) drop(n int32) {
	b := &t.slab[n]
	x := &t.index[b.set]
	if !b.isBytes {
		x.ints.delete(b.mix, n)
	} else {
		delete(x.bytes, t.bytesKeys[n])
	}
	t.unfiled(x)
}

// unfiled counts out a block that x no longer files.
func (t *topicIndex) unfiled(x *setIndex) {
	x.count--
	t.residents--
}

// each calls fn with every resident block and its slot.
func (t *topicIndex) each(fn func(k blockKey, n int32)) {
	for s := range t.sets {
		x := &t.index[s]
		x.ints.all(func(n int32) { fn(t.key(n), n) })
		for b, n := range x.bytes {
			fn(blockKey{Hash{b: b}, uint8(s)}, n)
		}
	}
}

// noSlot is the parent slot of a block without a resident parent, and the
// neighbour past either end of the leaves.
const noSlot int32 = -1

// block is the block in one slot. A removed block that still has resident
// children keeps its slot (marked removed) until the last of them goes, so
// that their parent slot stays its own rather than being found and
// re-linked. It holds no pointer, so the collector never scans a slab.
type block struct {
	hash     uint64 // the integer hash; a bytes hash's bytes are in topicIndex.bytesKeys
	mix      uint32 // an integer hash's mix in its set's intTable, which finds its bucket
	parent   int32  // the parent's slot; noSlot for a root or a parent that was not resident
	children int32  // resident blocks naming this one as parent, at most the capacity
	// older and newer are a leaf's neighbours in the leaves, noSlot past
	// the ends; both are noSlot while a resident or kept block is not a
	// leaf.
	older, newer int32
	set          uint8 // the index of its set in topicIndex.sets
	isBytes      bool
	removed      bool
}

// TopicStats describes one topic of a [Mirror].
type TopicStats struct {
	Topic string
	// ResidentBlocks counts the hashes resident on the GPU in any group:
	// the blocks a request can reuse on that engine without a transfer.
	ResidentBlocks int
	// ResidentByMedium counts, per medium, the hashes resident there in
	// any group.
	ResidentByMedium map[string]int
	Batches          int64 // batches applied
	MissedBatches    int64 // batches the subscriber reported lost (Message.Missed)
	Restarts         int64 // times the publisher started over (Message.Restart), emptying the topic
	EvictedBlocks    int64 // blocks the mirror evicted (or did not store) to stay within capacity
	RefusedEvents    int64 // events of a (group, medium) pair past MaxGroups, not applied, and stores cut at a bytes hash longer than MaxHashBytes
}

// MaxMirrorCapacity bounds a mirror's capacity so that the slots of a
// topic's blocks, resident and removed parents kept for their children (no
// more than the resident ones), fit an int32.
const MaxMirrorCapacity = 1 << 29

// NewMirror returns an empty mirror holding at most capacity blocks per
// topic (1 <= capacity <= [MaxMirrorCapacity]), and at most its memory
// budget ([WithMirrorMemory]) over all topics.
func NewMirror(capacity int, opts ...MirrorOption) (*Mirror, error) {
	c := mirrorConfig{budget: DefaultMirrorMemory}
	for _, o := range opts {
		o(&c)
	}
	if capacity < 1 || capacity > MaxMirrorCapacity {
		c.errs = append(c.errs, fmt.Errorf("kvevents: mirror capacity %d, want 1 to %d", capacity, MaxMirrorCapacity))
	}
	if err := errors.Join(c.errs...); err != nil {
		return nil, err
	}
	return &Mirror{capacity: capacity, budget: c.budget, topics: make(map[string]*topicIndex)}, nil
}

// Stats returns the mirror's memory and what its budget cost. O(1).
func (m *Mirror) Stats() MirrorStats {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return MirrorStats{Bytes: m.used, Budget: m.budget, Released: m.released}
}

// Handle applies a [Subscriber]'s message: pass it as Run's handler. A
// message marked Restart empties the topic before its events apply; one
// marked Released lets the topic go, so that the mirror holds the topics
// the subscriber follows and no more. Handle keeps nothing of the
// message, so the subscriber may reuse its memory ([WithBatchReuse]).
func (m *Mirror) Handle(msg Message) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if msg.Released {
		if t, ok := m.topics[msg.Topic]; ok {
			m.drop(t)
		}
		return
	}
	t := m.topic(msg.Topic)
	if msg.Restart {
		t.clear()
		t.stats.Restarts++
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
		// A topic's own structures first make room, from the others;
		// MinMemory holds one alone.
		for need := topicBytes + int64(len(name)); m.used+need > m.budget && m.makeRoom(nil, noSlot, need); {
		}
		t = &topicIndex{oldest: noSlot, newest: noSlot, stats: TopicStats{Topic: name}, used: &m.used}
		for i := range t.index {
			t.index[i].ints.seed = newSeed()
		}
		t.account()
		m.topics[name] = t
	}
	return t
}

// drop lets topic t go, and the memory it held.
func (m *Mirror) drop(t *topicIndex) {
	m.used -= t.mem
	delete(m.topics, t.stats.Topic)
}

// makeRoom frees memory for a block that t, which holds its share of the
// budget or more, stores: its oldest leaf goes, unless it is keep (the
// parent of the chain being stored). A topic under its share, or none
// (nil, a topic being made), takes need bytes, or an eighth of it if
// more, from the topic that holds the most: that one's oldest leaves go
// until what they held, given back by compacting it, is that much, or it
// has none left; an empty one goes. It
// reports whether anything went. O(topics) plus the compaction's
// O(slots) when it takes from another topic.
func (m *Mirror) makeRoom(t *topicIndex, keep int32, need int64) bool {
	if t != nil && t.mem*int64(len(m.topics)) >= m.budget {
		if t.oldest == noSlot || t.oldest == keep {
			return false
		}
		t.remove(t.oldest)
		t.stats.EvictedBlocks++
		return true
	}
	var v *topicIndex
	for _, u := range m.topics {
		if u != t && (v == nil || u.mem > v.mem) {
			v = u
		}
	}
	if v == nil {
		return false
	}
	if v.residents == 0 {
		m.drop(v)
		m.released++
		return true
	}
	// An eighth of v at least, so that the compactions' cost is
	// amortized over the blocks they make room for.
	goal, start := max(need, v.mem/8), v.mem
	for start-v.mem+v.freeable() < goal && v.oldest != noSlot {
		v.remove(v.oldest)
		v.stats.EvictedBlocks++
	}
	v.compact()
	v.account()
	return true
}

func (m *Mirror) apply(t *topicIndex, b *EventBatch) {
	t.stats.Batches++
	for _, ev := range b.Events {
		switch ev := ev.(type) {
		case *BlockStored:
			s, ok := t.set(ev.GroupIdx, ev.Medium)
			if !ok {
				t.stats.RefusedEvents++
				continue
			}
			parent := noSlot
			if ev.ParentBlockHash != nil {
				if p, _, ok := t.lookup(blockKey{*ev.ParentBlockHash, s}); ok {
					parent = p
				}
			}
			// vLLM's integer hashes go to their table here rather than
			// through lookup, which handles both kinds and is too large
			// to inline: a call less per block.
			x := &t.index[s]
			t.loaded = x.ints.prefetch(ev.BlockHashes)
			if over := t.residents + len(ev.BlockHashes) - m.capacity; over > 0 && x.ints.large() {
				t.loaded += t.prefetchVictims(over)
			}
			for i, h := range ev.BlockHashes {
				k := blockKey{h, s}
				var n int32
				var probe uint32
				if !h.isBytes() {
					n, probe, ok = x.ints.find(h.n, t.slab)
				} else {
					if len(h.bytes()) > MaxHashBytes {
						t.stats.RefusedEvents++
						break
					}
					n, probe, ok = t.lookup(k)
				}
				if ok {
					t.touch(n)
					parent = n
					continue
				}
				if t.residents >= m.capacity {
					// The oldest leaf makes room, unless it is the block
					// this chain hangs from: the rest of the chain cannot
					// be held without its own prefix.
					if t.oldest == parent {
						t.stats.EvictedBlocks += int64(len(ev.BlockHashes) - i)
						break
					}
					t.remove(t.oldest)
					t.stats.EvictedBlocks++
				}
				g := t.growth(k)
				for g > 0 && m.used+g > m.budget {
					if !m.makeRoom(t, parent, g) {
						g = -1
						break
					}
					g = t.growth(k)
				}
				if g < 0 { // no room, and nothing left to give it
					t.stats.EvictedBlocks += int64(len(ev.BlockHashes) - i)
					break
				}
				parent = t.store(k, probe, parent)
				if g > 0 {
					t.account()
				}
			}
		case *BlockRemoved:
			s, ok := t.set(ev.GroupIdx, ev.Medium)
			if !ok {
				t.stats.RefusedEvents++
				continue
			}
			x := &t.index[s] // as for a BlockStored
			t.loaded = x.ints.prefetch(ev.BlockHashes)
			for _, h := range ev.BlockHashes {
				var n int32
				if !h.isBytes() {
					n, ok = x.ints.deleteKey(h.n, t.slab)
				} else if n, ok = x.bytes[h.b]; ok {
					delete(x.bytes, h.b)
				}
				if ok {
					t.unfiled(x)
					t.detach(n)
				}
			}
		case *AllBlocksCleared:
			t.clear()
		}
	}
}

// set returns the index of the pair (group, medium), as vLLM's defaults
// fill them in, adding it if the topic has room for another pair.
func (t *topicIndex) set(group *int64, medium *string) (uint8, bool) {
	s := set{medium: MediumGPU}
	if group != nil {
		s.group = *group
	}
	if medium != nil {
		s.medium = *medium
	}
	if i := slices.Index(t.sets, s); i >= 0 {
		return uint8(i), true
	}
	if len(t.sets) == MaxGroups {
		return 0, false
	}
	t.sets = append(t.sets, s)
	return uint8(len(t.sets) - 1), true
}

// prefetchVictims loads the table buckets of the n blocks the mirror
// would evict next, as intTable.prefetch does a batch's: the oldest leaf,
// then its parent if that becomes a leaf, else the next leaf; it returns
// the sum of what it loaded, as prefetch does. O(n).
func (t *topicIndex) prefetchVictims(n int) (loaded int32) {
	for v := t.oldest; n > 0 && v != noSlot; n-- {
		b := &t.slab[v]
		if x := &t.index[b.set].ints; !b.isBytes && x.large() {
			loaded += x.load(b.mix)
		}
		if p := b.parent; p != noSlot && t.slab[p].children == 1 && !t.slab[p].removed {
			v = p
		} else {
			v = b.newer
		}
	}
	return loaded
}

// touch moves the resident block in slot n to the newest end of the
// leaves if it is one, as a store of a block already resident does.
func (t *topicIndex) touch(n int32) {
	if t.slab[n].children == 0 {
		t.unlink(n)
		t.pushNewest(n)
	}
}

// store makes k, not resident, resident under the block in slot parent
// (noSlot: a root, or a parent that is not resident) and returns its slot;
// probe is lookup's for k.
func (t *topicIndex) store(k blockKey, probe uint32, parent int32) int32 {
	if parent != noSlot {
		p := &t.slab[parent]
		if p.children == 0 {
			t.unlink(parent)
		}
		p.children++
	}
	n := t.alloc()
	// Field by field: alloc's slot is zero, and a composite literal
	// would be built on the stack and then copied in.
	b := &t.slab[n]
	b.hash, b.mix, b.parent, b.set, b.isBytes = k.hash.n, probe, parent, k.set, k.hash.isBytes()
	if k.hash.isBytes() {
		if t.bytesKeys == nil {
			t.bytesKeys = make(map[int32]string)
		}
		t.bytesKeys[n] = k.hash.b
		t.bytesLive++
		t.bytesPeak = max(t.bytesPeak, t.bytesLive)
		t.hashBytes += hashCost(len(k.hash.b))
	}
	t.insert(k, probe, n)
	t.pushNewest(n)
	return n
}

// remove drops the resident block in slot n. Its children, if any, stay
// resident; its parent, if it becomes a leaf, goes to the oldest end of the
// leaves.
func (t *topicIndex) remove(n int32) {
	t.drop(n)
	t.detach(n)
}

// detach takes the block in slot n, which no index files any more, out of
// the leaves and its parent's children, as remove describes. O(1).
func (t *topicIndex) detach(n int32) {
	bl := &t.slab[n]
	parent := bl.parent
	if bl.children == 0 {
		t.unlink(n)
		t.release(n)
	} else {
		bl.removed, bl.parent = true, noSlot // its parent counts it no more
	}
	if parent == noSlot {
		return
	}
	p := &t.slab[parent]
	p.children--
	switch {
	case p.children > 0:
	case p.removed:
		t.release(parent)
	default:
		t.pushOldest(parent)
	}
}

// pushNewest links slot n, which is not a leaf, at the newest end of the
// leaves. O(1).
func (t *topicIndex) pushNewest(n int32) {
	b := &t.slab[n]
	b.older, b.newer = t.newest, noSlot
	if t.newest != noSlot {
		t.slab[t.newest].newer = n
	} else {
		t.oldest = n
	}
	t.newest = n
}

// pushOldest links slot n, which is not a leaf, at the oldest end of the
// leaves: the next to evict. O(1).
func (t *topicIndex) pushOldest(n int32) {
	b := &t.slab[n]
	b.older, b.newer = noSlot, t.oldest
	if t.oldest != noSlot {
		t.slab[t.oldest].older = n
	} else {
		t.newest = n
	}
	t.oldest = n
}

// unlink takes slot n, a leaf, out of the leaves. O(1).
func (t *topicIndex) unlink(n int32) {
	b := &t.slab[n]
	if b.older != noSlot {
		t.slab[b.older].newer = b.newer
	} else {
		t.oldest = b.newer
	}
	if b.newer != noSlot {
		t.slab[b.newer].older = b.older
	} else {
		t.newest = b.older
	}
	b.older, b.newer = noSlot, noSlot
}

// alloc returns a zero slot for a new block, reusing a released one.
func (t *topicIndex) alloc() int32 {
	if k := len(t.free); k > 0 {
		n := t.free[k-1]
		t.free = t.free[:k-1]
		return n
	}
	if len(t.slab) == cap(t.slab) { // grown as growth counted it
		slab := make([]block, len(t.slab), slabGrowth(cap(t.slab)))
		copy(slab, t.slab)
		t.slab = slab
	}
	t.slab = append(t.slab, block{})
	return int32(len(t.slab) - 1)
}

// release frees slot n, whose block is no leaf and no resident block's
// parent.
func (t *topicIndex) release(n int32) {
	if t.slab[n].isBytes {
		t.forget(n)
	}
	t.slab[n] = block{}
	t.free = append(t.free, n)
}

// forget lets go of the bytes hash of slot n, and counts out its bytes.
func (t *topicIndex) forget(n int32) {
	d := hashCost(len(t.bytesKeys[n]))
	delete(t.bytesKeys, n)
	t.bytesLive--
	t.hashBytes -= d
	t.mem -= d
	*t.used -= d
}

// key returns the key of the block in slot n.
func (t *topicIndex) key(n int32) blockKey {
	b := &t.slab[n]
	if b.isBytes {
		return blockKey{Hash{b: t.bytesKeys[n]}, b.set}
	}
	return blockKey{IntHash(b.hash), b.set}
}

func (t *topicIndex) clear() {
	for s := range t.sets {
		x := &t.index[s]
		x.ints.clear()
		clear(x.bytes)
		x.count = 0
	}
	t.residents = 0
	clear(t.bytesKeys)
	*t.used -= t.hashBytes
	t.mem -= t.hashBytes
	t.bytesLive, t.hashBytes = 0, 0
	clear(t.slab)
	t.slab, t.free = t.slab[:0], t.free[:0]
	t.oldest, t.newest = noSlot, noSlot
	t.sets = t.sets[:0]
}

// resident reports whether t holds h on medium in any group, or in group
// alone when group is not nil.
func (t *topicIndex) resident(h Hash, group *int64, medium string) bool {
	for i, s := range t.sets {
		if s.medium != medium || (group != nil && s.group != *group) {
			continue
		}
		if _, _, ok := t.lookup(blockKey{h, uint8(i)}); ok {
			return true
		}
	}
	return false
}

// match returns the length of the leading run of hashes resident on the
// GPU, in any group or in group alone.
func (m *Mirror) match(topic string, group *int64, hashes []Hash) int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	t, ok := m.topics[topic]
	if !ok {
		return 0
	}
	for i, h := range hashes {
		if !t.resident(h, group, MediumGPU) {
			return i
		}
	}
	return len(hashes)
}

// Match returns how many leading blocks of hashes topic holds on the GPU,
// in any KV cache group: the prefix a request would reuse on that engine.
// O(matched x groups).
func (m *Mirror) Match(topic string, hashes []Hash) int { return m.match(topic, nil, hashes) }

// MatchGroup is [Mirror.Match] within one KV cache group, for a router
// that scores a hybrid model's groups apart (such as its full-attention
// group, whose prefix a request must find whole). O(matched x groups).
func (m *Mirror) MatchGroup(topic string, group int64, hashes []Hash) int {
	return m.match(topic, &group, hashes)
}

// Resident reports whether topic holds the block h on the GPU, in any
// group. O(groups).
func (m *Mirror) Resident(topic string, h Hash) bool { return m.match(topic, nil, []Hash{h}) == 1 }

// ResidentOn reports whether topic holds the block h on medium ("GPU",
// "CPU", "STORAGE"), in any group: where a router that weighs each tier
// (llm-d scores a GPU copy above a CPU one) finds a copy. O(groups).
func (m *Mirror) ResidentOn(topic, medium string, h Hash) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	t, ok := m.topics[topic]
	return ok && t.resident(h, nil, medium)
}

// Topics returns the stats of every topic seen, by topic name.
// O(topics), plus O(blocks) for a medium that more than one group uses.
func (m *Mirror) Topics() []TopicStats {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]TopicStats, 0, len(m.topics))
	for _, t := range m.topics {
		s := t.stats
		s.ResidentByMedium = t.byMedium()
		s.ResidentBlocks = s.ResidentByMedium[MediumGPU]
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b TopicStats) int { return strings.Compare(a.Topic, b.Topic) })
	return out
}

// byMedium counts the hashes resident per medium in any group.
func (t *topicIndex) byMedium() map[string]int {
	out := make(map[string]int)
	groups := make(map[string]int)
	for i, s := range t.sets {
		out[s.medium] += t.index[i].count
		groups[s.medium]++
	}
	for medium, n := range groups {
		if n == 1 {
			continue
		}
		distinct := make(map[Hash]struct{})
		t.each(func(k blockKey, _ int32) {
			if t.sets[k.set].medium == medium {
				distinct[k.hash] = struct{}{}
			}
		})
		out[medium] = len(distinct)
	}
	for medium, n := range out {
		if n == 0 {
			delete(out, medium)
		}
	}
	return out
}
