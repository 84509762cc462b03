package tier

// EventKind says what happened to the blocks of an [Event].
type EventKind uint8

// The event kinds.
const (
	// Stored: the blocks entered a tier.
	Stored EventKind = iota + 1
	// Removed: the blocks left a tier, evicted or taken up by a load of an
	// exclusive hierarchy.
	Removed
)

// String returns "stored" or "removed".
func (k EventKind) String() string {
	switch k {
	case Stored:
		return "stored"
	case Removed:
		return "removed"
	}
	return "unknown"
}

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
