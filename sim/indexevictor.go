package sim

import "github.com/sagellm/kvevict"

// indexEvictor is the sequence and tail granularities of [Serve] over a
// [kvevict.Index]: the candidates a [SequenceEvictor] builds at every
// eviction (a sequence's cached blocks, head first; the running sequences,
// referenced), kept in the index as the pool changes, so that an eviction
// costs O(k log n) for k victims rather than a pass over the pool. It picks
// the victims a SequenceEvictor over a Policy of the same strategy and
// options picks: an Index picks as SelectVictims does, and the adaptive
// strategies see the same requests (Access) and the same candidates.
type indexEvictor struct {
	x       *kvevict.Index
	partial bool // the candidates allow partial eviction: GranularityTail
	victims []kvevict.Victim
}

func newIndexEvictor(x *kvevict.Index, partial bool) *indexEvictor {
	return &indexEvictor{x: x, partial: partial}
}

// Evict takes need blocks from the index's unreferenced candidates.
func (e *indexEvictor) Evict(_ *EvictionState, need int) (Eviction, error) {
	res, err := e.x.EvictAppend(e.victims[:0], need)
	if err != nil {
		return Eviction{}, err
	}
	e.victims = res.Victims
	out := Eviction{Elapsed: res.Elapsed, Blocks: make([]int, 0, res.FreedBlocks)}
	for _, v := range res.Victims {
		out.Blocks = append(out.Blocks, v.Blocks...)
	}
	clear(e.victims) // drop the references to the blocks
	return out, nil
}

// Access forwards to Index.UpdateAccess, as SequenceEvictor forwards to
// Policy.UpdateAccess.
func (e *indexEvictor) Access(owner uint64) { e.x.UpdateAccess(owner) }

// Admit and Release do nothing: running and owner follow the pool.
func (e *indexEvictor) Admit(uint64, []uint64, int64, kvevict.Priority) {}
func (e *indexEvictor) Release(uint64, int64)                           {}

func (e *indexEvictor) running(s *sequence, prio kvevict.Priority) {
	c := kvevict.Candidate{
		ID: s.id, Blocks: s.blocks, LastAccess: s.last, CreatedAt: s.admitted,
		Priority: prio, SeqLen: s.tokens, MaxLen: s.maxLen, RefCount: 1,
	}
	if _, held := e.x.Get(s.id); held {
		must(e.x.Update(c))
	} else {
		must(e.x.Add(c)) // admitted: a new id
	}
}

func (e *indexEvictor) owner(id uint64, o *owner) {
	if o == nil {
		e.x.Remove(id)
		return
	}
	must(e.x.Update(e.cached(id, o)))
}

// cached is owner id's candidate, as SequenceEvictor builds it, with its
// own copy of the blocks: the pool edits o.blocks in place, which an index
// must not see.
func (e *indexEvictor) cached(id uint64, o *owner) kvevict.Candidate {
	return kvevict.Candidate{
		ID: id, Blocks: o.held(nil), LastAccess: o.released, CreatedAt: o.admitted,
		AccessCount: o.accessCount, Priority: o.priority, SeqLen: o.seqLen, MaxLen: o.maxLen,
		AllowPartial: e.partial,
	}
}

// must panics on an error the pool's own bookkeeping rules out.
func must(err error) {
	if err != nil {
		panic("sim: the index evictor lost the pool: " + err.Error())
	}
}
