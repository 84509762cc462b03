// Package blockcount counts the holders that list each KV block, for a
// structure that must not free a block another holder still lists: the
// Index, whose held candidates may share a cached prefix.
//
// A pool numbers its blocks from 0, so a bit per block says that a block
// is listed, in a table small enough to stay in the processor's cache
// where a hash table of the same blocks would miss it on every look-up;
// only the blocks listed more than once (a prefix that running sequences
// share) take an entry in a hash table. Blocks the bits do not cover
// (negative ones, or ids far beyond the blocks listed) are counted in a
// hash table of their own.
package blockcount

import (
	"fmt"
	"math/bits"

	"github.com/sagellm/kvevict/internal/idmap"
)

// Counts counts, for each block, the holders that list it (a holder that
// lists a block twice counts twice). The zero value counts nothing.
type Counts struct {
	// bits has bit b set while block b, 0 <= b < 64*len(bits), is listed.
	bits []uint64
	// more counts, for a block in bits' range listed more than once, the
	// listings beyond the first.
	more idmap.Map[int32]
	// far counts every listing of a block outside bits' range.
	far idmap.Map[int32]
	// distinct is how many blocks are listed; extra, the listings beyond
	// each block's first, so that a caller skips its check for a shared
	// block while it is zero.
	distinct, extra int
}

// minBits is the fewest blocks the bits cover once they cover any.
const minBits = 1 << 16

// bitsPerBlock bounds the bits' span by the blocks listed: a hash table
// of the same blocks takes at least 32 bytes, 256 bits, a block.
const bitsPerBlock = 256

// Add counts one more listing of block b. O(1) amortized.
func (c *Counts) Add(b int) {
	if !c.covers(b) && !c.stretch(b) {
		if p := c.far.Upsert(uint64(b)); *p > 0 {
			*p++
			c.extra++
		} else {
			*p = 1
			c.distinct++
		}
		return
	}
	w, m := &c.bits[b>>6], uint64(1)<<(b&63)
	if *w&m == 0 {
		*w |= m
		c.distinct++
		return
	}
	*c.more.Upsert(uint64(b))++
	c.extra++
}

// Remove counts one listing of block b fewer; b must be listed. O(1)
// expected.
func (c *Counts) Remove(b int) {
	if !c.covers(b) {
		p := c.far.Ref(uint64(b))
		if p == nil {
			panic(fmt.Sprintf("blockcount: block %d removed but not listed", b))
		}
		if *p > 1 {
			*p--
			c.extra--
		} else {
			c.far.Del(uint64(b))
			c.distinct--
		}
		return
	}
	if c.extra > 0 {
		if p := c.more.Ref(uint64(b)); p != nil {
			if *p > 1 {
				*p--
			} else {
				c.more.Del(uint64(b))
			}
			c.extra--
			return
		}
	}
	w, m := &c.bits[b>>6], uint64(1)<<(b&63)
	if *w&m == 0 {
		panic(fmt.Sprintf("blockcount: block %d removed but not listed", b))
	}
	*w &^= m
	c.distinct--
}

// Shared reports whether some block is listed more than once. O(1).
func (c *Counts) Shared() bool { return c.extra > 0 }

// Count returns how many listings block b has. O(1) expected.
func (c *Counts) Count(b int) int {
	if !c.covers(b) {
		n, _ := c.far.Get(uint64(b))
		return int(n)
	}
	if c.bits[b>>6]&(1<<(b&63)) == 0 {
		return 0
	}
	n, _ := c.more.Get(uint64(b))
	return 1 + int(n)
}

// Reserve has the bits cover blocks 0 to n-1, as a pool of n blocks
// numbers them, so that counting them does not grow the bits. O(n/64).
func (c *Counts) Reserve(n int) {
	if n > 64*len(c.bits) {
		c.cover(n)
	}
}

// covers reports whether the bits cover block b.
func (c *Counts) covers(b int) bool { return uint(b) < uint(64*len(c.bits)) }

// stretch has the bits cover block b, not covered, if that keeps them
// within bitsPerBlock of the blocks listed, and reports whether they do.
func (c *Counts) stretch(b int) bool {
	if b < 0 || b >= max(minBits, bitsPerBlock*(c.distinct+1)) {
		return false
	}
	c.cover(b + 1)
	return true
}

// cover grows the bits to cover blocks 0 to n-1 at least, to a power of
// two, and moves there the blocks far counted that they now cover. O(the
// bits' new size/64 + far's size).
func (c *Counts) cover(n int) {
	size := max(minBits, 1<<bits.Len(uint(n-1)))
	grown := make([]uint64, size/64)
	copy(grown, c.bits)
	c.bits = grown
	if c.far.Len() == 0 {
		return
	}
	var moved []uint64
	for id := range c.far.All() {
		if c.covers(int(id)) {
			moved = append(moved, id)
		}
	}
	for _, id := range moved {
		n, _ := c.far.Get(id)
		c.far.Del(id)
		b := int(id)
		c.bits[b>>6] |= 1 << (b & 63)
		if n > 1 {
			c.more.Put(id, n-1)
		}
	}
}

// Tables returns the sizes of the bits, in words, and of the two hash
// tables, in slots, each of which changes only when its table grows.
func (c *Counts) Tables() [3]int { return [3]int{len(c.bits), c.more.Slots(), c.far.Slots()} }

// Check verifies the counts against want, every listed block's count,
// for tests.
func (c *Counts) Check(want map[int]int) error {
	distinct, extra := 0, 0
	for b, n := range want {
		if got := c.Count(b); got != n {
			return fmt.Errorf("blockcount: block %d counted %d times, listed %d", b, got, n)
		}
		if n > 0 {
			distinct++
			extra += n - 1
		}
	}
	set := 0
	for _, w := range c.bits {
		set += bits.OnesCount64(w)
	}
	if set+c.far.Len() != distinct || c.distinct != distinct || c.extra != extra {
		return fmt.Errorf("blockcount: %d bits and %d far blocks, %d distinct and %d extra counted; want %d and %d",
			set, c.far.Len(), c.distinct, c.extra, distinct, extra)
	}
	return nil
}
