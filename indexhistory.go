package kvevict

import "slices"

// An Index of an adaptive strategy (ARC, S3-FIFO, SIEVE, Auto) keeps the
// strategy's history, the same one a Policy keeps. ARC's, S3-FIFO's and
// SIEVE's lists choose the victims; Auto's are the smallest keys, which
// the index finds through groups of its marked candidates (indexauto.go).
// A Policy learns at each selection which nodes of the history are its
// candidates, marking them in O(n); the index keeps the marks between
// evictions instead, so an eviction costs what the history's own lists
// cost (a few steps from their tails), whatever the number of sequences.
//
// The marks follow one rule: a node is marked when the history holds its id
// as resident and the index holds it evictable. The index sets and clears
// them as candidates change (insert, detach), and hears from the table
// (tableObserver) when the history itself moves a node: into a ghost list,
// out of the table, or into the cache by a request. A held id that the
// history does not hold as resident waits, as a Policy's candidate would,
// to be admitted at the next eviction, oldest LastAccess first.

// follow makes the index rank by history h.
func (x *Index) follow(h history) {
	x.hist = h
	t := h.nodes()
	t.nextEpoch() // the one epoch of the index's marks
	t.observer = x
}

// UpdateAccess records a request for sequence id, held or not, as
// [Policy.UpdateAccess] does for an adaptive strategy: call it for every
// request before the Evict that makes room for it, and before Add for a
// sequence the index does not hold (ARC adapts to a request for a
// sequence it evicted lately). A key strategy learns nothing from it: its
// order follows the fields that Add, Touch and Update set. It costs what
// Policy.UpdateAccess costs: O(1), and for Auto O(log s) when the request
// falls in its miniature caches' sample of s ids.
func (x *Index) UpdateAccess(id uint64) {
	if x.hist != nil {
		x.hist.access(id)
	}
	if x.groups != nil {
		x.requested(id)
	}
}

// takeFromHistory is Evict's choice for an adaptive strategy: as
// selector.selectAdaptive, over the marks the index keeps, for ARC,
// S3-FIFO and SIEVE, and by Auto's key over its groups. The evictable
// blocks must cover required.
func (x *Index) takeFromHistory(dst []Victim, required int) (_ []Victim, freed, partial int, err error) {
	if x.auto != nil {
		return x.takeAuto(dst, required)
	}
	h := x.lists
	t := h.nodes()
	// A pending request that the index holds is resident: placed before
	// the others are admitted, as a Policy does.
	if id, ok := h.pendingID(); ok {
		if _, held := x.slots.Get(id); held {
			h.commit()
		}
	}
	x.admitWaiting()
	first := len(dst)
	var cutNode int32 = -1 // the victim that keeps a head of its blocks: the last, if any
	for freed < required {
		n := h.victim()
		if n < 0 {
			panic("kvevict: the index's history lost an evictable candidate")
		}
		x.clearMark(n)
		c := &x.nodes[t.slab[n].cand].c
		blocks, part := take(c, required-freed)
		if part {
			partial++
			cutNode = n
		} else {
			t.choose(n)
		}
		dst = append(dst, Victim{ID: c.ID, Blocks: blocks})
		freed += len(blocks)
	}
	err = x.freed.distinct(dst[first:])
	chosen := t.endChoice()
	if err != nil {
		// Nothing is evicted: the victims are possible victims again.
		for _, n := range chosen {
			x.setMark(n, t.slab[n].cand)
		}
		if cutNode >= 0 {
			x.setMark(cutNode, t.slab[cutNode].cand)
		}
		h.finish()
		clear(dst[first:])
		return dst[:first], 0, 0, err
	}
	cutSlot := int32(-1)
	if cutNode >= 0 {
		cutSlot = t.slab[cutNode].cand
	}
	for _, n := range chosen {
		slot := t.slab[n].cand
		x.cut(slot, len(x.nodes[slot].c.Blocks))
		h.evict(n)
		x.drop(slot)
	}
	if cutSlot >= 0 {
		x.cut(cutSlot, len(dst[len(dst)-1].Blocks))
	}
	h.finish()
	// A trimmed victim keeps its head and stays evictable: a candidate of
	// the next eviction again.
	if cutSlot >= 0 {
		x.markHeld(cutSlot)
	}
	return dst, freed, partial, nil
}

// takeAuto is Evict's choice for Auto: the greedy selection by Auto's key
// over the groups, taken once the victims are known to free distinct
// blocks. The evictable blocks must cover required.
func (x *Index) takeAuto(dst []Victim, required int) (_ []Victim, freed, partial int, err error) {
	a := x.auto
	x.admitWaiting()
	ranked := x.rankAuto(required)
	first := len(dst)
	for i := range ranked {
		c := &x.nodes[ranked[i].Slot].c
		blocks, _ := take(c, required-freed)
		dst = append(dst, Victim{ID: c.ID, Blocks: blocks})
		freed += len(blocks)
	}
	if freed < required {
		panic("kvevict: the index's groups lost an evictable candidate")
	}
	if err = x.freed.distinct(dst[first:]); err != nil {
		a.finish()
		clear(dst[first:])
		return dst[:first], 0, 0, err
	}
	a.evicting()
	cutSlot := int32(-1)
	for i := range ranked {
		slot := ranked[i].Slot
		n := a.lookup(x.nodes[slot].c.ID)
		x.clearMark(n)
		if _, part := x.cut(slot, len(dst[first+i].Blocks)); part {
			partial++
			cutSlot = slot
			continue
		}
		a.evict(n, lonePartial(&x.nodes[slot].c)) // before the slot is freed
		x.drop(slot)
	}
	a.finish()
	// A trimmed victim keeps its head and stays evictable: a candidate of
	// the next eviction again.
	if cutSlot >= 0 {
		x.markHeld(cutSlot)
	}
	return dst, freed, partial, nil
}

// admitWaiting admits into the history the held ids it does not hold as
// resident, oldest LastAccess first (ties by ID), as a Policy admits its
// new candidates. One without blocks keeps waiting: a Policy skips empty
// candidates.
func (x *Index) admitWaiting() {
	if len(x.waiting) == 0 {
		return
	}
	t := x.hist.nodes()
	admit := x.waiting
	x.waiting = x.spare[:0] // the observer may add to it while admit is read
	keep := admit[:0]
	for _, slot := range admit {
		n := &x.nodes[slot]
		if !n.waiting {
			continue // released since, or listed twice
		}
		if len(n.c.Blocks) == 0 {
			x.waiting = append(x.waiting, slot)
			continue
		}
		n.waiting = false
		if k := t.lookup(n.c.ID); k >= 0 && t.resident(k) {
			continue
		}
		keep = append(keep, slot)
	}
	slices.SortFunc(keep, func(a, b int32) int { return byRecency(&x.nodes[a].c, &x.nodes[b].c) })
	for _, slot := range keep {
		x.hist.admit(x.nodes[slot].c.ID) // the observer marks it
	}
	x.spare = keep[:0]
}

// wait lists slot for admission at the next eviction, once.
func (x *Index) wait(slot int32) {
	n := &x.nodes[slot]
	if n.waiting {
		return
	}
	n.waiting = true
	x.waiting = x.listSlot(x.waiting, slot, func(n *indexNode) *bool { return &n.waiting })
}

// listSlot appends slot to list, a list of slots whose nodes have their
// flag set, and keeps the list within a constant factor of the index:
// released slots leave stale entries behind, which a compaction drops,
// with the repeats of a slot reused since.
func (x *Index) listSlot(list []int32, slot int32, flag func(*indexNode) *bool) []int32 {
	list = append(list, slot)
	if len(list) <= 2*len(x.nodes)+16 {
		return list
	}
	live := list[:0]
	for _, s := range list {
		if f := flag(&x.nodes[s]); *f {
			*f = false // so a repeat is dropped
			live = append(live, s)
		}
	}
	for _, s := range live {
		*flag(&x.nodes[s]) = true
	}
	return live
}

// admitIfNew lists a just added slot for admission unless the history
// holds its id as resident already (a request it placed).
func (x *Index) admitIfNew(slot int32) {
	t := x.hist.nodes()
	if n := t.lookup(x.nodes[slot].c.ID); n < 0 || !t.resident(n) {
		x.wait(slot)
	}
}

// markHeld files the evictable candidate in slot: marked if the history
// holds it as resident; otherwise it waits for admission, which marks it.
func (x *Index) markHeld(slot int32) {
	x.nodes[slot].at = inHistory
	t := x.hist.nodes()
	if n := t.lookup(x.nodes[slot].c.ID); n >= 0 && t.resident(n) {
		x.setMark(n, slot)
	}
}

// unmarkHeld takes the candidate in slot out of the possible victims.
func (x *Index) unmarkHeld(slot int32) {
	x.nodes[slot].at = held
	t := x.hist.nodes()
	if n := t.lookup(x.nodes[slot].c.ID); n >= 0 {
		x.clearMark(n)
	}
}

// linked keeps node n's mark true to the rule when the history moved it.
func (x *Index) linked(n int32) {
	t := x.hist.nodes()
	slot, ok := x.slots.Get(t.slab[n].id)
	if !ok {
		return
	}
	if t.resident(n) {
		if x.nodes[slot].at == inHistory {
			x.setMark(n, slot)
		}
		return
	}
	x.clearMark(n)
	x.wait(slot)
}

// setMark marks node n as the evictable candidate in slot.
func (x *Index) setMark(n, slot int32) {
	x.hist.nodes().mark(n, slot)
	if x.groups != nil {
		x.join(slot, n)
	}
}

// clearMark takes node n out of the possible victims.
func (x *Index) clearMark(n int32) {
	t := x.hist.nodes()
	if !t.marked(n) {
		return
	}
	if x.groups != nil {
		x.leave(t.slab[n].cand)
	}
	t.unmark(n)
}

// dropped lists a held id whose node the history forgot for admission:
// out of Auto's groups, as the forgotten node is out of the marks.
func (x *Index) dropped(id uint64) {
	if slot, ok := x.slots.Get(id); ok {
		if x.groups != nil {
			x.leave(slot)
		}
		x.wait(slot)
	}
}
