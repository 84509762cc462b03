package kvevents

// Event is one KV cache event of an [EventBatch]: a [*BlockStored], a
// [*BlockRemoved] or a [*AllBlocksCleared]. The set is closed: the decoder
// skips event types it does not know (see [ErrUnknownEventType]).
type Event interface {
	// Type returns the event's tag on the wire: its vLLM class name.
	Type() string
	isEvent()
}

// EventBatch is the payload of one message: vLLM's
// EventBatch(ts, events, data_parallel_rank=None).
type EventBatch struct {
	// TS is when the batch was made, in seconds since the Unix epoch.
	TS     float64
	Events []Event
	// DataParallelRank is the engine's data-parallel rank; nil is None and
	// is left off the wire.
	DataParallelRank *int64
}

// BlockStored reports blocks the engine cached: vLLM's BlockStored. The
// fields are in vLLM's order. Pointer fields are optional: nil is None.
type BlockStored struct {
	// BlockHashes are the new blocks, each the parent of the next.
	BlockHashes []Hash
	// ParentBlockHash is the resident block that BlockHashes[0] follows;
	// nil when the chain starts the prompt.
	ParentBlockHash *Hash
	// TokenIDs are the tokens of the blocks, when the producer knows them.
	TokenIDs  []int64
	BlockSize int64   // tokens per block
	LoRAID    *int64  // the LoRA adapter's id; vLLM keeps it for compatibility
	Medium    *string // where the blocks live, such as "GPU"
	LoRAName  *string // the LoRA adapter the blocks' hashes include
	// ExtraKeys is the raw msgpack of vLLM's extra_keys (a list of tuples
	// or None per block), kept as received: one msgpack value, or nil for
	// None.
	ExtraKeys []byte
	// GroupIdx is the KV cache group of the blocks, for models whose layers
	// keep several kinds of cache.
	GroupIdx *int64
	// KVCacheSpecKind and KVCacheSpecSlidingWindow describe the group's
	// cache, such as a sliding window of that many tokens.
	KVCacheSpecKind          *string
	KVCacheSpecSlidingWindow *int64
}

// BlockRemoved reports blocks the engine freed: vLLM's BlockRemoved.
type BlockRemoved struct {
	BlockHashes []Hash  // the freed blocks
	Medium      *string // where they lived
	GroupIdx    *int64  // their KV cache group, as in BlockStored
}

// AllBlocksCleared reports that the engine emptied its cache: vLLM's
// AllBlocksCleared.
type AllBlocksCleared struct{}

// The event tags, as vLLM names its classes.
const (
	TypeBlockStored      = "BlockStored"
	TypeBlockRemoved     = "BlockRemoved"
	TypeAllBlocksCleared = "AllBlocksCleared"
)

// Type returns "BlockStored".
func (*BlockStored) Type() string { return TypeBlockStored }

// Type returns "BlockRemoved".
func (*BlockRemoved) Type() string { return TypeBlockRemoved }

// Type returns "AllBlocksCleared".
func (*AllBlocksCleared) Type() string { return TypeAllBlocksCleared }

func (*BlockStored) isEvent()      {}
func (*BlockRemoved) isEvent()     {}
func (*AllBlocksCleared) isEvent() {}
