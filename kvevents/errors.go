package kvevents

import "errors"

// The kinds of bad input, matched with [errors.Is]. A [Subscriber] counts
// each (see [Stats]), logs its first occurrence and goes on.
var (
	// ErrMalformed: a message that is not three frames with an 8-byte
	// sequence number, or a payload that is not a msgpack EventBatch. The
	// whole message is skipped.
	ErrMalformed = errors.New("kvevents: malformed message")
	// ErrUnknownEventType: an event whose tag is not one of vLLM's. The
	// event is skipped, the rest of its batch kept.
	ErrUnknownEventType = errors.New("kvevents: unknown event type")
	// ErrFieldType: a field of the wrong msgpack type, or a missing
	// required one. The event is skipped (the batch, for a batch field).
	ErrFieldType = errors.New("kvevents: wrong field type")
	// ErrOversized: a payload longer than the subscriber's limit
	// ([WithMaxPayload]). The message is skipped undecoded.
	ErrOversized = errors.New("kvevents: oversized message")
	// ErrGap: sequence numbers were missing from a topic's stream and
	// replay did not recover them.
	ErrGap = errors.New("kvevents: sequence gap")
)
