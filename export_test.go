package kvevict

import (
	"github.com/sagellm/kvevict/internal/options"
	"github.com/sagellm/kvevict/internal/rank"
)

// RaceEnabled is raceEnabled for the external tests.
const RaceEnabled = raceEnabled

// ResolveForPolicy resolves s and opts as New does, for the external tests
// that compute keys themselves: the strategy's mechanism and parameters.
func ResolveForPolicy(s Strategy, opts []Option) (rank.Kind, rank.Config, error) {
	info, cfg, err := options.Resolve(string(s), opts, options.ForPolicy)
	return info.Kind, cfg.Config, err
}
