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

// fieldID names a field of vLLM's structs for the decoder, which matches
// a key against the names without allocating. Batch fields come first and
// event fields last, so that each side's keys are one range.
type fieldID uint8

const (
	fidNone fieldID = iota // a name that is none of the fields the context knows
	fidTS
	fidEvents
	fidDPRank
	fidType // the first event field
	fidHashes
	fidParent
	fidTokens
	fidBlockSize
	fidLoRAID
	fidMedium
	fidLoRAName
	fidExtraKeys
	fidGroupIdx
	fidSpecKind
	fidSpecWindow
)

// lookupField returns the field named b, or fidNone. It tells the names
// apart by length and a letter before it compares the whole name.
func lookupField(b []byte) fieldID {
	if len(b) < 2 {
		return fidNone
	}
	var id fieldID
	switch len(b) {
	case len(fieldTS):
		id = fidTS
	case len(fieldType):
		id = fidType
	case len(fieldEvents): // and fieldMedium
		id = pick(b[0] == 'e', fidEvents, fidMedium)
	case len(fieldLoRAID):
		id = fidLoRAID
	case len(fieldTokens): // and fieldLoRAName, fieldGroupIdx
		id = pick(b[0] == 't', fidTokens, pick(b[0] == 'l', fidLoRAName, fidGroupIdx))
	case len(fieldBlockSize): // and fieldExtraKeys
		id = pick(b[0] == 'b', fidBlockSize, fidExtraKeys)
	case len(fieldHashes):
		id = fidHashes
	case len(fieldParent):
		id = fidParent
	case len(fieldDPRank): // and fieldSpecKind
		id = pick(b[0] == 'd', fidDPRank, fidSpecKind)
	case len(fieldSpecWindow):
		id = fidSpecWindow
	default:
		return fidNone
	}
	if string(b) != fieldNames[id] {
		return fidNone
	}
	return id
}

// pick returns a if cond, else b.
func pick(cond bool, a, b fieldID) fieldID {
	if cond {
		return a
	}
	return b
}

// fieldNames are the names of the fields, by fieldID.
var fieldNames = [...]string{
	fidTS: fieldTS, fidEvents: fieldEvents, fidDPRank: fieldDPRank, fidType: fieldType,
	fidHashes: fieldHashes, fidParent: fieldParent, fidTokens: fieldTokens, fidBlockSize: fieldBlockSize,
	fidLoRAID: fieldLoRAID, fidMedium: fieldMedium, fidLoRAName: fieldLoRAName, fidExtraKeys: fieldExtraKeys,
	fidGroupIdx: fieldGroupIdx, fidSpecKind: fieldSpecKind, fidSpecWindow: fieldSpecWindow,
}

// The field orders of vLLM's structs, which the array encoding follows,
// and the element orders of an array event, its tag first.
var (
	batchOrder   = []fieldID{fidTS, fidEvents, fidDPRank}
	tagOrder     = []fieldID{fidType}
	storedOrder  = []fieldID{fidType, fidHashes, fidParent, fidTokens, fidBlockSize, fidLoRAID, fidMedium, fidLoRAName, fidExtraKeys, fidGroupIdx, fidSpecKind, fidSpecWindow}
	removedOrder = []fieldID{fidType, fidHashes, fidMedium, fidGroupIdx}
)

// eventKind is an event's tag, as the decoder reads it.
type eventKind uint8

const (
	kindUnknown eventKind = iota // a tag that is not one of vLLM's
	kindStored
	kindRemoved
	kindCleared
)

// lookupTag returns the event kind whose tag is b.
func lookupTag(b []byte) eventKind {
	switch string(b) {
	case TypeBlockStored:
		return kindStored
	case TypeBlockRemoved:
		return kindRemoved
	case TypeAllBlocksCleared:
		return kindCleared
	}
	return kindUnknown
}
