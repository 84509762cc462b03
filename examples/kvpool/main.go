// Command kvpool is a small paged KV pool that runs out of blocks and asks a
// kvevict.Policy what to evict, once per strategy, and prints the metrics
// side by side. It is the shape of the code a server's allocator needs: call
// UpdateAccess for every request, before making room for it; when blocks run
// out, build candidates from the sequences that hold blocks, call
// SelectVictims and free the victims' blocks.
//
//	go run ./examples/kvpool
package main

import (
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"text/tabwriter"
	"time"

	"github.com/sagellm/kvevict"
)

const (
	poolBlocks    = 512  // blocks in the pool
	blockTokens   = 16   // tokens per block
	sessions      = 120  // conversations that come back
	requests      = 4000 // requests replayed per strategy
	promptBlocks  = 12   // blocks of a new conversation's prompt
	turnBlocks    = 2    // blocks each later turn adds
	maxRunning    = 8    // requests decoding at once
	decodeBlocks  = 3    // blocks a request grows by while it decodes
	highPriorityN = 10   // sessions of the premium tenant

	// tick is the pool's clock unit: one request arrival. A request runs
	// until maxRunning newer ones have started, so it decodes for
	// maxRunning ticks; at a second a tick, that is the several seconds a
	// chat turn of a few hundred tokens takes to generate. WithTickDuration
	// tells the policy, so that durations (Predictive's lifetime horizon,
	// decay half-lives) mean what they say.
	tick = time.Second
)

// sequence is a conversation's cached KV: its blocks, head first.
type sequence struct {
	id          uint64
	blocks      []int
	createdAt   int64
	lastAccess  int64
	accessCount int
	priority    kvevict.Priority
	running     bool // a request holds it: never evictable
}

// pool is a paged KV pool with a free list.
type pool struct {
	policy kvevict.Policy
	free   []int
	seqs   map[uint64]*sequence
	active []*sequence // running requests, oldest first
	tick   int64

	hitBlocks, missBlocks int
}

func newPool(p kvevict.Policy) *pool {
	free := make([]int, poolBlocks)
	for i := range free {
		free[i] = poolBlocks - 1 - i
	}
	return &pool{policy: p, free: free, seqs: make(map[uint64]*sequence)}
}

// allocate returns n blocks, evicting cached sequences when the free list
// runs short.
func (p *pool) allocate(n int) ([]int, error) {
	if short := n - len(p.free); short > 0 {
		if err := p.evict(short); err != nil {
			return nil, err
		}
	}
	got := p.free[len(p.free)-n:]
	p.free = p.free[:len(p.free)-n]
	return append([]int(nil), got...), nil
}

// evict asks the policy for victims covering need blocks and frees them.
func (p *pool) evict(need int) error {
	cands := make([]kvevict.Candidate, 0, len(p.seqs))
	for _, s := range p.seqs {
		refs := 0
		if s.running {
			refs = 1
		}
		cands = append(cands, kvevict.Candidate{
			ID: s.id, Blocks: s.blocks, LastAccess: s.lastAccess, CreatedAt: s.createdAt,
			AccessCount: s.accessCount, Priority: s.priority, RefCount: refs,
			SeqLen: len(s.blocks) * blockTokens, MaxLen: (promptBlocks + 40*turnBlocks) * blockTokens,
			AllowPartial: true, // a conversation keeps its head and loses its tail
		})
	}
	res, err := p.policy.SelectVictims(cands, need)
	if err != nil {
		return err
	}
	for _, v := range res.Victims {
		s := p.seqs[v.ID]
		p.free = append(p.free, v.Blocks...)
		s.blocks = s.blocks[:len(s.blocks)-len(v.Blocks)]
		if len(s.blocks) == 0 {
			delete(p.seqs, v.ID)
		}
	}
	return nil
}

// serve runs one request of session id: the cached head of the conversation
// is reused, the rest is prefilled, and decode grows it. The request keeps
// running (referenced, so never evicted) until maxRunning newer ones start.
func (p *pool) serve(id uint64, priority kvevict.Priority) error {
	p.tick++
	s, cached := p.seqs[id]
	if cached && s.running {
		return nil // that conversation is still generating its last turn
	}
	// Every request, resident or not, before the eviction that makes room
	// for it: the policy counts a re-prefill when it evicted id before, and
	// the adaptive strategies learn from misses as well as hits.
	p.policy.UpdateAccess(id)
	want := promptBlocks
	if cached {
		want = len(s.blocks) + turnBlocks
		s.accessCount++
	} else {
		s = &sequence{id: id, createdAt: p.tick, priority: priority}
		p.seqs[id] = s
	}
	s.lastAccess = p.tick
	s.running = true
	blocks, err := p.allocate(want + decodeBlocks - len(s.blocks))
	if err != nil {
		s.running = false
		if len(s.blocks) == 0 {
			delete(p.seqs, id)
		}
		return err
	}
	p.hitBlocks += len(s.blocks)
	p.missBlocks += want - len(s.blocks)
	s.blocks = append(s.blocks, blocks...)
	p.active = append(p.active, s)
	if len(p.active) > maxRunning {
		p.active[0].running = false // finished: cached and evictable
		p.active = p.active[1:]
	}
	return nil
}

func run(strategy kvevict.Strategy) (kvevict.Metrics, float64, error) {
	policy, err := kvevict.New(strategy, kvevict.WithTickDuration(tick))
	if err != nil {
		return kvevict.Metrics{}, 0, err
	}
	p := newPool(policy)
	rng := rand.New(rand.NewPCG(7, 11)) // the same traffic for every strategy
	zipf := rand.NewZipf(rng, 1.1, 4, sessions-1)
	for i := 0; i < requests; i++ {
		id := zipf.Uint64() + 1
		priority := kvevict.PriorityNormal
		if id <= highPriorityN {
			priority = kvevict.PriorityHigh
		}
		err := p.serve(id, priority)
		if errors.Is(err, kvevict.ErrInsufficientBlocks) {
			continue // every block is held by running requests: a server would queue this one
		}
		if err != nil {
			return kvevict.Metrics{}, 0, err
		}
	}
	hit := float64(p.hitBlocks) / float64(p.hitBlocks+p.missBlocks)
	return policy.Metrics(), hit, nil
}

func main() {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "strategy\tprefix hit\tevictions\tpartial\tblocks\tre-prefill\tfairness\tavg select\tp99 select\t")
	for _, s := range kvevict.Strategies() {
		m, hit, err := run(s)
		if err != nil {
			log.Fatalf("%s: %v", s, err)
		}
		fmt.Fprintf(w, "%s\t%.3f\t%d\t%d\t%d\t%.3f\t%.3f\t%v\t%v\t\n", s, hit,
			m.TotalEvictions, m.PartialEvictions, m.EvictedBlocks, m.RePrefillRate, m.FairnessScore,
			m.AvgEvictionTime, m.P99EvictionTime)
	}
	w.Flush()
}
