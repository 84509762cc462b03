package prefix

// EventKind says what happened to the blocks of an [Event].
type EventKind uint8

// The event kinds.
const (
	// Stored: Insert added the blocks, a chain each the parent of the next.
	Stored EventKind = iota + 1
	// Removed: Evict freed the blocks, in eviction order.
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

// Event reports blocks that entered or left the tree, for an external index
// such as a KV-aware router's (see [WithEvents]). A block is named by its
// hash, which identifies it when hashes are chained (each block's hash
// covers its prefix, as vLLM's and the Mooncake trace's are); the tree
// itself only needs a hash to be unique among its siblings.
type Event struct {
	Kind EventKind
	// Hashes are the blocks, owned by the receiver. For Stored, a path:
	// Hashes[0] is a child of Parent, each next hash a child of the one
	// before. For Removed, leaves in the order they were freed.
	Hashes []uint64
	// Parent is the hash of the block that Stored's chain hangs from, when
	// HasParent; a chain without one starts at the root. Unused for Removed.
	Parent    uint64
	HasParent bool
	// PrefixLen is how many blocks of the inserted path were already in the
	// tree: the depth of Hashes[0] is PrefixLen (0 for a root child).
	PrefixLen int
}
