// Package ghost remembers the request counts of ids that are no longer
// resident, bounded: the ghosts of Auto's history over sequences, and of a
// prefix tree ranked by Auto over its blocks. A returning id takes back
// the requests it had, so that its reuse survives its eviction, and the
// memory stays bounded whatever passes through the pool.
package ghost

import (
	"fmt"

	"github.com/sagellm/kvevict/internal/dlist"
	"github.com/sagellm/kvevict/internal/idmap"
)

// Count is what is remembered of an id.
type Count struct {
	Requests uint32 // requests counted for the id, saturating
	// Tag is the owner's note on the id, 0 for none: Auto's class of a
	// victim not requested since its eviction.
	Tag uint8
}

// Counts holds at most its capacity of ids with their counts and forgets
// the least recently put first. Every operation is O(1). The zero value
// holds nothing; use [New]. A Counts is not safe for concurrent use.
type Counts struct {
	cap     int
	index   idmap.Map[int32] // id -> slot in entries and slots
	entries []entry
	slots   dlist.Slots
	order   dlist.List // ids, most recently put at the back
}

type entry struct {
	id    uint64
	count Count
}

// New returns an empty Counts that holds at most capacity ids (none for
// capacity <= 0).
func New(capacity int) Counts {
	return Counts{cap: max(capacity, 0), order: dlist.Empty()}
}

// Len returns how many ids are remembered.
func (m *Counts) Len() int { return m.index.Len() }

// Cap returns how many ids may be remembered.
func (m *Counts) Cap() int { return m.cap }

// Get returns id's count, if remembered, without refreshing it.
func (m *Counts) Get(id uint64) (Count, bool) {
	i, ok := m.index.Get(id)
	if !ok {
		return Count{}, false
	}
	return m.entries[i].count, true
}

// Put remembers c for id as the newest. An id already remembered (the
// same block on another path of a tree) keeps the larger request count
// and takes c's tag. Beyond the capacity the oldest id is forgotten.
func (m *Counts) Put(id uint64, c Count) {
	if m.cap == 0 {
		return
	}
	if i, ok := m.index.Get(id); ok {
		c.Requests = max(c.Requests, m.entries[i].count.Requests)
		m.entries[i].count = c
		m.slots.Remove(&m.order, i)
		m.slots.PushBack(&m.order, i)
		return
	}
	if m.index.Len() >= m.cap {
		m.forget(m.order.Front)
	}
	i, grown := m.slots.Alloc()
	if grown {
		m.entries = append(m.entries, entry{})
	}
	m.entries[i] = entry{id: id, count: c}
	m.index.Put(id, i)
	m.slots.PushBack(&m.order, i)
}

// Take returns and forgets id's count, if remembered.
func (m *Counts) Take(id uint64) (Count, bool) {
	i, ok := m.index.Get(id)
	if !ok {
		return Count{}, false
	}
	c := m.entries[i].count
	m.forget(i)
	return c, true
}

// forget drops the id in slot i.
func (m *Counts) forget(i int32) {
	m.slots.Remove(&m.order, i)
	m.index.Del(m.entries[i].id)
	m.entries[i] = entry{}
	m.slots.Free(i)
}

// Check reports a broken invariant, for tests.
func (m *Counts) Check() error {
	if n := m.index.Len(); n > m.cap {
		return fmt.Errorf("ghost: %d ids remembered, capacity %d", n, m.cap)
	}
	seen := 0
	err := m.slots.Check(&m.order, func(i int32) error {
		seen++
		if got, ok := m.index.Get(m.entries[i].id); !ok || got != i {
			return fmt.Errorf("ghost: id %d at slot %d indexed at %d", m.entries[i].id, i, got)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if seen != m.index.Len() {
		return fmt.Errorf("ghost: %d ids in order, %d indexed", seen, m.index.Len())
	}
	if err := m.slots.CheckFree(); err != nil {
		return err
	}
	if seen+m.slots.FreeLen() != len(m.entries) {
		return fmt.Errorf("ghost: %d listed + %d free != %d slots", seen, m.slots.FreeLen(), len(m.entries))
	}
	return m.index.Check()
}
