package kvevict

import "github.com/sagellm/kvevict/internal/rank"

// RaceEnabled is raceEnabled for the external tests.
const RaceEnabled = raceEnabled

// ResolveForPolicy resolves s and opts as New does, for the external tests
// that compute keys themselves: the strategy's mechanism and parameters.
func ResolveForPolicy(s Strategy, opts []Option) (rank.Kind, rank.Config, error) {
	info, cfg, err := resolve(s, opts, forPolicy)
	return info.Kind, cfg.Config, err
}

// WithBTreeOrder has NewIndex keep a key strategy's candidates in a
// btreeOrder instead of the run and heap, for the tests and benchmarks
// that compare the two orders. The adaptive strategies and a Policy
// ignore it.
func WithBTreeOrder() Option {
	return optionFunc(func(c *config) { c.btreeOrder = true })
}
