package sim

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/internal/sizing"
)

// Granularity is what one eviction candidate is: a sequence, a sequence's
// tail, or a single block. [Serve] takes any; [Replay]'s candidates are
// single blocks, and a report says so ([GranularityBlock]).
type Granularity string

// The granularities of [Serve], coarsest first.
const (
	// GranularitySequence: one candidate per sequence that released cached
	// blocks; a victim loses all of them ([NewSequenceEvictor]).
	GranularitySequence Granularity = "sequence"
	// GranularityTail: the same candidates, but the last victim loses only
	// the tail the need requires ([NewTailEvictor]). The default: it works
	// with every strategy, adaptive ones included.
	GranularityTail Granularity = "tail"
	// GranularityBlock: one candidate per cached block, in a prefix tree
	// that frees unreferenced leaves only, deepest first ([BlockEvictor]).
	// Key strategies and Auto (see [prefix.Ranks]); ARC, S3-FIFO and
	// SIEVE keep lists of sequences, which a tree of blocks does not.
	GranularityBlock Granularity = "block"
)

// DefaultGranularity is the granularity of [Serve] when ServeConfig names
// none.
const DefaultGranularity = GranularityTail

// Granularities returns the granularities [Serve] accepts, coarsest first.
func Granularities() []Granularity {
	return []Granularity{GranularitySequence, GranularityTail, GranularityBlock}
}

// ParseGranularity returns the granularity named name (case-insensitive),
// or an error listing the known ones.
func ParseGranularity(name string) (Granularity, error) {
	g := Granularity(strings.ToLower(strings.TrimSpace(name)))
	for _, known := range Granularities() {
		if g == known {
			return g, nil
		}
	}
	names := make([]string, 0, 3)
	for _, known := range Granularities() {
		names = append(names, string(known))
	}
	return "", fmt.Errorf("sim: unknown granularity %q (known: %s)", name, strings.Join(names, ", "))
}

// newEvictor returns the evictor of granularity g over strategy s, whose
// ticks are the pool's microseconds, for a pool of capacity blocks.
// options come last, so they may override what newEvictor sets.
func newEvictor(g Granularity, s kvevict.Strategy, capacity int, options []kvevict.Option, contract bool) (Evictor, error) {
	opts := append([]kvevict.Option{kvevict.WithTickDuration(time.Microsecond)}, options...)
	switch g {
	case GranularitySequence, GranularityTail:
		// Auto counts blocks by hash: its history and miniature caches
		// model the pool in blocks. The others count the sequences.
		opts = append(sizing.Pool{Blocks: capacity, Sequences: true}.Options(s), opts...)
		// An Index picks what the Policy would, without listing the pool.
		switch err := kvevict.IndexRanks(s, opts...); {
		case err == nil && !contract:
			x, err := kvevict.NewIndex(s, opts...)
			if err != nil {
				return nil, err
			}
			return newIndexEvictor(x, g == GranularityTail), nil
		case err != nil && !errors.Is(err, errors.ErrUnsupported):
			return nil, err
		}
		p, err := kvevict.New(s, opts...)
		if err != nil {
			return nil, err
		}
		if g == GranularityTail {
			return NewTailEvictor(p), nil
		}
		return NewSequenceEvictor(p), nil
	case GranularityBlock:
		e, err := NewBlockEvictor(s, capacity, opts...)
		if err != nil {
			return nil, fmt.Errorf("block granularity needs a key strategy or auto: %w", err)
		}
		return e, nil
	}
	_, err := ParseGranularity(string(g))
	return nil, err
}
