package tier

import "github.com/sagellm/kvevict/prefix"

// EventKind says what happened to the blocks of an [Event]: the prefix
// tree's kinds, one definition for both.
type EventKind = prefix.EventKind

// The event kinds: Stored, the blocks entered a tier; Removed, they left
// it, evicted or, in an exclusive hierarchy, taken up by a load.
const (
	Stored  = prefix.Stored
	Removed = prefix.Removed
)

// Event reports blocks that entered or left one tier, for an external
// index such as a KV-aware router's, which keeps the medium of each copy
// (vLLM's BlockStored and BlockRemoved carry it). Blocks are named by
// hash.
type Event struct {
	Kind   EventKind
	Medium Medium
	// Hashes are the blocks, owned by the receiver, in the order they
	// entered or left.
	Hashes []uint64
}
