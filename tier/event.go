package tier

import "github.com/sagellm/kvevict/prefix"

// EventKind says what happened to the blocks of an [Event]: the prefix
// tree's kinds, one definition for both.
type EventKind = prefix.EventKind

// The event kinds of a tier, the values of package prefix's kinds, so that
// an index fed by the GPU's tree and the tiers below reads one set.
const (
	// Stored: the blocks entered the tier: a store (a write-through or
	// selective offer, a demotion under write-back) or, on the GPU, an
	// admission. The tier held none of them before.
	Stored EventKind = prefix.Stored
	// Removed: the blocks left the tier, evicted by its strategy or, in an
	// exclusive hierarchy, taken up to the tier above by a load, in the
	// order they left.
	Removed EventKind = prefix.Removed
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
