package kvevents

import (
	"fmt"
)

// Encoding is how structs go on the wire. Both are msgspec's encodings of
// the same schema with omit_defaults: a field equal to its default (None)
// is left out.
type Encoding uint8

const (
	// EncodingMap is vLLM's current encoding and the default: the batch is
	// a map {"ts", "events", "data_parallel_rank"} and each event a map
	// whose "type" key holds its tag, followed by its named fields. Fields
	// with a default are left out when they equal it.
	EncodingMap Encoding = iota
	// EncodingArray is msgspec's array_like encoding, which vLLM used
	// first: the batch is [ts, events] (with data_parallel_rank third when
	// set) and an event the array [tag, field, ...] in field order, its
	// trailing fields that equal their defaults left out.
	EncodingArray
)

// String returns "map" or "array".
func (e Encoding) String() string {
	switch e {
	case EncodingMap:
		return "map"
	case EncodingArray:
		return "array"
	}
	return fmt.Sprintf("Encoding(%d)", uint8(e))
}

// Field names, as vLLM's structs spell them.
const (
	fieldType       = "type"
	fieldTS         = "ts"
	fieldEvents     = "events"
	fieldDPRank     = "data_parallel_rank"
	fieldHashes     = "block_hashes"
	fieldParent     = "parent_block_hash"
	fieldTokens     = "token_ids"
	fieldBlockSize  = "block_size"
	fieldLoRAID     = "lora_id"
	fieldMedium     = "medium"
	fieldLoRAName   = "lora_name"
	fieldExtraKeys  = "extra_keys"
	fieldGroupIdx   = "group_idx"
	fieldSpecKind   = "kv_cache_spec_kind"
	fieldSpecWindow = "kv_cache_spec_sliding_window"
	storedRequired  = 7 // BlockStored's fields without a default
	removedRequired = 2 // BlockRemoved's fields without a default
	batchRequired   = 2 // EventBatch's fields without a default
)

// The field orders of vLLM's structs, which the array encoding follows.
var (
	batchFields   = []string{fieldTS, fieldEvents, fieldDPRank}
	tagField      = []string{fieldType}
	storedFields  = []string{fieldHashes, fieldParent, fieldTokens, fieldBlockSize, fieldLoRAID, fieldMedium, fieldLoRAName, fieldExtraKeys, fieldGroupIdx, fieldSpecKind, fieldSpecWindow}
	removedFields = []string{fieldHashes, fieldMedium, fieldGroupIdx}
)
