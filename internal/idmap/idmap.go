// Package idmap is the hash table that maps sequence IDs to values, shared
// by kvevict's histories, metrics and Index and by the miniature caches
// that choose Auto's weight.
package idmap

import (
	"fmt"
	"iter"
	"math/bits"
)

// Map maps sequence IDs to values of type V: the adaptive strategies'
// node indices, the re-prefill ledger's records of evicted units and the Index's
// slots. It is an open-addressing hash table with linear probing and
// backward-shift deletion, so that it needs no tombstones. A slot holds id+1 so that zero
// means empty; ID math.MaxUint64, whose id+1 is zero, lives outside the
// slots. It grows to keep the load at most 1/2 and never shrinks, so its
// memory is bounded by the most ids tracked at once. The zero value is an
// empty map.
type Map[V any] struct {
	slots  []pair[V]
	shift  uint
	count  int // ids in the slots
	last   V   // value of ID math.MaxUint64, when lastOK
	lastOK bool
}

// pair is one slot: an id and its value side by side, so that a lookup
// that finds its id reads one cache line, not one per array.
type pair[V any] struct {
	key uint64 // id+1, 0 = empty
	val V
}

const idMapMinSize = 16

func (m *Map[V]) slot(id uint64) uint64 {
	return (id * 0x9E3779B97F4A7C15) >> m.shift
}

// Ref returns a pointer to id's value, or nil. The pointer is valid until
// the next put, upsert or del. O(1) expected.
func (m *Map[V]) Ref(id uint64) *V {
	k := id + 1
	if k == 0 {
		if m.lastOK {
			return &m.last
		}
		return nil
	}
	if m.count == 0 {
		return nil
	}
	mask := uint64(len(m.slots) - 1)
	for i := m.slot(id); ; i = (i + 1) & mask {
		switch m.slots[i].key {
		case k:
			return &m.slots[i].val
		case 0:
			return nil
		}
	}
}

// Get returns id's value. O(1) expected.
func (m *Map[V]) Get(id uint64) (V, bool) {
	if p := m.Ref(id); p != nil {
		return *p, true
	}
	var zero V
	return zero, false
}

// Put sets id's value. O(1) amortized.
func (m *Map[V]) Put(id uint64, v V) { *m.Upsert(id) = v }

// Upsert returns a pointer to id's value, adding id with the zero value if
// it is absent. The pointer is valid until the next put, Upsert or del.
// O(1) amortized.
func (m *Map[V]) Upsert(id uint64) *V {
	k := id + 1
	if k == 0 {
		if !m.lastOK {
			var zero V
			m.last, m.lastOK = zero, true
		}
		return &m.last
	}
	if 2*(m.count+1) > len(m.slots) {
		m.grow()
	}
	mask := uint64(len(m.slots) - 1)
	for i := m.slot(id); ; i = (i + 1) & mask {
		switch m.slots[i].key {
		case k:
			return &m.slots[i].val
		case 0:
			m.slots[i] = pair[V]{key: k}
			m.count++
			return &m.slots[i].val
		}
	}
}

// Del removes id, shifting back the entries of its probe run so that every
// entry stays reachable from its home slot. O(1) expected.
func (m *Map[V]) Del(id uint64) {
	k := id + 1
	if k == 0 {
		m.lastOK = false
		return
	}
	if m.count == 0 {
		return
	}
	mask := uint64(len(m.slots) - 1)
	i := m.slot(id)
	for m.slots[i].key != k {
		if m.slots[i].key == 0 {
			return
		}
		i = (i + 1) & mask
	}
	m.count--
	for j := (i + 1) & mask; m.slots[j].key != 0; j = (j + 1) & mask {
		// The entry at j may fill the hole at i unless its home slot lies
		// cyclically in (i, j].
		home := m.slot(m.slots[j].key - 1)
		if (j-home)&mask >= (j-i)&mask {
			m.slots[i] = m.slots[j]
			i = j
		}
	}
	m.slots[i].key = 0
}

// Reset empties the map and sizes it for n ids at a load of at most 1/2,
// for a set rebuilt on every call (the selection's duplicate-ID check). A
// table far larger than n is freed, so that one huge call does not pin its
// memory. O(size).
func (m *Map[V]) Reset(n int) {
	size := idMapMinSize
	for size < 2*n {
		size *= 2
	}
	if cap(m.slots) < size || (cap(m.slots) > idMapShrinkAbove && cap(m.slots) > 8*size) {
		m.slots = make([]pair[V], size)
	} else {
		m.slots = m.slots[:size]
		clear(m.slots)
	}
	m.shift = 64 - uint(bits.TrailingZeros(uint(size)))
	m.count = 0
	var zero V
	m.last, m.lastOK = zero, false
}

// idMapShrinkAbove is the table size above which reset frees a table eight
// times larger than it needs.
const idMapShrinkAbove = 1 << 16

// Add inserts id unless it is there, and reports whether it was: the
// duplicate-ID check of a selection, one probe run per candidate. The map
// must have room: reset sized it for every id added since, so Add never
// grows it and stays small enough to inline. Its value is left as it is.
// O(1) expected.
func (m *Map[V]) Add(id uint64) (had bool) {
	k := id + 1
	if k == 0 {
		had, m.lastOK = m.lastOK, true
		return had
	}
	mask := uint64(len(m.slots) - 1)
	for i := m.slot(id); ; i = (i + 1) & mask {
		switch m.slots[i].key {
		case 0:
			m.slots[i].key = k
			m.count++
			return false
		case k:
			return true
		}
	}
}

// All returns an iterator over the map's ids and values, in no particular
// order. The map must not change during the iteration. O(size).
func (m *Map[V]) All() iter.Seq2[uint64, V] {
	return func(yield func(uint64, V) bool) {
		for i := range m.slots {
			if k := m.slots[i].key; k != 0 && !yield(k-1, m.slots[i].val) {
				return
			}
		}
		if m.lastOK {
			yield(1<<64-1, m.last)
		}
	}
}

// Len returns how many ids the map holds.
func (m *Map[V]) Len() int {
	if m.lastOK {
		return m.count + 1
	}
	return m.count
}

// grow doubles the slots and reinserts every id.
func (m *Map[V]) grow() { m.rehash(max(idMapMinSize, 2*len(m.slots))) }

// Slots returns the table's size in slots, which changes only when the
// table grows or is reset. O(1).
func (m *Map[V]) Slots() int { return len(m.slots) }

// Reserve makes room for n more ids without growing, at a load of at most
// 1/2. O(ids held), once.
func (m *Map[V]) Reserve(n int) {
	size := max(idMapMinSize, len(m.slots))
	for size < 2*(m.count+n) {
		size *= 2
	}
	if size > len(m.slots) {
		m.rehash(size)
	}
}

// rehash moves every id into a table of size slots, a power of two.
func (m *Map[V]) rehash(size int) {
	old := m.slots
	m.slots = make([]pair[V], size)
	m.shift = 64 - uint(bits.TrailingZeros(uint(size)))
	m.count = 0
	for i := range old {
		if k := old[i].key; k != 0 {
			m.Put(k-1, old[i].val)
		}
	}
}

// Check verifies that every id is reachable from its home slot and the
// count, for tests.
func (m *Map[V]) Check() error {
	n := 0
	for i := range m.slots {
		k := m.slots[i].key
		if k == 0 {
			continue
		}
		n++
		if m.Ref(k-1) != &m.slots[i].val {
			return fmt.Errorf("idMap: id %d at slot %d unreachable from its home slot", k-1, i)
		}
	}
	if n != m.count {
		return fmt.Errorf("idMap: count %d, %d slots used", m.count, n)
	}
	return nil
}

// Distinct returns ids without repeats, in order of first appearance, at
// most limit of them, in buf's storage; seen is scratch, reset first.
// O(len(ids)).
func Distinct(ids []uint64, limit int, buf []uint64, seen *Map[struct{}]) []uint64 {
	seen.Reset(min(len(ids), limit))
	buf = buf[:0]
	for _, id := range ids {
		if len(buf) == limit {
			break
		}
		if !seen.Add(id) {
			buf = append(buf, id)
		}
	}
	return buf
}
