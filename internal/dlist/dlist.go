// Package dlist threads doubly linked lists through a slab of int32-indexed
// slots, as container/list does through pointers: O(1) push and remove, no
// allocation per element, and no pointers for the garbage collector to
// follow. [Slots] hands out the slab's slots, reusing freed ones.
//
// The links live in a slice of their own, indexed like the caller's slab,
// rather than in the slab's elements: a walk along a list then reads eight
// bytes per slot, and the list's operations, which take no function to
// reach a slot's links, inline into the caller. A caller that reads a few
// bytes of its own per slot whenever it follows or moves a slot's links
// keeps them beside the links, as the value of a [Node], so that one cache
// line holds both; [Links] is the slice of nodes without a value. One
// slice of nodes can thread any number of disjoint lists; each [List] is
// one list's ends and length. A slot is in at most one list of a slice at a
// time, and the caller knows which.
package dlist

import "fmt"

// None is the index past the ends of a list: the Prev of its front, the Next
// of its back, and both ends of an empty list.
const None int32 = -1

// Node is one slot's neighbours in its list, Prev toward the front and
// Next toward the back (None past the ends), and Val, the caller's value
// for the slot, which the list's operations leave as it is. Val comes
// first so that a Node without a value (a [Link]) is eight bytes: a
// zero-size last field would be padded.
type Node[V any] struct {
	Val        V
	Prev, Next int32
}

// Link is a node without a value: one slot's neighbours alone.
type Link = Node[struct{}]

// Nodes holds the node of every slot of a slab, indexed like it. The caller
// grows it with its slab.
type Nodes[V any] []Node[V]

// Links holds the links of every slot of a slab, without values.
type Links = Nodes[struct{}]

// List is the ends and length of one list threaded through a [Nodes].
// A list is empty when made by [Empty]; the zero List is not a valid list.
type List struct {
	Front, Back int32
	Len         int
}

// Empty returns an empty list.
func Empty() List { return List{Front: None, Back: None} }

// PushBack links slot n, which is in no list, at the back of l. O(1).
func (s Nodes[V]) PushBack(l *List, n int32) {
	s[n].Prev, s[n].Next = l.Back, None
	if l.Back != None {
		s[l.Back].Next = n
	} else {
		l.Front = n
	}
	l.Back = n
	l.Len++
}

// PushFront links slot n, which is in no list, at the front of l. O(1).
func (s Nodes[V]) PushFront(l *List, n int32) {
	s[n].Prev, s[n].Next = None, l.Front
	if l.Front != None {
		s[l.Front].Prev = n
	} else {
		l.Back = n
	}
	l.Front = n
	l.Len++
}

// InsertAfter links slot n, which is in no list, right after slot at of l,
// or at the front of l if at is None. O(1).
func (s Nodes[V]) InsertAfter(l *List, at, n int32) {
	if at == None {
		s.PushFront(l, n)
		return
	}
	next := s[at].Next
	if next == None {
		s.PushBack(l, n)
		return
	}
	s[n].Prev, s[n].Next = at, next
	s[at].Next = n
	s[next].Prev = n
	l.Len++
}

// Prev returns the neighbour of slot n toward the front of its list, or
// None.
func (s Nodes[V]) Prev(n int32) int32 { return s[n].Prev }

// Remove unlinks slot n from l, which holds it, and leaves both its links
// None. O(1).
func (s Nodes[V]) Remove(l *List, n int32) {
	x := &s[n]
	if x.Prev != None {
		s[x.Prev].Next = x.Next
	} else {
		l.Front = x.Next
	}
	if x.Next != None {
		s[x.Next].Prev = x.Prev
	} else {
		l.Back = x.Prev
	}
	x.Prev, x.Next = None, None
	l.Len--
}

// Slots hands out the slots of a slab and holds their links. A slot given
// back by Free is handed out again, most recent first, before the slab
// grows; the free slots are chained through their Next links, which no list
// uses while they are free. The zero Slots is an empty slab.
type Slots struct {
	Links       // the links of every slot, free or not
	free  int32 // 1 + the most recently freed slot; 0 if none is free
	nFree int   // free slots
}

// Alloc returns a slot in no list: a freed one if any, with grown false, or
// a new one at index len(Links) before the call, with grown true, for which
// the caller appends an element to its slab. O(1) amortized.
func (s *Slots) Alloc() (n int32, grown bool) {
	if s.free > 0 {
		n = s.free - 1
		s.free = s.Links[n].Next + 1
		s.Links[n].Next = None
		s.nFree--
		return n, false
	}
	n = int32(len(s.Links))
	s.Links = append(s.Links, Link{Prev: None, Next: None})
	return n, true
}

// Free gives back slot n, which is in no list. O(1).
func (s *Slots) Free(n int32) {
	s.Links[n] = Link{Prev: None, Next: s.free - 1}
	s.free = n + 1
	s.nFree++
}

// Reset frees every slot and empties the slab, keeping its memory.
func (s *Slots) Reset() {
	s.Links, s.free, s.nFree = s.Links[:0], 0, 0
}

// FreeLen returns how many slots are free. O(1).
func (s *Slots) FreeLen() int { return s.nFree }

// Next returns the neighbour of slot n toward the back of its list, or None.
func (s Nodes[V]) Next(n int32) int32 { return s[n].Next }

// Check verifies l: linked both ways from Front to Back, Len slots long,
// every slot within s. It calls visit, if not nil, on each slot from front
// to back, stopping at the first error visit returns. O(len). For tests.
func (s Nodes[V]) Check(l *List, visit func(n int32) error) error {
	count, prev := 0, None
	for n := l.Front; n != None; n = s[n].Next {
		if n < 0 || int(n) >= len(s) {
			return fmt.Errorf("dlist: slot %d outside the %d links", n, len(s))
		}
		if s[n].Prev != prev {
			return fmt.Errorf("dlist: slot %d's prev is %d, want %d", n, s[n].Prev, prev)
		}
		if count++; count > len(s) {
			return fmt.Errorf("dlist: a cycle through slot %d", n)
		}
		if visit != nil {
			if err := visit(n); err != nil {
				return err
			}
		}
		prev = n
	}
	if prev != l.Back {
		return fmt.Errorf("dlist: back %d, walk ended at %d", l.Back, prev)
	}
	if count != l.Len {
		return fmt.Errorf("dlist: len %d, counted %d", l.Len, count)
	}
	return nil
}

// CheckFree verifies the chain of free slots: FreeLen long, within Links,
// each slot's Prev None. O(free). For tests.
func (s *Slots) CheckFree() error {
	count := 0
	for n := s.free - 1; n != None; n = s.Links[n].Next {
		if n < 0 || int(n) >= len(s.Links) {
			return fmt.Errorf("dlist: free slot %d outside the %d links", n, len(s.Links))
		}
		if s.Links[n].Prev != None {
			return fmt.Errorf("dlist: free slot %d has prev %d", n, s.Links[n].Prev)
		}
		if count++; count > len(s.Links) {
			return fmt.Errorf("dlist: the free chain cycles through slot %d", n)
		}
	}
	if count != s.nFree {
		return fmt.Errorf("dlist: %d free slots counted, %d chained", s.nFree, count)
	}
	return nil
}
