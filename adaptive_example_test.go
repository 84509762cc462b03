package kvevict_test

import (
	"fmt"

	"github.com/sagellm/kvevict"
)

// seqs returns one-block candidates for ids, LastAccess = id.
func seqs(ids ...uint64) []kvevict.Candidate {
	cs := make([]kvevict.Candidate, len(ids))
	for i, id := range ids {
		cs[i] = kvevict.Candidate{ID: id, Blocks: []int{int(id)}, LastAccess: int64(id)}
	}
	return cs
}

// ARC keeps a sequence used twice (t2) over one used once (t1), even when
// the one used once is more recent: LRU would evict sequence 1 here.
func ExampleNew_arc() {
	p, _ := kvevict.New(kvevict.ARC, kvevict.WithCapacity(2))
	p.UpdateAccess(1)
	p.UpdateAccess(1) // used twice: t2
	p.UpdateAccess(2) // used once: t1
	p.UpdateAccess(3) // a new request needs room
	res, _ := p.SelectVictims(seqs(1, 2), 1)
	fmt.Println(res.Victims[0].ID)
	// Output: 2
}

// S3-FIFO moves a sequence reused while in its small FIFO to the main one
// and evicts the first that was not; a request for that one later enters
// main directly, from the ghost FIFO.
func ExampleNew_s3fifo() {
	p, _ := kvevict.New(kvevict.S3FIFO, kvevict.WithCapacity(4))
	for _, id := range []uint64{1, 2, 3, 1} {
		p.UpdateAccess(id)
	}
	p.UpdateAccess(4)
	res, _ := p.SelectVictims(seqs(1, 2, 3), 1)
	fmt.Println(res.Victims[0].ID)
	p.UpdateAccess(2) // a ghost: it will enter main
	res, _ = p.SelectVictims(seqs(1, 3, 4), 1)
	fmt.Println(res.Victims[0].ID)
	// Output:
	// 2
	// 3
}

// SIEVE's hand clears the visited bit of sequence 1 and evicts 2, then
// resumes where it stopped and evicts 3, not 1 again.
func ExampleNew_sieve() {
	p, _ := kvevict.New(kvevict.SIEVE, kvevict.WithCapacity(3))
	for _, id := range []uint64{1, 2, 3, 1, 4} {
		p.UpdateAccess(id)
	}
	res, _ := p.SelectVictims(seqs(1, 2, 3), 1)
	fmt.Println(res.Victims[0].ID)
	p.UpdateAccess(5)
	res, _ = p.SelectVictims(seqs(1, 3, 4), 1)
	fmt.Println(res.Victims[0].ID)
	// Output:
	// 2
	// 3
}
