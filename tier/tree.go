package tier

import (
	"fmt"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/prefix"
)

// Tree is a hierarchy whose GPU is a prefix tree ([prefix.Tree]), as an
// engine's prefix cache keeps it: the tree holds the GPU's blocks and
// evicts leaves first, and a [Hierarchy] with Config.ExternalGPU keeps the
// tiers below it. A cluster's engines (package sim) and a published pool
// (the kvevict command's publish) are served by one. Not safe for
// concurrent use.
type Tree struct {
	tree    *prefix.Tree
	h       *Hierarchy
	events  func(prefix.Event) // the caller's, for the tree's events
	held    []prefix.Event     // the tree's events during one request's Admit
	victims []uint64           // the tree's victims in one request
	stored  int64              // blocks the tree stored
}

// NewTree returns an empty tree over empty tiers. cfg.Levels[0] is the
// tree: its capacity, its strategy (one a prefix tree ranks by: see
// [prefix.New]) and its Options ([prefix.WithStrategyOptions]); the other
// levels are the tiers below it, configured as [New] takes them, with
// ExternalGPU whatever cfg says. gpuEvents, if not nil, receives the
// tree's events and cfg.Events the tiers' (see [Tree.Request] for their
// order).
func NewTree(cfg Config, gpuEvents func(prefix.Event)) (*Tree, error) {
	cfg.ExternalGPU = true
	h, err := New(cfg)
	if err != nil {
		return nil, err
	}
	t := &Tree{h: h, events: gpuEvents}
	gpu := cfg.Levels[0]
	t.tree, err = prefix.New(gpu.Strategy, gpu.Capacity, prefix.WithStrategyOptions(gpu.Options...), prefix.WithEvents(t.hold))
	if err != nil {
		return nil, fmt.Errorf("tier 0 (%s): %w", gpu.Medium, err)
	}
	return t, nil
}

// hold keeps the tree's event for Request to deliver, noting its victims.
func (t *Tree) hold(e prefix.Event) {
	switch e.Kind {
	case prefix.Removed:
		t.victims = append(t.victims, e.Hashes...)
	case prefix.Stored:
		t.stored += int64(len(e.Hashes))
	}
	t.held = append(t.held, e)
}

// Request serves one request's blocks at a, as an engine does: the tree's
// resident prefix of hashes, then the run after it on each lower tier
// ([Hierarchy.LookupBelow]), loaded ([Hierarchy.Load]); the tree admits
// the blocks ([prefix.Tree.Admit]), its victims are demoted
// ([Hierarchy.Demote]) and the blocks are offered below
// ([Hierarchy.Offer]). It returns where the blocks were found, Runs[0]
// being the tree's hits; the Match is valid until the next call.
//
// The events come in the order an engine makes the changes: the loads'
// (an exclusive hierarchy's copies below dropped), the demotion's, then
// the tree's (its victims freed, the request's blocks stored), then the
// offer's. The tree's come after the demotion's, where the tree made them
// before, so that a victim is stored below before it leaves the GPU, as
// each tier's demotions are (Config.Events). An access with hints gives
// them to the tiers below too ([Hierarchy.RequestHints]), on the tree's
// ticks, from then on for every request; a victim of the tree goes down
// without its hints, which the tree keeps to itself. Its cost is the
// tree's Admit and each tier's store of the blocks it receives
// ([Cache.Request]).
func (t *Tree) Request(hashes []uint64, a prefix.Access) (*Match, error) {
	if a.Hints != (kvevict.Hints{}) || t.h.hinted {
		// The tiers below take the request's hints on the tree's ticks.
		if err := t.h.Hint(hashes, a.Hints, a.Tick); err != nil {
			return nil, err
		}
		defer t.h.unhint()
	}
	m := t.h.LookupBelow(hashes, t.tree.Peek(hashes))
	if err := t.h.Load(hashes, m); err != nil {
		return nil, err
	}
	t.victims = t.victims[:0]
	_, err := t.tree.Admit(hashes, a)
	if err == nil {
		err = t.h.Demote(t.victims)
	}
	for _, e := range t.held {
		if t.events != nil {
			t.events(e)
		}
	}
	clear(t.held) // the callee owns the hashes
	t.held = t.held[:0]
	if err != nil {
		return nil, err
	}
	if err := t.h.Offer(hashes); err != nil {
		return nil, err
	}
	return m, nil
}

// Peek returns how many leading blocks of hashes the tree holds: the GPU
// hits a request of them would get. It changes nothing. O(len(hashes)).
func (t *Tree) Peek(hashes []uint64) int { return t.tree.Peek(hashes) }

// Len returns how many blocks tier i holds, the tree's for i = 0. O(1).
func (t *Tree) Len(i int) int {
	if i == 0 {
		return t.tree.Len()
	}
	return t.h.Len(i)
}

// Contains reports whether tier i below the tree (i >= 1) holds block id.
// O(1).
func (t *Tree) Contains(i int, id uint64) bool { return i > 0 && t.h.Contains(i, id) }

// Stats returns each tier's counts, top first, the tree's blocks stored
// among the GPU's.
func (t *Tree) Stats() []Stats {
	st := t.h.Stats()
	st[0].Stored = t.stored
	return st
}
