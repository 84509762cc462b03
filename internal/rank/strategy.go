package rank

import (
	"fmt"
	"strings"
)

// Kind is how a strategy ranks: by a key over a candidate's fields, or,
// for the adaptive ones, by a history of its own.
type Kind uint8

// The kinds, one per strategy, in the order [Strategies] lists them.
const (
	KindLRU Kind = iota
	KindMRU
	KindFIFO
	KindFILO
	KindLFU
	KindSLRU
	KindQoS
	KindPredictive
	KindCost
	KindARC
	KindS3FIFO
	KindSIEVE
	KindAuto
)

// Adaptive reports whether k learns from a history of accesses it keeps,
// sized by a capacity (ARC, S3-FIFO, SIEVE, Auto), rather than ranking by
// a candidate's fields alone.
func (k Kind) Adaptive() bool { return k >= KindARC }

// Info is one strategy: its name (kvevict's Strategy), how it ranks, and
// the strategy-specific options it takes.
type Info struct {
	Name  string
	Kind  Kind
	Tunes Tunable
}

// strategies lists every strategy, indexed by Kind.
var strategies = [...]Info{
	{"lru", KindLRU, TuneSampling},
	{"mru", KindMRU, TuneSampling},
	{"fifo", KindFIFO, TuneSampling},
	{"filo", KindFILO, TuneSampling},
	{"lfu", KindLFU, TuneSampling | TuneLFUHalfLife},
	{"slru", KindSLRU, TuneSampling | TuneSLRUThreshold},
	{"qos_aware", KindQoS, TuneSampling},
	{"predictive", KindPredictive, TuneSampling | TuneLifetimeHorizon},
	{"frequency_cost", KindCost, TuneSampling | TuneCostAlpha | TuneCostDecay},
	{"arc", KindARC, TuneCapacity | TuneGhostCap},
	{"s3fifo", KindS3FIFO, TuneCapacity | TuneGhostCap},
	{"sieve", KindSIEVE, TuneCapacity},
	{"auto", KindAuto, TuneCapacity | TuneGhostCap},
}

// Strategies returns every strategy, in a fixed order.
func Strategies() []Info { return strategies[:] }

// Lookup returns the strategy named name: exactly, or as a person writes
// it, in any case with spaces around.
func Lookup(name string) (Info, bool) {
	for _, info := range strategies {
		if info.Name == name {
			return info, true
		}
	}
	trimmed := strings.TrimSpace(name)
	for _, info := range strategies {
		if strings.EqualFold(info.Name, trimmed) {
			return info, true
		}
	}
	return Info{}, false
}

// UnknownStrategy is the error for a name Lookup does not know: it
// matches [ErrUnknownStrategy] and lists the known names.
func UnknownStrategy(name string) error {
	names := make([]string, len(strategies))
	for i, info := range strategies {
		names[i] = info.Name
	}
	return fmt.Errorf("%w %q (known: %s)", ErrUnknownStrategy, name, strings.Join(names, ", "))
}
