package kvevict

import "testing"

// TestAutoBoundedGhosts: a million distinct ids (a hundred thousand under
// the race detector, still 250 times the bound) through UpdateAccess and
// selections leave at most c resident and WithGhostCap ghost ids, the
// ghosts outnumbering the cache as Auto's default does.
func TestAutoBoundedGhosts(t *testing.T) {
	const c, ghosts = 100, 300
	p, err := New(Auto, WithCapacity(c), WithGhostCap(ghosts))
	if err != nil {
		t.Fatal(err)
	}
	ids := uint64(1_000_000)
	if raceEnabled {
		ids /= 10
	}
	cands := make([]Candidate, 2*c)
	for id := range ids {
		p.UpdateAccess(id)
		if id%1000 == 0 {
			for i := range cands {
				cands[i] = Candidate{ID: id - uint64(i), Blocks: []int{i}, LastAccess: int64(id) - int64(i)}
			}
			if _, err := p.SelectVictims(cands, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	h := p.(*policy).history()
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	if n := h.Nodes().Tracked(); n > c+ghosts {
		t.Errorf("%d ids tracked, bound c + history cap = %d", n, c+ghosts)
	}
	if n := len(h.Nodes().Slab); n > c+ghosts+1 {
		t.Errorf("slab of %d nodes, bound %d", n, c+ghosts+1)
	}
}
