package kvevict

import (
	"fmt"
	"strings"
)

// Strategy names an eviction strategy. Its string form is the name used in
// configuration files and command-line flags.
type Strategy string

// The strategies. Each is a priority key over a candidate; the candidate with
// the smallest key is evicted first and equal keys break by ID ascending.
const (
	LRU           Strategy = "lru"            // LastAccess: least recently used first
	MRU           Strategy = "mru"            // -LastAccess: most recently used first
	FIFO          Strategy = "fifo"           // CreatedAt: oldest first
	FILO          Strategy = "filo"           // -CreatedAt: newest first
	LFU           Strategy = "lfu"            // (AccessCount, LastAccess), optional decay
	SLRU          Strategy = "slru"           // (AccessCount >= threshold, LastAccess)
	QoSAware      Strategy = "qos_aware"      // (Priority, LastAccess)
	Predictive    Strategy = "predictive"     // predicted end of usefulness, soonest first
	FrequencyCost Strategy = "frequency_cost" // AccessCount x len(Blocks)^alpha / (1 + decay x age)
)

// strategyInfo is one registered strategy: a key kind, or for an adaptive
// strategy a constructor of the history that ranks instead of a key.
type strategyInfo struct {
	name    Strategy
	kind    keyKind
	history func(*config) history // nil for key strategies
	tunes   tunable               // the strategy-specific options it takes
}

// registry lists every strategy in the order [Strategies] reports them.
var registry = []strategyInfo{
	{name: LRU, kind: kindLRU, tunes: tuneSampling},
	{name: MRU, kind: kindMRU, tunes: tuneSampling},
	{name: FIFO, kind: kindFIFO, tunes: tuneSampling},
	{name: FILO, kind: kindFILO, tunes: tuneSampling},
	{name: LFU, kind: kindLFU, tunes: tuneSampling | tuneLFUHalfLife},
	{name: SLRU, kind: kindSLRU, tunes: tuneSampling | tuneSLRUThreshold},
	{name: QoSAware, kind: kindQoS, tunes: tuneSampling},
	{name: Predictive, kind: kindPredictive, tunes: tuneSampling | tuneLifetimeHorizon},
	{name: FrequencyCost, kind: kindCost, tunes: tuneSampling | tuneCostAlpha | tuneCostDecay},
	{name: ARC, kind: kindHistory, history: newARC, tunes: tuneCapacity},
	{name: S3FIFO, kind: kindHistory, history: newS3FIFO, tunes: tuneCapacity},
	{name: SIEVE, kind: kindHistory, history: newSIEVE, tunes: tuneCapacity},
	{name: Auto, kind: kindHistory, history: newAuto, tunes: tuneCapacity},
}

func lookup(s Strategy) (strategyInfo, bool) {
	for _, info := range registry {
		if info.name == s {
			return info, true
		}
	}
	// A name as a person writes it: any case, spaces around (ParseStrategy's
	// rule), so that New("LRU") takes what the command and ParseStrategy do.
	name := strings.TrimSpace(string(s))
	for _, info := range registry {
		if strings.EqualFold(string(info.name), name) {
			return info, true
		}
	}
	return strategyInfo{}, false
}

// Adaptive reports whether s ranks by the history of accesses it keeps
// (ARC, S3-FIFO, SIEVE, Auto) rather than by a key over each candidate's
// fields.
// An adaptive strategy takes [WithCapacity] and works with [Policy] and
// [Index] (there, through [Index.UpdateAccess]); a prefix tree takes Auto
// only. False for an unknown strategy.
func (s Strategy) Adaptive() bool {
	info, ok := lookup(s)
	return ok && info.history != nil
}

// Strategies returns every registered strategy, in a fixed order.
func Strategies() []Strategy {
	out := make([]Strategy, len(registry))
	for i, info := range registry {
		out[i] = info.name
	}
	return out
}

// ParseStrategy returns the strategy with the given name, ignoring case and
// surrounding space, for configuration flags. An unknown name returns an
// error matching [ErrUnknownStrategy] that lists the known ones.
func ParseStrategy(name string) (Strategy, error) {
	s := Strategy(strings.ToLower(strings.TrimSpace(name)))
	if _, ok := lookup(s); !ok {
		return "", unknownStrategy(name)
	}
	return s, nil
}

func unknownStrategy(name string) error {
	names := make([]string, len(registry))
	for i, info := range registry {
		names[i] = string(info.name)
	}
	return fmt.Errorf("%w %q (known: %s)", ErrUnknownStrategy, name, strings.Join(names, ", "))
}
