package prefix

import "github.com/sagellm/kvevict/internal/rank"

// heapEntry is one unreferenced leaf with its key, kept beside the pointer
// so that comparisons stay in the heap's array.
type heapEntry struct {
	key rank.Key
	n   *node
}

// evictHeap is an indexed binary min-heap of the evictable leaves by (key,
// node id). Each node records its index, so a node whose key changed is
// fixed in place and a node that stopped being an evictable leaf is removed
// in O(log n): keys may move in either direction (MRU, FILO), and the heap
// is never rebuilt to stay correct.
type evictHeap []heapEntry

func (h evictHeap) less(i, j int) bool {
	return rank.Before(h[i].key, h[i].n.id, h[j].key, h[j].n.id)
}

func (h evictHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].n.heapIdx = i
	h[j].n.heapIdx = j
}

// push adds n with key k. O(log n).
func (h *evictHeap) push(n *node, k rank.Key) {
	n.heapIdx = len(*h)
	*h = append(*h, heapEntry{key: k, n: n})
	h.up(n.heapIdx)
}

// pop removes and returns the node with the smallest key. O(log n).
func (h *evictHeap) pop() *node {
	n := (*h)[0].n
	h.remove(n)
	return n
}

// replaceTop removes the smallest entry and adds n with key k in one
// sift: the common step of leaf-first eviction, where the parent of the
// popped leaf becomes a leaf. The parent usually shares the child's recency
// and so stays on top, making the step O(1) rather than two O(log n)
// passes. O(log n).
func (h evictHeap) replaceTop(n *node, k rank.Key) {
	h[0].n.heapIdx = -1
	h[0] = heapEntry{key: k, n: n}
	n.heapIdx = 0
	h.down(0)
}

// remove takes n out of the heap. O(log n).
func (h *evictHeap) remove(n *node) {
	i, last := n.heapIdx, len(*h)-1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = heapEntry{}
	*h = (*h)[:last]
	n.heapIdx = -1
	if i != last {
		h.fixAt(i)
	}
	if cap(*h) > heapShrinkAbove && len(*h) < cap(*h)/4 {
		*h = append(evictHeap(nil), (*h)...)
	}
}

// heapShrinkAbove is the capacity above which a heap that emptied to a
// quarter is copied into a smaller array, so one burst does not pin memory.
const heapShrinkAbove = 1 << 12

// fix sets n's key to k and restores the order. O(log n).
func (h evictHeap) fix(n *node, k rank.Key) {
	h[n.heapIdx].key = k
	h.fixAt(n.heapIdx)
}

func (h evictHeap) fixAt(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

// init establishes the heap order after keys changed wholesale. O(n).
func (h evictHeap) init() {
	for i := range h {
		h[i].n.heapIdx = i
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h evictHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

// down sifts i toward the leaves and reports whether it moved.
func (h evictHeap) down(i0 int) bool {
	i, n := i0, len(h)
	for {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && h.less(r, j) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
