package kvevents

import (
	"math/bits"
	"math/rand/v2"
)

// intTable maps integer hashes to the mirror's slots, whose blocks hold
// the hashes themselves: open addressing with
// linear probing, and deletion by shifting back the entries after the
// deleted one, so that the churn of a full mirror (one block evicted per
// block stored) leaves no tombstones to probe past. Keys are mixed with a
// seed of the table's own before they pick a bucket, so that hashes a
// producer chose cannot pile up on one probe sequence that the producer
// could predict.
//
// The zero intTable is empty and ready to use, with a seed of zero: its
// owner draws one ([newSeed]) before the first key goes in, so that mix
// stays a few instructions the compiler inlines.
type intTable struct {
	entries []intEntry // a power of two of them, or none
	count   int
	shift   uint8 // 32 - log2(len(entries))
	seed    uint64
}

// newSeed returns a seed for an intTable.
func newSeed() uint64 { return rand.Uint64() }

// intEntry is one bucket: slot is the block's slot plus one, 0 for an
// empty bucket, and mix the top bits of its hash's mix, which pick its
// home without mixing it again as entries move and tell most other keys
// apart without reading the block. Eight bytes a bucket keep a probe run
// in a cache line or two.
type intEntry struct {
	slot int32
	mix  uint32
}

// The table grows past a quarter full: linear probing's runs, which a
// lookup that misses and a deletion walk to their end, stay a bucket or
// two, and a bucket is small enough that the room costs little.
// A table of at most 2^32 buckets keeps a home within an entry's mix; a
// mirror's capacity needs fewer.
const (
	maxLoadNum = 1
	maxLoadDen = 4
	minBuckets = 16
)

// mix returns the top bits of k mixed with the table's seed.
func (t *intTable) mix(k uint64) uint32 {
	// splitmix64's finalizer: every bit of k moves the top bits.
	z := k ^ t.seed
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return uint32(z >> 32)
}

// home returns the bucket where the probe sequence of a key whose mix m
// is starts.
func (t *intTable) home(m uint32) int { return int(m >> t.shift) }

// find returns the slot of k, whose block in slab has hash k, and k's
// mix, which a put of k after a miss takes. O(1) expected.
func (t *intTable) find(k uint64, slab []block) (slot int32, mix uint32, ok bool) {
	m := t.mix(k)
	if t.count == 0 {
		return 0, m, false
	}
	mask := len(t.entries) - 1
	for i := t.home(m); ; i = (i + 1) & mask {
		e := t.entries[i]
		if e.slot == 0 {
			return 0, m, false
		}
		if e.mix == m && slab[e.slot-1].hash == k {
			return e.slot - 1, m, true
		}
	}
}

// prefetchBuckets is the size of a table, 1 MiB of buckets, past which
// it no longer fits a server core's L2 cache, and each probe of a batch
// would wait on memory in turn.
const prefetchBuckets = 1 << 17

// prefetch loads the home bucket of each integer hash of hs, when the
// table is too large for a core's cache, so that the batch's misses
// overlap (the loads do not depend on one another) before find and
// deleteKey probe them one at a time. Below that size the buckets are
// cached and the pass would only add a second mix per hash. It returns
// the sum of what it loaded, for the caller to keep, so that the compiler
// keeps the loads.
func (t *intTable) prefetch(hs []Hash) (loaded int32) {
	if !t.large() {
		return 0
	}
	for i := range hs {
		if !hs[i].isBytes() {
			loaded += t.load(t.mix(hs[i].n))
		}
	}
	return loaded
}

// large reports whether the table is past prefetchBuckets.
func (t *intTable) large() bool { return len(t.entries) >= prefetchBuckets }

// load reads the home bucket of mix m, for a prefetch.
func (t *intTable) load(m uint32) int32 { return t.entries[t.home(m)].slot }

// put files the key whose mix find returned, which the table does not
// hold, under slot. O(1) expected, amortized over the table's doublings.
func (t *intTable) put(mix uint32, slot int32) {
	if t.full() {
		t.grow()
	}
	t.place(intEntry{slot: slot + 1, mix: mix})
}

// full reports whether the next put grows the table, to grown() buckets.
func (t *intTable) full() bool { return (t.count+1)*maxLoadDen > len(t.entries)*maxLoadNum }

// grown returns the buckets the table grows to.
func (t *intTable) grown() int { return max(minBuckets, 2*len(t.entries)) }

// place files e in the first empty bucket from its home.
func (t *intTable) place(e intEntry) {
	mask := len(t.entries) - 1
	i := t.home(e.mix)
	for t.entries[i].slot != 0 {
		i = (i + 1) & mask
	}
	t.entries[i] = e
	t.count++
}

// delete unfiles slot, whose key's mix is mix, if the table holds it.
// O(1) expected.
func (t *intTable) delete(mix uint32, slot int32) {
	t.unfile(mix, slot, 0, nil)
}

// deleteKey unfiles k, whose block in slab has hash k, and returns its
// slot, in one probe where find and delete would take two. O(1) expected.
func (t *intTable) deleteKey(k uint64, slab []block) (slot int32, ok bool) {
	return t.unfile(t.mix(k), -1, k, slab)
}

// unfile finds the entry of slot, or when slot is -1 the entry of key k
// (whose block in slab has hash k), m being its mix, and empties its
// bucket: one probe loop and one shift for both of delete's ways in.
func (t *intTable) unfile(m uint32, slot int32, k uint64, slab []block) (int32, bool) {
	if t.count == 0 {
		return 0, false
	}
	mask := len(t.entries) - 1
	i := t.home(m)
	for ; ; i = (i + 1) & mask {
		e := t.entries[i]
		if e.slot == 0 {
			return 0, false
		}
		if slot >= 0 {
			if e.slot == slot+1 {
				break
			}
		} else if e.mix == m && slab[e.slot-1].hash == k {
			slot = e.slot - 1
			break
		}
	}
	// Shift back each later entry of the run whose home is not between
	// the hole and it, so every entry stays reachable from its home.
	for j := (i + 1) & mask; t.entries[j].slot != 0; j = (j + 1) & mask {
		h := t.home(t.entries[j].mix)
		if (j-h)&mask >= (j-i)&mask {
			t.entries[i] = t.entries[j]
			i = j
		}
	}
	t.entries[i] = intEntry{}
	t.count--
	return slot, true
}

// grow doubles the buckets (to minBuckets from none) and refiles every
// entry. O(len).
func (t *intTable) grow() { t.resize(t.grown(), nil) }

// refile files every entry under its slot's new number, to[slot], in a
// table of the fewest buckets that holds them and one more, or none when
// it is empty. O(len).
func (t *intTable) refile(to []int32) {
	n := 0
	if t.count > 0 {
		n = minBuckets
		for (t.count+1)*maxLoadDen > n*maxLoadNum {
			n *= 2
		}
	}
	t.resize(n, to)
}

// resize refiles every entry in a table of n buckets (a power of two, or
// 0 when there is no entry), each under slot to[slot] when to is not nil.
// O(len).
func (t *intTable) resize(n int, to []int32) {
	old := t.entries
	t.entries, t.count = nil, 0
	if n == 0 {
		return
	}
	t.entries = make([]intEntry, n)
	t.shift = uint8(32 - bits.TrailingZeros(uint(n)))
	for _, e := range old {
		if e.slot != 0 {
			if to != nil {
				e.slot = to[e.slot-1] + 1
			}
			t.place(e)
		}
	}
}

// clear empties the table, keeping its buckets. O(len).
func (t *intTable) clear() {
	clear(t.entries)
	t.count = 0
}

// all calls fn with each slot filed.
func (t *intTable) all(fn func(slot int32)) {
	for _, e := range t.entries {
		if e.slot != 0 {
			fn(e.slot - 1)
		}
	}
}
