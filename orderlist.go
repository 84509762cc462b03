package kvevict

import "github.com/sagellm/kvevict/internal/lists"

// listOrder is the order of an Index of ARC, S3-FIFO or SIEVE: the
// history's lists choose the victims among the marked nodes, as in a
// Policy's selection (selectAdaptive), so an eviction costs the steps the
// history takes from its lists' tails. A candidate is ranked by marking
// its node.
type listOrder struct {
	lists lists.ListHistory
	t     *lists.Table
	st    *[]markState // the Index's, by slot: each candidate's node
}

// insert marks the node of the candidate in slot. O(1).
func (o *listOrder) insert(slot int32) { o.t.Mark((*o.st)[slot].node, slot) }

// remove unmarks the node of the candidate in slot, if it has one. O(1).
func (o *listOrder) remove(slot int32) {
	if n := (*o.st)[slot].node; n >= 0 {
		o.t.Unmark(n)
	}
}

// next takes the lists' next victim. O(steps from the lists' tails).
func (o *listOrder) next() int32 { return o.t.Slab[nextListVictim(o.lists)].Cand }
