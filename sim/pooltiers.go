package sim

import (
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/tier"
)

// The tiers below a pool of Serve's (ServeConfig.Tiers): a
// [tier.Hierarchy] whose GPU is the pool (tier.Config.ExternalGPU). An
// admission finds its prefix in the pool, then the runs after it below
// (lookup), loads them (Hierarchy.Load) into blocks the pool allocates,
// evicting and demoting as it must (demote), and offers the request's
// blocks below (offer); with a clock the sequence waits for its loads
// (load) before it prefills.

// setTiers puts t below p, whose evictor runs strategy s. Nothing without
// tiers.
func (p *pool) setTiers(t *Tiers, s kvevict.Strategy) error {
	if len(t.Below) == 0 {
		return nil
	}
	cfg := t.config(tier.Level{Medium: tier.GPU, Capacity: p.capacity, Strategy: s}, func(e tier.Event) {
		if p.onTierEvent != nil {
			p.onTierEvent(e)
		}
	})
	cfg.ExternalGPU = true
	h, err := tier.New(cfg)
	if err != nil {
		return err
	}
	p.tiers, p.levels, p.links = h, cfg.Levels, make([]int64, len(cfg.Levels))
	return nil
}

// lookup returns how many of req's leading blocks the pool can serve: its
// prefix in the pool, then, with tiers, the runs after it below, which m
// gives (nil without tiers). It changes nothing.
func (p *pool) lookup(req *Request) (found int, m *tier.Match) {
	found = p.resident(req.HashIDs)
	if p.tiers == nil {
		return found, nil
	}
	m = p.tiers.LookupBelow(req.HashIDs, found)
	return m.Hits(), m
}

// load loads the runs m found below the pool for request r, and returns
// when the last transfer ends, in ticks: each run over its tier's link,
// one after the other, each once the loads queued on its link are done.
// Now without a clock or tiers. The tiers take r's hints, on the pool's
// clock, until offer.
func (p *pool) load(r int, m *tier.Match) (int64, error) {
	if m == nil {
		return p.now, nil
	}
	req := &p.w.Requests[r]
	if p.arrived != nil {
		if err := p.tiers.Hint(req.HashIDs, req.Hints.candidateHints(p.arrived[r]), p.now); err != nil {
			return 0, err
		}
	}
	if err := p.tiers.Load(req.HashIDs, m); err != nil {
		return 0, err
	}
	c := p.clock
	end := p.now
	if c.cost == nil {
		return end, nil
	}
	for i := 1; i < len(m.Runs); i++ {
		if m.Runs[i] == 0 {
			continue
		}
		d := c.cost.Load(p.levels[i].Medium, m.Runs[i])
		c.loads += d
		end = max(end, p.links[i]) + int64((d+time.Microsecond/2)/time.Microsecond)
		p.links[i] = end
	}
	return end, nil
}

// demote passes the pool's victims, blocks still cached, to the tiers
// below: stored in the next one under WriteBack. Nothing without tiers.
func (p *pool) demote(victims []int) error {
	if p.tiers == nil {
		return nil
	}
	p.victims = p.victims[:0]
	for _, b := range victims {
		p.victims = append(p.victims, p.blocks[b].hash)
	}
	return p.tiers.Demote(p.victims)
}

// offer offers req's blocks to the tiers below, as the write policy says,
// once admitted, and ends its hints there. Nothing without tiers.
func (p *pool) offer(req *Request) error {
	if p.tiers == nil {
		return nil
	}
	if err := p.tiers.Offer(req.HashIDs); err != nil {
		return err
	}
	if p.arrived != nil {
		return p.tiers.Hint(nil, kvevict.Hints{}, p.now)
	}
	return nil
}

// addTierStats adds p's tiers' counts to sum, as the package's
// addTierStats does, the blocks the pool stored for prompts among the
// GPU's. sum without tiers.
func (p *pool) addTierStats(sum []TierStats) []TierStats {
	if p.tiers == nil {
		return sum
	}
	st := p.tiers.Stats()
	st[0].Stored = p.gpuStored
	return addTierStats(sum, st, p.clock.cost)
}

// loaded starts the prefill of s, whose loads ended, if the batch has
// room; else s waits for it, first in line (admitWaiting).
func (p *pool) loaded(s *sequence) {
	s.loading = false
	if !p.room() {
		s.ready = true
		p.ready = append(p.ready, s)
		return
	}
	p.aside--
	p.beginPrefill(s)
	p.schedule(s)
}

// beginPrefill counts s's prompt found in the batch's KV and starts its
// first chunk.
func (p *pool) beginPrefill(s *sequence) {
	req := &p.w.Requests[s.req]
	p.clock.prefDone += int64(req.InputTokens - s.prefillLeft)
	p.clock.beginChunk(s, req.InputTokens)
}
