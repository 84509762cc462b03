package kvevict

import (
	"math/rand/v2"

	"github.com/sagellm/kvevict/internal/idmap"
)

// samplePoolSize is how many of the best sampled candidates the eviction pool
// keeps between rounds of one selection, as Redis's EVPOOL_SIZE.
const samplePoolSize = 16

// maxSampleMisses is how many rounds in a row may find no new evictable
// candidate before a sampled selection falls back to the exact one: the
// candidates are mostly pinned or referenced, or the need is close to all
// the evictable blocks. It caps the sampling loop.
const maxSampleMisses = 16

// sampleSeed seeds every sampled policy's generator, so the same calls give
// the same victims on every run.
const sampleSeed = 0x6b76657669637421

// sampler is the approximate selection of [WithSampling], after Redis's
// eviction pool (evict.c, evictionPoolPopulate): each round draws k
// candidates uniformly at random (with replacement), merges the evictable
// ones into a small pool ordered by (key, ID), and takes the pool's best as
// the next victim. The pool carries good candidates from round to round and
// from call to call, so each victim is the best of many more than k draws.
// As Redis checks that a pooled key still exists, a call keeps a pooled
// entry only if its index still holds a candidate with the same ID that is
// evictable, and re-ranks it by that candidate's current key. A sampler is not safe
// for concurrent use; the policy's lock guards it.
type sampler struct {
	k     int
	rng   *rand.Rand
	pool  []entry  // ascending by (key, ID), at most samplePoolSize
	taken []uint64 // bit i: candidate i is a victim of this call
	picks []int32  // indices of this call's victims, to clear taken

	// The selection begun last.
	cands []Candidate
	kp    *keyParams
	ids   *idmap.Map[struct{}] // the victims' IDs, to refuse a repeat
	idCap int                  // the size ids was reset to
}

func newSampler(k int) *sampler {
	return &sampler{k: k, rng: rand.New(rand.NewPCG(sampleSeed, uint64(k)))}
}

// begin starts a sampled selection over cands, more than k of them, as a
// transaction's source: each next costs O(k) whatever the number of
// candidates. ids is scratch for the victims' IDs. end must follow.
func (s *sampler) begin(cands []Candidate, kp *keyParams, ids *idmap.Map[struct{}]) {
	kp.begin(cands)
	if words := (len(cands) + 63) / 64; len(s.taken) < words {
		s.taken = make([]uint64, words)
	}
	s.cands, s.kp, s.ids = cands, kp, ids
	s.revalidate(cands, kp)
	s.picks = s.picks[:0]
	s.idCap = samplePoolSize
	ids.Reset(s.idCap)
}

// next draws a round of k candidates, more while the pool is empty, and takes
// the pool's best as the next victim. It gives up (errGaveUp) after
// maxSampleMisses rounds in a row that find no new evictable candidate.
func (s *sampler) next() (*Candidate, error) {
	cands := s.cands
	n := len(cands)
	for misses := 0; ; {
		for range s.k {
			i := s.rng.IntN(n)
			c := &cands[i]
			if !valid(c) {
				return nil, invalidField(c, i)
			}
			if !c.evictable() || s.taken[i/64]&(1<<(i%64)) != 0 {
				continue
			}
			if c.hinted() {
				return nil, errGaveUp // the classes of Hints are ranked exactly
			}
			s.offer(newEntry(c, s.kp.keyOf(c), int32(i)))
		}
		if len(s.pool) > 0 {
			break
		}
		if misses++; misses >= maxSampleMisses {
			return nil, errGaveUp
		}
	}
	best := s.pool[0]
	s.pool = append(s.pool[:0], s.pool[1:]...)
	i := int(best.Slot)
	s.taken[i/64] |= 1 << (i % 64)
	s.picks = append(s.picks, best.Slot)
	c := &cands[i]
	if len(s.picks) > s.idCap/2 { // keep the ID set's load factor <= 1/2
		s.idCap *= 4
		s.ids.Reset(s.idCap)
		for _, j := range s.picks[:len(s.picks)-1] {
			s.ids.Add(cands[j].ID)
		}
	}
	if s.ids.Add(c.ID) {
		return nil, duplicateID(cands, i)
	}
	return c, nil
}

// commit and rollback change nothing: the pool keeps what it learnt of
// the candidates either way, as Redis's does, and end clears the marks.
func (s *sampler) commit([]Victim, bool) {}
func (s *sampler) rollback()             {}

// end closes the selection begun last: it unmarks the victims, O(victims),
// and drops the view of the caller's slice.
func (s *sampler) end() {
	for _, i := range s.picks {
		s.taken[i/64] = 0
	}
	s.cands, s.kp, s.ids = nil, nil, nil
}

// offer merges e into the pool unless the pool already holds it or is full
// of better entries. O(samplePoolSize).
func (s *sampler) offer(e entry) {
	p := s.pool
	at := len(p)
	for j := range p {
		if p[j].Slot == e.Slot {
			return
		}
		if at == len(p) && less(&e, &p[j]) {
			at = j
		}
	}
	if at == len(p) && len(p) == samplePoolSize {
		return
	}
	if len(p) < samplePoolSize {
		p = append(p, entry{})
	}
	copy(p[at+1:], p[at:len(p)-1])
	p[at] = e
	s.pool = p
}

// revalidate keeps the pooled entries of earlier calls that still name an
// evictable candidate at the same index, with their current keys, in order.
// O(samplePoolSize^2).
func (s *sampler) revalidate(cands []Candidate, kp *keyParams) {
	old := s.pool
	s.pool = s.pool[:0]
	for _, e := range old {
		if int(e.Slot) >= len(cands) {
			continue
		}
		c := &cands[e.Slot]
		if c.ID != e.ID || !valid(c) || !c.evictable() || c.hinted() {
			continue
		}
		e = newEntry(c, kp.keyOf(c), e.Slot)
		// Insertion sort in place: the kept prefix never overtakes old.
		j := len(s.pool)
		s.pool = append(s.pool, e)
		for ; j > 0 && less(&e, &s.pool[j-1]); j-- {
			s.pool[j] = s.pool[j-1]
		}
		s.pool[j] = e
	}
}
