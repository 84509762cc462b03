// Command turns is a paged KV pool shaped as an inference server's: every
// turn of a conversation is a new sequence, which takes over the cached
// blocks of the turn before it (the prefix cache finds them by hash), and
// a finished sequence's blocks stay cached until evicted. Sequence IDs
// never recur, so a strategy that learns from requests per ID learns
// nothing; what recurs is content. The pool tells Auto what recurs: each
// candidate's HeadHash (the hash of its first block) and each request's
// block hashes (Policy.UpdateAccessHashes). It runs the same traffic once
// per row and prints the prefix hit ratio.
//
//	go run ./examples/turns
package main

import (
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"text/tabwriter"

	"github.com/sagellm/kvevict"
)

const (
	poolBlocks   = 512  // blocks in the pool
	sessions     = 400  // conversations, some far more popular than others
	requests     = 6000 // requests replayed per row
	promptBlocks = 10   // blocks of a conversation's first message
	turnBlocks   = 2    // blocks each later turn adds (answer and message)
	maxBlocks    = 40   // a conversation longer than this starts over
	maxRunning   = 8    // requests decoding at once
)

// sequence is one turn's KV: its blocks, head first, with their hashes.
type sequence struct {
	id         uint64
	blocks     []int
	hashes     []uint64
	lastAccess int64
	running    bool
}

// pool is a paged KV pool with a prefix cache: byHash finds a cached
// block, owner the sequence that holds it.
type pool struct {
	policy      kvevict.Policy
	byHead      bool // tell the policy what recurs
	free        []int
	seqs        map[uint64]*sequence // cached or running, by sequence ID
	owner       map[uint64]uint64    // block hash -> sequence ID
	active      []*sequence
	tick        int64
	nextID      uint64
	hits, total int
}

// evict frees need blocks: the policy picks among the sequences that hold
// blocks, running ones passed as referenced.
func (p *pool) evict(need int) error {
	cands := make([]kvevict.Candidate, 0, len(p.seqs))
	for _, s := range p.seqs {
		if len(s.blocks) == 0 {
			continue // the request being admitted, before it holds anything
		}
		c := kvevict.Candidate{ID: s.id, Blocks: s.blocks, LastAccess: s.lastAccess, AllowPartial: true}
		if s.running {
			c.RefCount = 1
		}
		if p.byHead {
			c.HeadHash = s.hashes[0]
		}
		cands = append(cands, c)
	}
	res, err := p.policy.SelectVictims(cands, need)
	if err != nil {
		return err
	}
	for _, v := range res.Victims {
		s := p.seqs[v.ID]
		keep := len(s.blocks) - len(v.Blocks)
		for _, h := range s.hashes[keep:] {
			delete(p.owner, h)
		}
		p.free = append(p.free, v.Blocks...)
		s.blocks, s.hashes = s.blocks[:keep], s.hashes[:keep]
		if keep == 0 {
			delete(p.seqs, v.ID)
		}
	}
	return nil
}

// serve admits a request whose prompt is hashes as a new sequence: the
// cached prefix of the prompt is taken from the sequences that hold it,
// the rest is allocated. It returns kvevict.ErrInsufficientBlocks when
// running requests hold too much of the pool.
func (p *pool) serve(hashes []uint64) error {
	p.tick++
	// Every request, before the eviction that makes room for it.
	p.nextID++
	s := &sequence{id: p.nextID, lastAccess: p.tick, running: true}
	p.policy.UpdateAccess(s.id)
	p.policy.UpdateAccessHashes(hashes)
	hit := 0
	for hit < len(hashes) {
		if _, ok := p.owner[hashes[hit]]; !ok {
			break
		}
		hit++
	}
	// Take the hit blocks from their owners; they hold a run of the prompt
	// at their head, so each gives up a head and keeps the rest.
	for i := 0; i < hit; {
		o := p.seqs[p.owner[hashes[i]]]
		n := 0
		for i+n < hit && n < len(o.hashes) && o.hashes[n] == hashes[i+n] {
			n++
		}
		if n == 0 {
			break // the prompt's block sits inside another sequence: treat the rest as misses
		}
		s.blocks = append(s.blocks, o.blocks[:n]...)
		s.hashes = append(s.hashes, o.hashes[:n]...)
		o.blocks, o.hashes = o.blocks[n:], o.hashes[n:]
		if len(o.blocks) == 0 {
			delete(p.seqs, o.id)
		}
		i += n
	}
	hit = len(s.blocks)
	for _, h := range s.hashes {
		p.owner[h] = s.id
	}
	p.seqs[s.id] = s
	if short := len(hashes) - hit - len(p.free); short > 0 {
		if err := p.evict(short); err != nil {
			p.release(s) // what it took stays cached
			return err
		}
	}
	for _, h := range hashes[hit:] {
		p.owner[h] = s.id
		s.blocks = append(s.blocks, p.free[len(p.free)-1])
		s.hashes = append(s.hashes, h)
		p.free = p.free[:len(p.free)-1]
	}
	p.hits += hit
	p.total += len(hashes)
	p.active = append(p.active, s)
	if len(p.active) > maxRunning {
		p.release(p.active[0])
		p.active = p.active[1:]
	}
	return nil
}

// release ends s's request: its blocks stay cached, evictable.
func (p *pool) release(s *sequence) {
	s.running = false
	s.lastAccess = p.tick
	if len(s.blocks) == 0 {
		delete(p.seqs, s.id)
	}
}

// run replays the traffic through a pool evicting by strategy.
func run(strategy kvevict.Strategy, byHead bool, opts ...kvevict.Option) (float64, error) {
	policy, err := kvevict.New(strategy, opts...)
	if err != nil {
		return 0, err
	}
	p := &pool{policy: policy, byHead: byHead, seqs: map[uint64]*sequence{}, owner: map[uint64]uint64{}}
	for b := range poolBlocks {
		p.free = append(p.free, b)
	}
	rng := rand.New(rand.NewPCG(7, 11)) // the same traffic for every row
	zipf := rand.NewZipf(rng, 1.05, 8, sessions-1)
	length := make([]int, sessions) // each conversation's prompt so far
	epoch := make([]uint64, sessions)
	last := make([]*sequence, sessions) // each conversation's latest turn
	for range requests {
		c := zipf.Uint64()
		if last[c] != nil && last[c].running {
			continue // that conversation is still generating its last turn
		}
		if length[c] == 0 || length[c]+turnBlocks > maxBlocks {
			length[c] = promptBlocks
			epoch[c]++
		} else {
			length[c] += turnBlocks
		}
		hashes := make([]uint64, length[c])
		for i := range hashes {
			hashes[i] = (c+1)<<40 | epoch[c]<<20 | uint64(i)
		}
		err := p.serve(hashes)
		last[c] = p.seqs[p.nextID]
		if errors.Is(err, kvevict.ErrInsufficientBlocks) {
			continue // a server would queue this one
		}
		if err != nil {
			return 0, err
		}
	}
	return float64(p.hits) / float64(p.total), nil
}

func main() {
	rows := []struct {
		name     string
		strategy kvevict.Strategy
		byHead   bool
		opts     []kvevict.Option
	}{
		{"lru", kvevict.LRU, false, nil},
		{"arc", kvevict.ARC, false, nil},
		{"s3fifo", kvevict.S3FIFO, false, nil},
		{"auto, by sequence ID", kvevict.Auto, false, nil},
		{"auto, HeadHash and UpdateAccessHashes", kvevict.Auto, true, []kvevict.Option{kvevict.WithCapacity(poolBlocks)}},
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "strategy\tprefix hit\t")
	for _, r := range rows {
		hit, err := run(r.strategy, r.byHead, r.opts...)
		if err != nil {
			log.Fatalf("%s: %v", r.name, err)
		}
		fmt.Fprintf(w, "%s\t%.3f\t\n", r.name, hit)
	}
	w.Flush()
}
