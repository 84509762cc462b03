package tier

import (
	"github.com/sagellm/kvevict/internal/dlist"
	"github.com/sagellm/kvevict/internal/idmap"
)

// vllmCPU is the host tier of [WriteVLLM]: vLLM's CPUOffloadingManager with
// its lru or arc cache policy, as vLLM's main held them in mid-May 2026
// (vllm/v1/kv_offload/cpu/manager.py at 5bd8c71, cpu/policies/base.py,
// lru.py and arc.py at c42981d), with store_threshold 1 and one CPU block
// per GPU block. It reproduces their choices, including where they differ
// from kvevict's strategies of the same names:
//   - touch walks its keys last first, so the first ends the most recent;
//   - a store evicts only blocks that are ready, idle and not among the
//     keys it was offered, and fails whole, changing nothing, when it
//     cannot find enough;
//   - ARC's eviction takes from T1 only while |T1| >= floor(p), counting
//     every T1 entry, and never falls back to T1 once T1 is under its
//     target: a store then fails though T1 holds eligible blocks;
//   - ARC's ghost lists are each bounded by the capacity, trimmed after a
//     successful eviction, and a ghost touched adapts p every time.
//
// Transfers complete within the call that starts them, so a block is
// never seen loading, and a stored block is ready once its request's
// store completes.
type vllmCPU struct {
	capacity int
	arc      bool

	index  idmap.Map[int32] // key -> node, cached or ghost
	nodes  []vllmNode
	slots  dlist.Slots   // and the lists' links
	lists  [4]dlist.List // t1, t2, b1, b2, least recent at the front; lru keeps its blocks in t1
	p      float64       // ARC's target size of T1
	cached int           // |T1| + |T2|

	protected idmap.Map[struct{}] // scratch: a store's offered keys
	toStore   []uint64            // scratch
	chosen    []int32             // scratch: an eviction's victims
	evicted   []uint64            // scratch: their keys
}

// The lists a node of vllmCPU is in.
const (
	t1 = iota
	t2
	b1
	b2
)

type vllmNode struct {
	key   uint64
	list  uint8
	ready bool // stored, not being stored
}

func newVLLMCPU(capacity int, arc bool) *vllmCPU {
	c := &vllmCPU{capacity: capacity, arc: arc}
	for i := range c.lists {
		c.lists[i] = dlist.Empty()
	}
	return c
}

// node returns key's node, and whether it has one.
func (c *vllmCPU) node(key uint64) (int32, bool) { return c.index.Get(key) }

// contains is the manager's lookup: key is cached and ready.
func (c *vllmCPU) contains(key uint64) bool {
	n, ok := c.node(key)
	return ok && c.nodes[n].list <= t2 && c.nodes[n].ready
}

// move puts node n at the back of list l.
func (c *vllmCPU) move(n int32, l uint8) {
	c.slots.Remove(&c.lists[c.nodes[n].list], n)
	c.nodes[n].list = l
	c.slots.PushBack(&c.lists[l], n)
}

// touch is the policies' touch(keys): last key first.
func (c *vllmCPU) touch(keys []uint64) {
	for i := len(keys) - 1; i >= 0; i-- {
		n, ok := c.node(keys[i])
		if !ok {
			continue
		}
		nd := &c.nodes[n]
		if !c.arc {
			c.move(n, t1)
			continue
		}
		switch nd.list {
		case t1:
			if nd.ready {
				c.move(n, t2)
			} else {
				c.move(n, t1)
			}
		case t2:
			c.move(n, t2)
		case b1:
			delta := max(1, float64(c.lists[b2].Len)/float64(c.lists[b1].Len))
			c.p = min(c.p+delta, float64(c.capacity))
			c.move(n, b1)
		case b2:
			delta := max(1, float64(c.lists[b1].Len)/float64(c.lists[b2].Len))
			c.p = max(c.p-delta, 0)
			c.move(n, b2)
		}
	}
}

// store is prepare_store(keys) then complete_store of what it stored: it
// returns the keys stored and those evicted for them (valid until the
// next call), or ok false, changing nothing, when the policy cannot evict
// enough. Keys repeated in the call count once.
func (c *vllmCPU) store(keys []uint64) (stored, evicted []uint64, ok bool) {
	c.toStore = c.toStore[:0]
	c.protected.Reset(len(keys))
	for _, k := range keys {
		if c.protected.Add(k) {
			continue
		}
		if n, ok := c.node(k); !ok || c.nodes[n].list > t2 {
			c.toStore = append(c.toStore, k)
		}
	}
	c.evicted = c.evicted[:0]
	if len(c.toStore) == 0 {
		return nil, nil, true
	}
	if need := len(c.toStore) - (c.capacity - c.cached); need > 0 && !c.evict(need) {
		return nil, nil, false
	}
	for _, k := range c.toStore {
		c.insert(k)
	}
	return c.toStore, c.evicted, true
}

// complete marks stored keys ready: complete_store.
func (c *vllmCPU) complete(keys []uint64) {
	for _, k := range keys {
		if n, ok := c.node(k); ok && c.nodes[n].list <= t2 {
			c.nodes[n].ready = true
		}
	}
}

// insert caches key, not ready, at the back of T1; under ARC a ghost of key
// is taken back.
func (c *vllmCPU) insert(key uint64) {
	n, ok := c.node(key)
	if ok { // a ghost
		c.move(n, t1)
	} else {
		var grown bool
		n, grown = c.slots.Alloc()
		if grown {
			c.nodes = append(c.nodes, vllmNode{})
		}
		c.index.Put(key, n)
		c.nodes[n] = vllmNode{key: key, list: t1}
		c.slots.PushBack(&c.lists[t1], n)
	}
	c.nodes[n].ready = false
	c.cached++
}

// eligible reports whether node n may be a victim: ready and not offered.
func (c *vllmCPU) eligible(n int32) bool {
	nd := &c.nodes[n]
	return nd.ready && c.protected.Ref(nd.key) == nil
}

// next returns the first eligible node of list l after node from (from
// the front for dlist.None), or dlist.None.
func (c *vllmCPU) next(l uint8, from int32) int32 {
	n := c.lists[l].Front
	if from != dlist.None {
		n = c.slots.Next(from)
	}
	for ; n != dlist.None; n = c.slots.Next(n) {
		if c.eligible(n) {
			return n
		}
	}
	return dlist.None
}

// evict frees need blocks, the policy's evict(need, protected) with the
// keys of the current store protected, and reports whether it could; if
// not, nothing changed.
func (c *vllmCPU) evict(need int) bool {
	c.chosen = c.chosen[:0]
	at := [2]int32{dlist.None, dlist.None} // the last chosen of t1 and t2
	vt1 := c.lists[t1].Len
	for range need {
		if !c.arc {
			n := c.next(t1, at[t1])
			if n == dlist.None {
				return false
			}
			at[t1] = n
			c.chosen = append(c.chosen, n)
			continue
		}
		n := dlist.None
		if vt1 >= int(c.p) {
			if n = c.next(t1, at[t1]); n != dlist.None {
				at[t1] = n
				vt1--
			}
		}
		if n == dlist.None {
			if n = c.next(t2, at[t2]); n == dlist.None {
				return false
			}
			at[t2] = n
		}
		c.chosen = append(c.chosen, n)
	}
	for _, n := range c.chosen {
		c.evicted = append(c.evicted, c.nodes[n].key)
		c.cached--
		if !c.arc {
			c.free(n)
			continue
		}
		c.move(n, b1+c.nodes[n].list) // t1 -> b1, t2 -> b2
	}
	for _, l := range []uint8{b1, b2} {
		for c.lists[l].Len > c.capacity {
			c.free(c.lists[l].Front)
		}
	}
	return true
}

// free forgets node n.
func (c *vllmCPU) free(n int32) {
	c.slots.Remove(&c.lists[c.nodes[n].list], n)
	c.index.Del(c.nodes[n].key)
	c.slots.Free(n)
}
