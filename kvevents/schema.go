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

// lookupField returns the field named b, or fidNone. It picks the one
// name b can be by its length and first letter, and compares b with that
// name as a constant, which the compiler does inline.
func lookupField(b []byte) fieldID {
	if len(b) == 0 {
		return fidNone
	}
	var ok bool
	var id fieldID
	switch len(b) {
	case len(fieldTS):
		ok, id = string(b) == fieldTS, fidTS
	case len(fieldType):
		ok, id = string(b) == fieldType, fidType
	case len(fieldEvents): // and fieldMedium
		if b[0] == 'e' {
			ok, id = string(b) == fieldEvents, fidEvents
		} else {
			ok, id = string(b) == fieldMedium, fidMedium
		}
	case len(fieldLoRAID):
		ok, id = string(b) == fieldLoRAID, fidLoRAID
	case len(fieldTokens): // and fieldLoRAName, fieldGroupIdx
		switch b[0] {
		case 't':
			ok, id = string(b) == fieldTokens, fidTokens
		case 'l':
			ok, id = string(b) == fieldLoRAName, fidLoRAName
		default:
			ok, id = string(b) == fieldGroupIdx, fidGroupIdx
		}
	case len(fieldBlockSize): // and fieldExtraKeys
		if b[0] == 'b' {
			ok, id = string(b) == fieldBlockSize, fidBlockSize
		} else {
			ok, id = string(b) == fieldExtraKeys, fidExtraKeys
		}
	case len(fieldHashes):
		ok, id = string(b) == fieldHashes, fidHashes
	case len(fieldParent):
		ok, id = string(b) == fieldParent, fidParent
	case len(fieldDPRank): // and fieldSpecKind
		if b[0] == 'd' {
			ok, id = string(b) == fieldDPRank, fidDPRank
		} else {
			ok, id = string(b) == fieldSpecKind, fidSpecKind
		}
	case len(fieldSpecWindow):
		ok, id = string(b) == fieldSpecWindow, fidSpecWindow
	}
	if !ok {
		return fidNone
	}
	return id
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
