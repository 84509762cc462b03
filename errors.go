package kvevict

import (
	"errors"
	"fmt"

	"github.com/sagellm/kvevict/internal/options"
)

// Errors returned by the package. Match them with [errors.Is].
var (
	// ErrInsufficientBlocks: the evictable candidates hold fewer blocks than
	// required. The error is an [*InsufficientBlocksError] with the numbers.
	ErrInsufficientBlocks = errors.New("kvevict: insufficient evictable blocks")
	// ErrInvalidCandidate: a candidate has a negative RefCount, AccessCount,
	// EstimatedLifetime, SeqLen or MaxLen, or repeats another's ID, or a
	// selection would free a block twice (listed twice by one victim, or by
	// two).
	ErrInvalidCandidate = errors.New("kvevict: invalid candidate")
	// ErrInvalidArgument: a negative requiredBlocks, or an invalid option.
	ErrInvalidArgument = options.ErrInvalidArgument
	// ErrUnknownStrategy: a name that is none of [Strategies].
	ErrUnknownStrategy = options.ErrUnknownStrategy
)

// InsufficientBlocksError reports a selection that could not be satisfied.
// Nothing was evicted. It matches [ErrInsufficientBlocks].
type InsufficientBlocksError struct {
	Required  int // blocks asked for
	Available int // blocks held by evictable (unpinned, unreferenced) candidates
}

func (e *InsufficientBlocksError) Error() string {
	return fmt.Sprintf("kvevict: insufficient evictable blocks: need %d, %d available", e.Required, e.Available)
}

// Is reports whether target is [ErrInsufficientBlocks].
func (e *InsufficientBlocksError) Is(target error) bool { return target == ErrInsufficientBlocks }

// ErrUnknownSequence: an [Index] operation named a sequence ID that the index
// does not hold (never added, removed, or evicted).
var ErrUnknownSequence = errors.New("kvevict: unknown sequence")
