package tier

import (
	"fmt"
	"time"

	"github.com/sagellm/kvevict"
)

// sliceStore is the contract path: the residents as a candidate slice,
// handed whole to Policy.SelectVictims at each eviction.
type sliceStore struct {
	policy kvevict.Policy
	cands  []kvevict.Candidate // the residents, in no order
	index  map[uint64]int      // resident id -> index in cands
}

func (s *sliceStore) access(id uint64) { s.policy.UpdateAccess(id) }

func (s *sliceStore) reference(_ int, id uint64) bool {
	k, ok := s.index[id]
	if ok {
		s.cands[k].RefCount = 1
	}
	return ok
}

func (s *sliceStore) unreference(id uint64) { s.cands[s.index[id]].RefCount = 0 }

func (s *sliceStore) evict(need int, now int64, clocked bool) ([]kvevict.Victim, time.Duration, error) {
	cands := s.cands
	if clocked {
		// A Policy's now is its candidates' latest LastAccess: a
		// referenced candidate of no block tells it.
		cands = append(cands, kvevict.Candidate{ID: clockID, LastAccess: now, RefCount: 1})
		defer func() { cands[len(cands)-1] = kvevict.Candidate{} }()
	}
	res, err := s.policy.SelectVictims(cands, need)
	if err == nil {
		err = s.checkVictims(res.Victims, need)
	}
	if err != nil {
		return nil, 0, err
	}
	for _, v := range res.Victims {
		s.drop(v.ID)
	}
	return res.Victims, res.Elapsed, nil
}

func (s *sliceStore) enter(_ int, id uint64, block []int, created int64) error {
	s.index[id] = len(s.cands)
	s.cands = append(s.cands, kvevict.Candidate{ID: id, Blocks: block, CreatedAt: created, RefCount: 1})
	return nil
}

func (s *sliceStore) touch(_ int, id uint64, tick int64, prio kvevict.Priority, h *kvevict.Hints, hit bool) error {
	c := &s.cands[s.index[id]]
	if hit {
		c.AccessCount++
	}
	c.Hints = *h
	c.LastAccess = tick
	c.RefCount = 0
	c.Priority = prio // of the latest request to use it
	c.LastBlockPartial = false
	return nil
}

func (s *sliceStore) markPartial(id uint64) bool {
	k, ok := s.index[id]
	if ok {
		s.cands[k].LastBlockPartial = true
	}
	return ok
}

func (s *sliceStore) uses(id uint64) int {
	k, ok := s.index[id]
	if !ok {
		return 0
	}
	return int(s.cands[k].AccessCount) + 1
}

func (s *sliceStore) contains(id uint64) bool {
	_, ok := s.index[id]
	return ok
}

func (s *sliceStore) len() int { return len(s.cands) }

// checkVictims returns an error unless victims are distinct unreferenced
// residents, at least need of them. It marks each victim referenced (a
// second mention is then caught) and clears the marks if it fails; the
// caller removes the victims if it succeeds. O(len(victims)).
func (s *sliceStore) checkVictims(victims []kvevict.Victim, need int) error {
	var err error
	checked := 0
	for _, v := range victims {
		k, ok := s.index[v.ID]
		if !ok || s.cands[k].RefCount != 0 {
			err = fmt.Errorf("victim %d is not an unreferenced resident, or chosen twice", v.ID)
			break
		}
		s.cands[k].RefCount = 1
		checked++
	}
	if err == nil && checked < need {
		err = fmt.Errorf("selection freed %d entries, %d needed", checked, need)
	}
	if err != nil {
		for _, v := range victims[:checked] {
			s.cands[s.index[v.ID]].RefCount = 0
		}
	}
	return err
}

func (s *sliceStore) remove(id uint64) (slot int, ok bool) {
	k, ok := s.index[id]
	if !ok || s.cands[k].RefCount != 0 {
		return 0, false
	}
	slot = s.cands[k].Blocks[0]
	s.drop(id)
	return slot, true
}

// drop removes resident id, moving the last resident into its place. O(1).
func (s *sliceStore) drop(id uint64) {
	k := s.index[id]
	last := len(s.cands) - 1
	if k != last {
		s.cands[k] = s.cands[last]
		s.index[s.cands[k].ID] = k
	}
	s.cands[last] = kvevict.Candidate{}
	s.cands = s.cands[:last]
	delete(s.index, id)
}

func (s *sliceStore) check(c *Cache, _ []bool) error {
	if len(s.index) != len(s.cands) {
		return fmt.Errorf("tier: cache: %d residents, %d indexed", len(s.cands), len(s.index))
	}
	for i := range s.cands {
		cand := &s.cands[i]
		if k, ok := s.index[cand.ID]; !ok || k != i || cand.RefCount != 0 || len(cand.Blocks) != 1 ||
			c.owner[cand.Blocks[0]] != cand.ID {
			return fmt.Errorf("tier: cache: resident %d at %d: index %d, %d references, blocks %v",
				cand.ID, i, k, cand.RefCount, cand.Blocks)
		}
	}
	return nil
}

// indexStore keeps the residents in a kvevict.Index, ordered between
// evictions.
type indexStore struct {
	x       *kvevict.Index
	victims []kvevict.Victim // the latest eviction's, reused
	// clock says the index holds the candidate of ID clockID, pinned and
	// of no block, whose touches tell it the time (clocked evictions).
	clock bool
	// held[j] is the request's jth distinct block as reference or enter
	// left it, so that touch needs no second look-up: nothing but touch
	// changes a referenced candidate until then.
	held []kvevict.Candidate
}

// hold keeps c as the request's jth block.
func (s *indexStore) hold(j int, c kvevict.Candidate) {
	for j >= len(s.held) {
		s.held = append(s.held, kvevict.Candidate{})
	}
	s.held[j] = c
}

func (s *indexStore) access(id uint64) { s.x.UpdateAccess(id) }

func (s *indexStore) reference(j int, id uint64) bool {
	c, ok := s.x.Get(id)
	if !ok || s.x.Lock(id) != nil {
		return false // a miss: no error to build
	}
	s.hold(j, c)
	return true
}

func (s *indexStore) unreference(id uint64) { _ = s.x.Unlock(id) } // held and referenced: cannot fail

func (s *indexStore) evict(need int, now int64, clocked bool) ([]kvevict.Victim, time.Duration, error) {
	if clocked {
		// An Index's now is the latest tick it was told.
		var err error
		if !s.clock {
			err = s.x.Add(kvevict.Candidate{ID: clockID, Pinned: true, LastAccess: now})
			s.clock = err == nil
		} else {
			err = s.x.Touch(clockID, now)
		}
		if err != nil {
			return nil, 0, err
		}
	}
	res, err := s.x.EvictAppend(s.victims[:0], need)
	if err != nil {
		return nil, 0, err
	}
	s.victims = res.Victims
	return res.Victims, res.Elapsed, nil
}

func (s *indexStore) enter(j int, id uint64, block []int, created int64) error {
	c := kvevict.Candidate{ID: id, Blocks: block, CreatedAt: created, RefCount: 1}
	s.hold(j, c)
	return s.x.Add(c)
}

func (s *indexStore) touch(j int, _ uint64, tick int64, prio kvevict.Priority, h *kvevict.Hints, hit bool) error {
	c := s.held[j]
	s.held[j] = kvevict.Candidate{} // drop the Blocks reference
	if hit {
		c.AccessCount++
	}
	c.Hints = *h
	c.LastAccess = tick
	c.RefCount = 0
	c.Priority = prio
	c.LastBlockPartial = false
	return s.x.Update(c)
}

func (s *indexStore) markPartial(id uint64) bool {
	c, ok := s.x.Get(id)
	if ok {
		c.LastBlockPartial = true
		_ = s.x.Update(c) // held, and its fields valid: cannot fail
	}
	return ok
}

func (s *indexStore) remove(id uint64) (slot int, ok bool) {
	c, ok := s.x.Get(id)
	if !ok || c.RefCount != 0 {
		return 0, false
	}
	s.x.Remove(id)
	return c.Blocks[0], true
}

func (s *indexStore) uses(id uint64) int {
	c, ok := s.x.Get(id)
	if !ok {
		return 0
	}
	return int(c.AccessCount) + 1
}

func (s *indexStore) contains(id uint64) bool {
	_, ok := s.x.Get(id)
	return ok
}

func (s *indexStore) len() int {
	if s.clock {
		return s.x.Len() - 1
	}
	return s.x.Len()
}

func (s *indexStore) check(c *Cache, free []bool) error {
	for slot := range c.slots {
		if free[slot] {
			continue
		}
		if cand, _ := s.x.Get(c.owner[slot]); cand.RefCount != 0 || len(cand.Blocks) != 1 || cand.Blocks[0] != slot {
			return fmt.Errorf("tier: cache: resident %d: %d references, blocks %v, slot %d", cand.ID, cand.RefCount, cand.Blocks, slot)
		}
	}
	return nil
}
