package kvevict

// evictionTable maps a sequence ID to its eviction record: an open-addressing
// hash table with linear probing and backward-shift deletion (no
// tombstones). It replaces a Go map on the eviction path, where every victim
// costs a lookup-and-update and, once the history is full, the forgetting of
// the oldest eviction: one probe sequence each instead of two map operations.
// A slot is empty when its count is zero; a stored record always has
// count >= 1. The table doubles at a load factor of 1/2 and halves below 1/8,
// so its size follows the number of remembered sequences, which the history
// cap bounds.
type evictionTable struct {
	slots []evictionSlot
	len   int
	shift uint // 64 - log2(len(slots))
}

type evictionSlot struct {
	id uint64
	evictionRecord
}

const evictionTableMin = 16

func (t *evictionTable) home(id uint64) uint64 {
	return (id * 0x9E3779B97F4A7C15) >> t.shift
}

// find returns the index of the slot holding id. O(1) expected.
func (t *evictionTable) find(id uint64) (uint64, bool) {
	if t.len == 0 {
		return 0, false
	}
	mask := uint64(len(t.slots) - 1)
	for i := t.home(id); ; i = (i + 1) & mask {
		if t.slots[i].count == 0 {
			return 0, false
		}
		if t.slots[i].id == id {
			return i, true
		}
	}
}

// upsert returns the index of id's slot, adding an empty record (count 0,
// which the caller must raise to at least 1 before the next call) if id is
// absent. O(1) amortized.
func (t *evictionTable) upsert(id uint64) uint64 {
	if 2*(t.len+1) > len(t.slots) {
		t.resize(max(evictionTableMin, 2*len(t.slots)))
	}
	mask := uint64(len(t.slots) - 1)
	for i := t.home(id); ; i = (i + 1) & mask {
		if t.slots[i].count == 0 {
			t.len++
			t.slots[i] = evictionSlot{id: id}
			return i
		}
		if t.slots[i].id == id {
			return i
		}
	}
}

// remove deletes the record in slot i, shifting back the entries of its
// probe run so that lookups need no tombstones. O(1) expected.
func (t *evictionTable) remove(i uint64) {
	mask := uint64(len(t.slots) - 1)
	for j := (i + 1) & mask; t.slots[j].count != 0; j = (j + 1) & mask {
		// The entry at j may fill the hole at i if i lies on its probe
		// path, from its home slot to j.
		if (j-t.home(t.slots[j].id))&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = evictionSlot{}
	t.len--
	if len(t.slots) > evictionTableMin && 8*t.len < len(t.slots) {
		t.resize(len(t.slots) / 2)
	}
}

func (t *evictionTable) resize(size int) {
	old := t.slots
	t.slots = make([]evictionSlot, size)
	bits := uint(0)
	for 1<<bits < size {
		bits++
	}
	t.shift = 64 - bits
	mask := uint64(size - 1)
	for _, s := range old {
		if s.count == 0 {
			continue
		}
		i := t.home(s.id)
		for t.slots[i].count != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}
