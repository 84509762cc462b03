package kvevents

import (
	"fmt"
	"strings"
)

// Encoding is how structs go on the wire. All are msgspec's encodings of
// the same schema with omit_defaults: a field equal to its default (None)
// is left out. [Decode] reads every one of them, and any mix.
type Encoding uint8

const (
	// EncodingMixed is what current vLLM sends, and the default: the batch
	// is the array [ts, events, data_parallel_rank] and each event a map
	// whose "type" key holds its tag, followed by its named fields. llm-d's
	// indexer reads only this form, and only with data_parallel_rank
	// present ([WithDataParallelRank] sets it on every batch a [Publisher]
	// sends).
	EncodingMixed Encoding = iota
	// EncodingMap writes the batch as the map {"ts", "events",
	// "data_parallel_rank"} as well as each event.
	EncodingMap
	// EncodingArray is msgspec's array_like encoding, which vLLM used
	// first: the batch is [ts, events] (with data_parallel_rank third when
	// set) and an event the array [tag, field, ...] in field order, its
	// trailing fields that equal their defaults left out.
	EncodingArray
)

// encodingNames are the encodings' names, as String and ParseEncoding
// spell them.
var encodingNames = [...]string{EncodingMixed: "mixed", EncodingMap: "map", EncodingArray: "array"}

// String returns "mixed", "map" or "array".
func (e Encoding) String() string {
	if int(e) < len(encodingNames) {
		return encodingNames[e]
	}
	return fmt.Sprintf("Encoding(%d)", uint8(e))
}

// ParseEncoding returns the encoding named s, as String names it.
func ParseEncoding(s string) (Encoding, error) {
	for e, name := range encodingNames {
		if s == name {
			return Encoding(e), nil
		}
	}
	return 0, fmt.Errorf("kvevents: unknown encoding %q, want %s", s, strings.Join(encodingNames[:], ", "))
}

// valid reports whether e is one of the encodings.
func (e Encoding) valid() bool { return int(e) < len(encodingNames) }

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

// The field orders of vLLM's structs, which the array encoding follows,
// and the element names of an array event, its tag first.
var (
	batchFields   = []string{fieldTS, fieldEvents, fieldDPRank}
	tagField      = []string{fieldType}
	storedFields  = []string{fieldHashes, fieldParent, fieldTokens, fieldBlockSize, fieldLoRAID, fieldMedium, fieldLoRAName, fieldExtraKeys, fieldGroupIdx, fieldSpecKind, fieldSpecWindow}
	removedFields = []string{fieldHashes, fieldMedium, fieldGroupIdx}
	storedOrder   = append(tagField[:1:1], storedFields...)
	removedOrder  = append(tagField[:1:1], removedFields...)
	// eventKeys are the keys a map event may hold; the decoder matches a
	// key against them without allocating, and skips any other.
	eventKeys = append(tagField[:1:1], storedFields...)
	tags      = []string{TypeBlockStored, TypeBlockRemoved, TypeAllBlocksCleared}
)
