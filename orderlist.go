package kvevict

// listOrder is the order of an Index of ARC, S3-FIFO or SIEVE: the
// history's lists choose the victims among the marked nodes, as in a
// Policy's selection (selectAdaptive), so an eviction costs the steps the
// history takes from its lists' tails.
type listOrder struct {
	marks[unfollowed]
	lists listHistory
}

// unfollowed is the follower of a list order's marks: its lists need
// nothing beside the marks.
type unfollowed struct{}

func (unfollowed) marked(int32, int32) {}
func (unfollowed) unmarked(int32)      {}

func newListOrder(h listHistory) *listOrder {
	o := &listOrder{marks: newMarks(h, nil, nil, unfollowed{}), lists: h}
	o.t.observer = &o.marks
	return o
}

// update: the lists do not follow the candidates' fields.
func (o *listOrder) update(slot int32, _ int64) { o.marks.update(slot) }

// access is the paper's access. O(1).
func (o *listOrder) access(id uint64) { o.lists.access(id) }

// accessHashes: the lists know sequences by ID, not blocks by hash.
func (o *listOrder) accessHashes([]uint64) {}

func (o *listOrder) accepts(int32, uint64, uint64) error { return nil }

// begin places a pending request that the index holds, which is
// resident, before the others are admitted, as a Policy does.
func (o *listOrder) begin(int, int) {
	if id, ok := o.lists.pendingID(); ok {
		if _, held := o.find(id); held {
			o.lists.commit()
		}
	}
	o.admitWaiting()
}

func (o *listOrder) next() (int32, *Candidate) {
	slot := o.t.slab[nextListVictim(o.lists)].cand
	return slot, &o.slab[slot].c
}

// commit evicts the victims taken wholly from the history; a trimmed one
// keeps its head and is a possible victim of the next eviction again.
func (o *listOrder) commit(taken []int32, _ int, trimmed bool) {
	evictChosen(o.lists, trimmed)
	if trimmed {
		o.markHeld(taken[len(taken)-1])
	}
}

func (o *listOrder) rollback([]int32) { restoreChosen(o.lists) }

func (o *listOrder) check() error {
	_, err := o.marks.check()
	return err
}
