// Package sizing sizes an adaptive strategy's history for a pool of
// blocks: the one rule by which the replay, the tiers and serve mode's
// evictors give kvevict.WithCapacity, which counts candidates, for a pool
// they know in blocks.
package sizing

import "github.com/sagellm/kvevict"

// Pool is what an adaptive strategy's history serves: a pool of blocks.
type Pool struct {
	// Blocks is the pool's size.
	Blocks int
	// Room is the most blocks one call names before the selection that
	// makes room for them. A history that takes a block in at its access
	// holds them beside the pool's, so that it never evicts on its own a
	// block the pool still holds.
	Room int
	// Sequences says each candidate is a sequence, not a block. ARC,
	// S3-FIFO and SIEVE then count sequences, whose number the pool does
	// not know, and keep kvevict's default; Auto still counts blocks, by
	// hash (kvevict.Candidate.HeadHash).
	Sequences bool
}

// Options returns the options that size strategy s's history for p, in
// any spelling kvevict.ParseStrategy accepts: kvevict.WithCapacity of
// Blocks + Room for an adaptive strategy that counts blocks, none for the
// others or an unknown name (the constructor refuses it). The caller puts
// them before its own options, which may override them.
func (p Pool) Options(s kvevict.Strategy) []kvevict.Option {
	parsed, err := kvevict.ParseStrategy(string(s))
	if err != nil || !parsed.Adaptive() || p.Sequences && parsed != kvevict.Auto {
		return nil
	}
	return []kvevict.Option{kvevict.WithCapacity(p.Blocks + p.Room)}
}
