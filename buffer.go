package kvevict

import (
	"math"
)

// The selection's buffer of entries that may still be victims: a bounded
// max-heap while few candidates enter, then an unordered buffer that cut,
// a weighted quickselect, cuts to the entries that cover the need.
// The heap is its own, not rank.Heap: see BenchmarkSelectionHeap.

// push adds e to the max-heap h. O(log len(h)).
func push(h []entry, e entry) []entry {
	h = append(h, e)
	j := len(h) - 1
	for j > 0 {
		parent := (j - 1) / 2
		if !less(&h[parent], &e) {
			break
		}
		h[j] = h[parent]
		j = parent
	}
	h[j] = e
	return h
}

// pop removes the largest entry of the max-heap h. O(log len(h)).
func pop(h []entry) []entry {
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	siftDown(h, 0)
	return h
}

// siftDown restores the max-heap order below j, moving entries up into a
// hole rather than swapping them.
func siftDown(h []entry, j int) {
	if j >= len(h) {
		return
	}
	e := h[j]
	for {
		child := 2*j + 1
		if child >= len(h) {
			break
		}
		if r := child + 1; r < len(h) && less(&h[child], &h[r]) {
			child = r
		}
		if !less(&e, &h[child]) {
			break
		}
		h[j] = h[child]
		j = child
	}
	h[j] = e
}

// cut reorders h so that h[:m] holds the m smallest entries by (key, ID)
// whose blocks add up to at least need while h[:m-1]'s do not, and returns
// m: the greedy selection's victims, in no particular order. h's blocks
// add up to total, at least need > 0. It is a quickselect weighted by
// blocks: each round partitions around a pivot and keeps the side that
// holds the cut, so it costs O(len(h)) expected and never sorts what it
// discards. On a long range the pivot is drawn from a sample, just past the
// cut on the side that leaves less (Floyd and Rivest's idea), so that a
// compaction of the buffer, which keeps a small share of it, costs little
// more than one pass.
func (s *selector) cut(h []entry, need, total int) int {
	lo, hi := 0, len(h)
	for hi-lo > 16 {
		var p int
		if hi-lo >= samplePivotAbove {
			p = lo + s.samplePivot(h[lo:hi], need, total)
		} else {
			p = lo + int(s.random()%uint64(hi-lo))
		}
		h[p], h[hi-1] = h[hi-1], h[p]
		pivot := h[hi-1]
		j, below := lo, 0
		for i := lo; i < hi-1; i++ {
			if less(&h[i], &pivot) {
				below += int(h[i].Blocks)
				h[i], h[j] = h[j], h[i]
				j++
			}
		}
		h[j], h[hi-1] = h[hi-1], h[j]
		switch {
		case below >= need:
			hi, total = j, below
		case below+int(pivot.Blocks) >= need:
			return j + 1
		default:
			need -= below + int(pivot.Blocks)
			total -= below + int(pivot.Blocks)
			lo = j + 1
		}
	}
	sortEntries(h[lo:hi])
	for i := lo; i < hi; i++ {
		if need -= int(h[i].Blocks); need <= 0 {
			return i + 1
		}
	}
	panic("kvevict: cut was given entries that do not cover the need")
}

// samplePivotAbove is the shortest range whose pivot cut draws from a
// sample: below it, sorting the sample costs more than a random pivot's
// extra rounds.
const samplePivotAbove = 1024

// pivotSample is how many entries samplePivot draws.
const pivotSample = 32

// samplePivot returns the index in h, whose blocks add up to total, of a
// pivot for a round of cut looking for the cut at need blocks: from a
// sample of h in (key, ID) order, the entry at the cut's estimated share of
// the blocks, moved a margin toward the larger side so that the round most
// likely keeps the smaller. The margin is two standard deviations of the
// estimate. A wrong guess costs a round, never a wrong cut.
func (s *selector) samplePivot(h []entry, need, total int) int {
	var idx [pivotSample]int32 // sorted by insertion as drawn
	sampled := 0
	for k := range idx {
		i := int32(s.random() % uint64(len(h)))
		sampled += int(h[i].Blocks)
		j := k
		for ; j > 0 && less(&h[i], &h[idx[j-1]]); j-- {
			idx[j] = idx[j-1]
		}
		idx[j] = i
	}
	q := float64(need) / float64(total)
	margin := 2*math.Sqrt(q*(1-q)/pivotSample) + 1.0/pivotSample
	if q < 0.5 {
		q += margin // keep the left side, about q of the range
	} else {
		q -= margin // take the left side as victims, keep the right
	}
	target := q * float64(sampled)
	cum := 0
	for _, i := range idx {
		if cum += int(h[i].Blocks); float64(cum) >= target {
			return int(i)
		}
	}
	return int(idx[pivotSample-1])
}

// random is the selection's pivot sequence (xorshift): pivots no candidate
// order can predict, the same on every run.
func (s *selector) random() uint64 {
	if s.pivots == 0 {
		s.pivots = pivotSeed
	}
	s.pivots ^= s.pivots << 13
	s.pivots ^= s.pivots >> 7
	s.pivots ^= s.pivots << 17
	return s.pivots
}

// pivotSeed starts cut's pivot sequence: any nonzero value.
const pivotSeed = 0x9E3779B97F4A7C15
