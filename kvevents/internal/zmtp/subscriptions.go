package zmtp

import (
	"slices"
	"strings"
	"sync"
)

// Subscriptions returns the distinct topic prefixes the connected
// subscribers hold, sorted. O(subscriptions).
func (p *Pub) Subscriptions() []string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []string
	for pp := range p.peers {
		pp.mu.Lock()
		for s := range pp.subs {
			out = append(out, s)
		}
		pp.mu.Unlock()
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// trie holds every subscriber's prefixes in a radix tree, so that
// matching a topic costs a walk down its bytes, whatever the number of
// subscribers and prefixes, as libzmq's trie does. Matching takes a read
// lock, so Sends do not wait for one another; a subscription's change
// takes the write lock for a walk down its prefix.
type trie struct {
	mu   sync.RWMutex
	root node
}

// node is a prefix: its parent's prefix and edge. peers hold exactly that
// prefix, each once.
type node struct {
	edge  string
	kids  []*node // by edge's first byte, ascending
	peers []*pubPeer
}

// kid returns the index of n's child whose edge starts with c, or where
// one would go.
func (n *node) kid(c byte) (int, bool) {
	return slices.BinarySearchFunc(n.kids, c, func(k *node, c byte) int { return int(k.edge[0]) - int(c) })
}

// add records that pp holds prefix; the caller adds it once.
func (t *trie) add(prefix string, pp *pubPeer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := &t.root
	for rest := prefix; rest != ""; {
		i, ok := n.kid(rest[0])
		if !ok {
			k := &node{edge: rest}
			n.kids = slices.Insert(n.kids, i, k)
			n = k
			break
		}
		k := n.kids[i]
		c := common(k.edge, rest)
		if c < len(k.edge) { // split k's edge where rest leaves it
			mid := &node{edge: k.edge[:c], kids: []*node{k}}
			k.edge = k.edge[c:]
			n.kids[i] = mid
			k = mid
		}
		n, rest = k, rest[c:]
	}
	n.peers = append(n.peers, pp)
}

// remove forgets that pp holds prefix, and prunes the nodes left empty.
func (t *trie) remove(prefix string, pp *pubPeer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	path := []*node{&t.root}
	n := &t.root
	for rest := prefix; rest != ""; {
		i, ok := n.kid(rest[0])
		if !ok || !strings.HasPrefix(rest, n.kids[i].edge) {
			return
		}
		n = n.kids[i]
		rest = rest[len(n.edge):]
		path = append(path, n)
	}
	i := slices.Index(n.peers, pp)
	if i < 0 {
		return
	}
	n.peers = slices.Delete(n.peers, i, i+1)
	if len(n.peers) == 0 {
		n.peers = nil
	}
	// Each node but the root keeps peers or two children; a node that
	// lost its reason to be is dropped or merged into its one child.
	for j := len(path) - 1; j > 0; j-- {
		n, parent := path[j], path[j-1]
		switch {
		case len(n.peers) > 0 || len(n.kids) > 1:
			return
		case len(n.kids) == 1:
			k := n.kids[0]
			k.edge = n.edge + k.edge
			i, _ := parent.kid(n.edge[0])
			parent.kids[i] = k
			return
		default:
			i, _ := parent.kid(n.edge[0])
			parent.kids = slices.Delete(parent.kids, i, i+1)
			if len(parent.kids) == 0 {
				parent.kids = nil
			}
		}
	}
}

// match calls fn once for each peer holding a prefix of topic.
func (t *trie) match(topic []byte, fn func(*pubPeer)) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var stack [8]*node
	hits := stack[:0]
	n := &t.root
	for rest := topic; ; {
		if len(n.peers) > 0 {
			hits = append(hits, n)
		}
		if len(rest) == 0 {
			break
		}
		i, ok := n.kid(rest[0])
		if !ok {
			break
		}
		k := n.kids[i]
		if len(rest) < len(k.edge) || string(rest[:len(k.edge)]) != k.edge {
			break
		}
		n, rest = k, rest[len(k.edge):]
	}
	if len(hits) == 1 {
		for _, pp := range hits[0].peers {
			fn(pp)
		}
		return
	}
	// A peer holding several prefixes of the topic gets it once.
	var seen map[*pubPeer]bool
	for _, n := range hits {
		for _, pp := range n.peers {
			if !seen[pp] {
				if seen == nil {
					seen = make(map[*pubPeer]bool)
				}
				seen[pp] = true
				fn(pp)
			}
		}
	}
}

// common returns the length of the longest common prefix of a and b.
func common(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
