package options

import (
	"fmt"
	"strings"

	"github.com/sagellm/kvevict/internal/rank"
)

// Info is one strategy: its name, the mechanism it ranks by, and the
// strategy-specific options it takes.
type Info struct {
	Name  string
	Kind  rank.Kind
	Tunes Tunable
}

// table lists every strategy, in the order kvevict.Strategies returns
// them, under the names of kvevict's Strategy constants.
var table = [...]Info{
	{"lru", rank.KindLRU, TuneSampling},
	{"mru", rank.KindMRU, TuneSampling},
	{"fifo", rank.KindFIFO, TuneSampling},
	{"filo", rank.KindFILO, TuneSampling},
	{"lfu", rank.KindLFU, TuneSampling | TuneLFUHalfLife},
	{"slru", rank.KindSLRU, TuneSampling | TuneSLRUThreshold},
	{"qos_aware", rank.KindQoS, TuneSampling},
	{"predictive", rank.KindPredictive, TuneSampling | TuneLifetimeHorizon},
	{"frequency_cost", rank.KindCost, TuneSampling | TuneCostAlpha | TuneCostDecay},
	{"arc", rank.KindARC, TuneCapacity | TuneGhostCap},
	{"s3fifo", rank.KindS3FIFO, TuneCapacity | TuneGhostCap},
	{"sieve", rank.KindSIEVE, TuneCapacity},
	{"auto", rank.KindAuto, TuneCapacity | TuneGhostCap | TuneBelow},
}

// All returns every strategy, in the table's order, for the caller to
// read only.
func All() []Info { return table[:] }

// Lookup returns strategy name: named exactly, or as a person writes it,
// in any case with spaces around.
func Lookup(name string) (Info, bool) {
	for _, info := range table {
		if info.Name == name {
			return info, true
		}
	}
	trimmed := strings.TrimSpace(name)
	for _, info := range table {
		if strings.EqualFold(info.Name, trimmed) {
			return info, true
		}
	}
	return Info{}, false
}

// Unknown is the error for a name Lookup does not know: it matches
// ErrUnknownStrategy and lists the known names.
func Unknown(name string) error {
	var known strings.Builder
	for i, info := range table {
		if i > 0 {
			known.WriteString(", ")
		}
		known.WriteString(info.Name)
	}
	return fmt.Errorf("%w %q (known: %s)", ErrUnknownStrategy, name, known.String())
}
