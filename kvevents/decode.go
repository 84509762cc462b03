package kvevents

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// maxSkipDepth is the nesting a skipped value may have; vLLM's deepest
// is 3.
const maxSkipDepth = 64

// checkValue reports whether raw is exactly one msgpack value.
func checkValue(raw []byte) error {
	x := &decoder{p: raw}
	if err := x.skip(0); err != nil {
		return err
	}
	if x.left() > 0 {
		return fmt.Errorf("%w: %d bytes after the value", ErrMalformed, x.left())
	}
	return nil
}

// Skipped counts the events [Decode] left out of a batch, by kind.
type Skipped struct {
	UnknownEvents  int // tags that are not one of vLLM's: [ErrUnknownEventType]
	MistypedEvents int // a field of the wrong type, or a required one missing: [ErrFieldType]
	// Errs holds the first error of each kind that occurred, for a log
	// line: at most one per kind.
	Errs []error
}

// Total returns how many events were left out.
func (s Skipped) Total() int { return s.UnknownEvents + s.MistypedEvents }

func (s *Skipped) add(err error) {
	first := false
	if errors.Is(err, ErrUnknownEventType) {
		first = s.UnknownEvents == 0
		s.UnknownEvents++
	} else {
		first = s.MistypedEvents == 0
		s.MistypedEvents++
	}
	if first {
		s.Errs = append(s.Errs, err)
	}
}

// allocFactor bounds what Decode may allocate, as a multiple of the
// payload's length (plus allocSlack), so that a payload of many tiny
// values cannot make a consumer allocate far more than it received.
// vLLM's batches, with 64-bit hashes and token ids of two or more bytes,
// stay well within it.
const (
	allocFactor = 16
	allocSlack  = 1 << 20
)

// What the decoder charges against its allocation budget for each value
// it keeps: the Go size of the value, rounded up.
const (
	costEvent = 256 // an event's struct, its interface value and its slices' headers
	costHash  = 32  // a Hash
	costInt   = 8   // a token id
)

// minEventLen is the length of the shortest event that decodes, the
// array ["BlockRemoved", []]: the events of a batch are at most the bytes
// left over it, which bounds the slice they go in before any is read.
const minEventLen = 15

// Decode reads a payload in any [Encoding], and any mix of them: the batch
// and each event may be an array or a map. Unknown map keys and array
// elements beyond the known fields are ignored, missing optional fields
// are None, and a negative integer hash (which older producers sent) is
// read as its two's complement.
//
// err, matching [ErrMalformed], [ErrFieldType] or [ErrOversized] (a
// payload whose values would take more than 16 times its length in memory
// once decoded), means the payload gave no batch. Otherwise b holds the
// events that decoded and skipped counts those left out. Decode never
// panics, does O(len(payload)) work and allocates at most a small multiple
// of len(payload); fields and events it skips allocate nothing.
func Decode(payload []byte) (b EventBatch, skipped Skipped, err error) {
	return decode(payload, nil, 0)
}

// decode is Decode, taking the memory of the batch from mem when it is
// not nil, and allocating at most limit bytes when limit > 0.
func decode(payload []byte, mem *Decoder, limit int) (b EventBatch, skipped Skipped, err error) {
	budget := allocFactor*len(payload) + allocSlack
	if limit > 0 {
		budget = min(budget, limit)
	}
	x := &decoder{p: payload, budget: budget, mem: mem}
	b, skipped, err = x.batch()
	if err == nil && x.left() > 0 {
		err = fmt.Errorf("%w: %d bytes after the batch", ErrMalformed, x.left())
	}
	if err != nil {
		return EventBatch{}, Skipped{}, err
	}
	return b, skipped, nil
}

// Decoder decodes payloads as [Decode] does, into memory it keeps from one
// call to the next, so that a consumer of a stream of batches, such as a
// [Mirror] behind a [Subscriber] (see [WithBatchReuse]), allocates nothing
// per batch once the buffers have grown to its batches' size. A batch
// decoded afresh is several allocations (its events, their hashes), which
// the collector then zeroes and scans: that is about half of Decode's
// time on a batch as an engine sends one per step.
//
// What the memory may hold is bounded as Decode's allocations are, by a
// multiple of the payload's length; between calls the Decoder keeps at
// most [MaxKeptBytes] of it, releasing a larger buffer that an unusually
// large batch made it grow.
//
// The zero Decoder is ready to use. A Decoder is not safe for concurrent
// use.
type Decoder struct {
	events  []Event
	stored  []storedBox
	more    []storedMore
	removed []removedBox
	hashes  []Hash
	tokens  []int64
	extra   []byte
	rank    int64
	// pins is set once the last batch held memory of its own (a bytes
	// hash, a string not a constant), which the next call clears rather
	// than keep alive.
	pins bool
	// limit, when > 0, bounds what a decode allocates below Decode's own
	// bound: a Subscriber's share of its budget for it.
	limit int
}

// MaxKeptBytes bounds the memory a [Decoder] keeps for its next call, per
// kind of buffer (events, hashes, token ids, extra keys), in bytes.
const MaxKeptBytes = 1 << 20

// Decode reads payload as [Decode] does. The batch it returns, its events
// and everything they point to belong to d and are valid until the next
// call: a caller that keeps any of it past that copies it.
func (d *Decoder) Decode(payload []byte) (EventBatch, Skipped, error) {
	// The last batch's events point only into d's buffers, which an
	// event's box points into too: clearing them lets go of any buffer
	// that kept drops. Its hashes are cleared only if one held memory of
	// its own.
	clear(d.events)
	clear(d.stored)
	clear(d.more)
	clear(d.removed)
	if d.pins {
		clear(d.hashes)
		d.pins = false
	}
	d.events = kept(d.events[:0])
	d.stored = kept(d.stored[:0])
	d.more = kept(d.more[:0])
	d.removed = kept(d.removed[:0])
	d.hashes = kept(d.hashes[:0])
	d.tokens = kept(d.tokens[:0])
	d.extra = kept(d.extra[:0])
	b, skipped, err := decode(payload, d, d.limit)
	if b.Events != nil {
		d.events = b.Events // d's own, or grown for this batch: the next one reuses it
	}
	return b, skipped, err
}

// kept returns s, or nil if its array is larger than a Decoder keeps.
func kept[T any](s []T) []T {
	if uintptr(cap(s))*reflect.TypeFor[T]().Size() > MaxKeptBytes {
		return nil
	}
	return s
}

// take returns the next n elements of the buffer *buf, growing it if it
// has no room for them; what an earlier take returned stays valid. A
// list of length zero is empty, not nil, as Decode's are.
func take[T any](buf *[]T, n int) []T {
	s := *buf
	if cap(s)-len(s) < n {
		s = make([]T, 0, max(n, 2*cap(s)))
	}
	out := s[len(s) : len(s)+n : len(s)+n]
	*buf = s[:len(s)+n]
	if out == nil {
		out = []T{}
	}
	return out
}

// storedBox returns a box for the next BlockStored, from d's buffer.
func (d *Decoder) storedBox() *storedBox { return &take(&d.stored, 1)[0] }

// removedBox returns a box for the next BlockRemoved, from d's buffer.
func (d *Decoder) removedBox() *removedBox { return &take(&d.removed, 1)[0] }

// decoder reads msgpack values off a byte slice, for the one schema it
// knows. Its methods return errors matching ErrMalformed when the stream
// cannot be followed, and ErrFieldType when a value was of the wrong type
// but was skipped, so the stream is still aligned.
type decoder struct {
	p      []byte // the payload
	i      int    // the read position in p
	budget int    // bytes the decoded values may still take
	// unknownSeen and mistypedSeen are set once an error of their kind
	// has been made with details; later ones are the static errors.
	unknownSeen, mistypedSeen bool
	mem                       *Decoder // where the batch's memory comes from; nil: allocated afresh
}

// pin notes that the batch holds memory of its own, which a Decoder
// clears before its next batch.
func (x *decoder) pin() {
	if x.mem != nil {
		x.mem.pins = true
	}
}

// left returns how many bytes are still to read.
func (x *decoder) left() int { return len(x.p) - x.i }

// errTruncated is every read past the payload's end: one static error, as
// a truncated payload ends the decode.
var errTruncated = fmt.Errorf("%w: the payload ends inside a value", ErrMalformed)

// charge takes n values of cost bytes each from the allocation budget,
// failing with an error matching ErrOversized once it is spent. An
// ErrOversized error, like a malformed one, ends the decode.
func (x *decoder) charge(n, cost int) error {
	if n > x.budget/cost { // cost is a constant power of two where charge is inlined: no division
		return errOversized
	}
	x.budget -= n * cost
	return nil
}

// errOversized is the error of a spent budget, which ends the decode.
var errOversized = fmt.Errorf("%w: decoded, it would take more than %d times its length", ErrOversized, allocFactor)

// fatal reports whether err ends the decode: the stream cannot be
// followed, or the budget is spent.
func fatal(err error) bool {
	return errors.Is(err, ErrMalformed) || errors.Is(err, ErrOversized)
}

func (x *decoder) peek() (byte, error) {
	if x.i >= len(x.p) {
		return 0, errTruncated
	}
	return x.p[x.i], nil
}

// uint reads a big-endian unsigned integer of size bytes: 1, 2, 4 or 8.
func (x *decoder) uint(size int) (uint64, error) {
	if size > x.left() {
		x.i = len(x.p)
		return 0, errTruncated
	}
	b := x.p[x.i : x.i+size]
	x.i += size
	switch size {
	case 1:
		return uint64(b[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(b)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(b)), nil
	}
	return binary.BigEndian.Uint64(b), nil
}

// bytes consumes and returns the next n bytes, n as a msgpack header gave
// it.
func (x *decoder) bytes(n uint64) ([]byte, error) {
	if n > uint64(x.left()) {
		x.i = len(x.p)
		return nil, errTruncated
	}
	b := x.p[x.i : x.i+int(n)]
	x.i += int(n)
	return b, nil
}

// mismatch skips the value at hand and reports it as the wrong type for
// name.
func (x *decoder) mismatch(name string, c byte, want string) error {
	if err := x.skip(0); err != nil {
		return err
	}
	if x.again(&x.mistypedSeen) {
		return errMistyped
	}
	return fmt.Errorf("%w: %s is msgpack 0x%02x, want %s", ErrFieldType, name, c, want)
}

// again reports whether an error of the kind seen flags was made already
// in this decode, and flags it: only the first of a kind is worth the
// allocation of its details.
func (x *decoder) again(seen *bool) bool {
	was := *seen
	*seen = true
	return was
}

func isInt(c byte) bool {
	return msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Int64)
}

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isMap(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

// skip consumes one value of any type, refusing nesting deeper than
// maxSkipDepth so that a hostile payload cannot exhaust the stack. It
// allocates nothing but the error that ends a decode.
func (x *decoder) skip(depth int) error {
	c, err := x.peek()
	if err != nil {
		return err
	}
	array := isArray(c)
	if !array && !isMap(c) {
		return x.skipScalar(c)
	}
	n, err := x.length(c)
	if err != nil {
		return err
	}
	if !array {
		n *= 2
	}
	if depth >= maxSkipDepth {
		return fmt.Errorf("%w: nested deeper than %d", ErrMalformed, maxSkipDepth)
	}
	for range n {
		if err := x.skip(depth + 1); err != nil {
			return err
		}
	}
	return nil
}

// skipScalar consumes a value of code c that is neither an array nor a
// map.
func (x *decoder) skipScalar(c byte) error {
	x.i++
	if msgpcode.IsFixedNum(c) {
		return nil
	}
	var body uint64
	var err error
	switch c {
	case msgpcode.Nil, msgpcode.False, msgpcode.True:
		return nil
	case msgpcode.Uint8, msgpcode.Int8:
		body = 1
	case msgpcode.Uint16, msgpcode.Int16:
		body = 2
	case msgpcode.Uint32, msgpcode.Int32, msgpcode.Float:
		body = 4
	case msgpcode.Uint64, msgpcode.Int64, msgpcode.Double:
		body = 8
	case msgpcode.Str8, msgpcode.Bin8:
		body, err = x.uint(1)
	case msgpcode.Str16, msgpcode.Bin16:
		body, err = x.uint(2)
	case msgpcode.Str32, msgpcode.Bin32:
		body, err = x.uint(4)
	case msgpcode.FixExt1, msgpcode.FixExt2, msgpcode.FixExt4, msgpcode.FixExt8, msgpcode.FixExt16:
		body = 1 + 1<<(c-msgpcode.FixExt1) // the type byte and 1 to 16 bytes
	case msgpcode.Ext8:
		body, err = x.uint(1)
		body++ // the type byte
	case msgpcode.Ext16:
		body, err = x.uint(2)
		body++
	case msgpcode.Ext32:
		body, err = x.uint(4)
		body++
	default:
		if msgpcode.IsFixedString(c) {
			body = uint64(c & msgpcode.FixedStrMask)
			break
		}
		return fmt.Errorf("%w: msgpack code 0x%02x is unused", ErrMalformed, c)
	}
	if err != nil {
		return err
	}
	_, err = x.bytes(body)
	return err
}

// length reads the header of an array or a map, whose code c is. A length
// the remaining bytes cannot hold is malformed: each element takes at
// least one byte, so nothing is allocated on a false promise.
func (x *decoder) length(c byte) (int, error) {
	x.i++
	var n uint64
	var err error
	switch c {
	case msgpcode.Array16, msgpcode.Map16:
		n, err = x.uint(2)
	case msgpcode.Array32, msgpcode.Map32:
		n, err = x.uint(4)
	default: // a fixarray or a fixmap
		n = uint64(c & 0x0f)
	}
	if err != nil {
		return 0, err
	}
	if n > uint64(x.left()) {
		return 0, fmt.Errorf("%w: length %d with %d bytes left", ErrMalformed, n, x.left())
	}
	return int(n), nil
}

// array reads the header of the array named name.
func (x *decoder) array(name string) (int, error) {
	c, err := x.peek()
	if err != nil {
		return 0, err
	}
	if !isArray(c) {
		return 0, x.mismatch(name, c, "an array")
	}
	return x.length(c)
}

// number consumes an integer of code c that is not a fixnum, and returns
// its bits: a signed one sign-extended.
func (x *decoder) number(c byte) (uint64, error) {
	x.i++
	switch c {
	case msgpcode.Uint8:
		return x.uint(1)
	case msgpcode.Uint16:
		return x.uint(2)
	case msgpcode.Uint32:
		return x.uint(4)
	case msgpcode.Uint64:
		return x.uint(8)
	case msgpcode.Int8:
		u, err := x.uint(1)
		return uint64(int8(u)), err
	case msgpcode.Int16:
		u, err := x.uint(2)
		return uint64(int16(u)), err
	case msgpcode.Int32:
		u, err := x.uint(4)
		return uint64(int32(u)), err
	}
	return x.uint(8) // Int64, as isInt left no other
}

func (x *decoder) int64(name string) (int64, error) {
	c, err := x.peek()
	if err != nil {
		return 0, err
	}
	if msgpcode.IsFixedNum(c) {
		x.i++
		return int64(int8(c)), nil
	}
	if !isInt(c) {
		return 0, x.mismatch(name, c, "an integer")
	}
	u, err := x.number(c)
	if err != nil {
		return 0, err
	}
	if c == msgpcode.Uint64 && u > math.MaxInt64 {
		return 0, fmt.Errorf("%w: %s = %d overflows int64", ErrFieldType, name, u)
	}
	return int64(u), nil
}

// str reads the header of a string, whose code c is, and returns its
// bytes.
func (x *decoder) str(c byte) ([]byte, error) {
	x.i++
	var n uint64
	var err error
	switch c {
	case msgpcode.Str8:
		n, err = x.uint(1)
	case msgpcode.Str16:
		n, err = x.uint(2)
	case msgpcode.Str32:
		n, err = x.uint(4)
	default: // a fixstr, as IsString left no other
		n = uint64(c & msgpcode.FixedStrMask)
	}
	if err != nil {
		return nil, err
	}
	return x.bytes(n)
}

func (x *decoder) string(name string) (string, error) {
	c, err := x.peek()
	if err != nil {
		return "", err
	}
	if !msgpcode.IsString(c) {
		return "", x.mismatch(name, c, "a string")
	}
	b, err := x.str(c)
	if err != nil {
		return "", err
	}
	// The media an engine names in every event cost no allocation.
	switch string(b) {
	case MediumGPU:
		return MediumGPU, nil
	case "CPU":
		return "CPU", nil
	}
	x.pin()
	return string(b), nil
}

func (x *decoder) hash(name string) (Hash, error) {
	c, err := x.peek()
	if err != nil {
		return Hash{}, err
	}
	switch {
	case msgpcode.IsBin(c):
		x.i++
		n, err := x.uint(1 << (c - msgpcode.Bin8)) // a length of 1, 2 or 4 bytes
		if err != nil {
			return Hash{}, err
		}
		b, err := x.bytes(n)
		if err != nil {
			return Hash{}, err
		}
		x.pin()
		return BytesHash(b), nil
	case msgpcode.IsFixedNum(c):
		x.i++
		return IntHash(uint64(int8(c))), nil
	case isInt(c):
		u, err := x.number(c)
		return IntHash(u), err
	}
	return Hash{}, x.mismatch(name, c, "an integer or bytes")
}

// isNil consumes a nil if one is next.
func (x *decoder) isNil() (bool, error) {
	c, err := x.peek()
	if err != nil || c != msgpcode.Nil {
		return false, err
	}
	x.i++
	return true, nil
}

// key reads a map key and returns the field it names, or fidNone for a
// string that names no field, allocating nothing.
func (x *decoder) key(what string) (fieldID, error) {
	if i := x.i; i < len(x.p) && msgpcode.IsFixedString(x.p[i]) {
		if end := i + 1 + int(x.p[i]&msgpcode.FixedStrMask); end <= len(x.p) {
			x.i = end
			return lookupField(x.p[i+1 : end]), nil
		}
	}
	c, err := x.peek()
	if err != nil {
		return fidNone, err
	}
	if !msgpcode.IsString(c) {
		return fidNone, x.mismatch(what, c, "a string")
	}
	b, err := x.str(c)
	if err != nil {
		return fidNone, err
	}
	return lookupField(b), nil
}

// skipRest consumes the n elements (of a map, n pairs) left in a
// container after an element that was of the wrong type, so the stream
// stays aligned, and returns err, the wrong element's error, unless the
// stream cannot be followed.
func (x *decoder) skipRest(n int, pairs bool, err error) error {
	if pairs {
		n *= 2
	}
	for range n {
		if e := x.skip(0); e != nil {
			return e
		}
	}
	return err
}

func (x *decoder) batch() (EventBatch, Skipped, error) {
	var b EventBatch
	var skipped Skipped
	c, err := x.peek()
	if err != nil {
		return b, skipped, err
	}
	if !isArray(c) && !isMap(c) {
		return b, skipped, fmt.Errorf("%w: batch is msgpack 0x%02x, want an array or a map", ErrMalformed, c)
	}
	var hasTS, hasEvents bool
	order := batchOrder
	err = x.record("batch", "batch key", &order, func(id fieldID) error {
		var err error
		switch id {
		case fidTS:
			hasTS = true
			b.TS, err = x.float(fieldTS)
			if err == nil && (math.IsNaN(b.TS) || math.IsInf(b.TS, 0)) {
				err = fmt.Errorf("%w: ts %v, want a finite number", ErrFieldType, b.TS)
			}
		case fidEvents:
			hasEvents = true
			err = x.events(&b.Events, &skipped)
		case fidDPRank:
			if x.mem == nil {
				err = optional(x, fieldDPRank, x.int64, &b.DataParallelRank)
				break
			}
			var set uint8
			if err = optionalValue(x, fieldDPRank, x.int64, &x.mem.rank, &set, 1); set != 0 {
				b.DataParallelRank = &x.mem.rank
			}
		default:
			err = x.skip(0)
		}
		return err
	})
	if err == nil && (!hasTS || !hasEvents) {
		err = fmt.Errorf("%w: batch without ts or events", ErrFieldType)
	}
	if err != nil {
		return EventBatch{}, Skipped{}, err
	}
	return b, skipped, nil
}

// events reads the batch's list of events, appending those that decode
// to evs and counting those left out in skipped.
func (x *decoder) events(evs *[]Event, skipped *Skipped) error {
	n, err := x.array(fieldEvents)
	if err != nil {
		return err
	}
	for k := range n {
		ev, err := x.event()
		if err != nil {
			if fatal(err) {
				return err
			}
			skipped.add(err)
			continue
		}
		if *evs == nil {
			if x.mem != nil && cap(x.mem.events) > 0 {
				*evs = x.mem.events[:0]
			} else {
				*evs = make([]Event, 0, min(n-k, x.left()/minEventLen+1))
			}
		}
		*evs = append(*evs, ev)
	}
	return nil
}

// record reads the batch in either encoding: an array of its fields in
// the order *order gives, or a map from field name to value, whose keys
// name batch fields (any other key is fidNone; keyWhat names a key in
// errors). set reads the value of the named field, or skips it; elements
// past the known fields are skipped. After an error matching ErrFieldType
// the rest of the record is skipped, so the stream stays aligned, and the
// first error is returned. event does the same for an event.
func (x *decoder) record(what, keyWhat string, order *[]fieldID, set func(fieldID) error) error {
	c, err := x.peek()
	if err != nil {
		return err
	}
	array := isArray(c)
	if !array && !isMap(c) {
		return x.mismatch(what, c, "an array or a map")
	}
	n, err := x.length(c)
	if err != nil {
		return err
	}
	for i := range n {
		if array {
			if i < len(*order) {
				err = set((*order)[i])
			} else {
				err = x.skip(0)
			}
		} else {
			var id fieldID
			if id, err = x.key(keyWhat); err == nil {
				if id >= fidType {
					id = fidNone
				}
				err = set(id)
			} else if !fatal(err) {
				if e := x.skip(0); e != nil { // the value of the bad key
					return e
				}
			}
		}
		if err != nil {
			if fatal(err) {
				return err
			}
			return x.skipRest(n-i-1, !array, err)
		}
	}
	return nil
}

func (x *decoder) float(name string) (float64, error) {
	c, err := x.peek()
	if err != nil {
		return 0, err
	}
	switch {
	case isInt(c):
		n, err := x.int64(name)
		return float64(n), err
	case c == msgpcode.Float:
		x.i++
		u, err := x.uint(4)
		return float64(math.Float32frombits(uint32(u))), err
	case c == msgpcode.Double:
		x.i++
		u, err := x.uint(8)
		return math.Float64frombits(u), err
	}
	return 0, x.mismatch(name, c, "a number")
}

// errUnknownTag and errMistyped stand for every error of their kind after
// the first of a decode, which alone carries details: a payload of many
// bad events then costs no allocation per event.
var (
	errUnknownTag = fmt.Errorf("%w: a tag that is not one of vLLM's", ErrUnknownEventType)
	errMistyped   = fmt.Errorf("%w: and more", ErrFieldType)
)

// event reads one event in either encoding. An error matching
// ErrUnknownEventType or ErrFieldType means the event was consumed and
// left out. It is record, for an event, without the call through a
// function value per field: the fields of every event of a batch pass
// here.
func (x *decoder) event() (Event, error) {
	c, err := x.peek()
	if err != nil {
		return nil, err
	}
	array := isArray(c)
	if !array && !isMap(c) {
		return nil, x.mismatch("event", c, "an array or a map")
	}
	n, err := x.length(c)
	if err != nil {
		return nil, err
	}
	var u union
	var hasTag bool
	order := tagOrder // the array encoding's element order, known once the tag is
	for i := range n {
		id := fidNone
		if array {
			if i < len(order) {
				id = order[i]
			}
		} else if id, err = x.key("event key"); err != nil {
			if fatal(err) {
				return nil, err
			}
			if e := x.skip(0); e != nil { // the value of the bad key
				return nil, e
			}
			return nil, x.skipRest(n-i-1, true, err)
		} else if id < fidType {
			id = fidNone
		}
		switch id {
		case fidNone:
			err = x.skip(0)
		case fidType:
			u.kind, err = x.tag()
			hasTag = err == nil
			switch u.kind {
			case kindStored:
				order = storedOrder
			case kindRemoved:
				order = removedOrder
			}
		default:
			err = x.field(id, &u)
		}
		if err != nil {
			if fatal(err) {
				return nil, err
			}
			return nil, x.skipRest(n-i-1, !array, err)
		}
	}
	if !hasTag {
		return nil, x.missing("event", fieldType)
	}
	return x.build(&u)
}

// tag reads an event's tag.
func (x *decoder) tag() (eventKind, error) {
	c, err := x.peek()
	if err != nil {
		return kindUnknown, err
	}
	if !msgpcode.IsString(c) {
		return kindUnknown, x.mismatch(fieldType, c, "a string")
	}
	b, err := x.str(c)
	if err != nil {
		return kindUnknown, err
	}
	return lookupTag(b), nil
}

// storedBox is a BlockStored with room for the values of the optional
// fields vLLM sets on every event, its parent and its medium, and
// removedBox likewise a BlockRemoved: an event is one allocation, its
// hashes another. The values of the fields vLLM leaves out unless a model
// or an adapter needs them are in a storedMore, allocated only for an
// event that sets one, so that the box Decode allocates for each of
// vLLM's usual events holds nothing it leaves unset.
type (
	storedBox struct {
		ev     BlockStored
		parent Hash
		medium string
	}
	storedMore struct {
		loraID, groupIdx, window int64
		loraName, specKind       string
	}
	removedBox struct {
		ev       BlockRemoved
		groupIdx int64
		medium   string
	}
)

// Which optional fields of a union are set (not None).
const (
	hasParent = 1 << iota
	hasMedium
	hasLoRAID
	hasGroupIdx
	hasWindow
	hasLoRAName
	hasSpecKind
	hasMore = hasLoRAID | hasGroupIdx | hasWindow | hasLoRAName | hasSpecKind // the values of a storedMore
)

// union holds the fields of any event while it is read; a map event may
// name its type after its fields.
type union struct {
	kind      eventKind
	s         storedBox  // the values; its event's pointers are set by build
	more      storedMore // the values of the optional fields that are rarely set
	has       uint8      // the optional fields set, as has* bits
	hasHashes bool
}

// build returns the event u holds, charging it to the budget.
func (x *decoder) build(u *union) (Event, error) {
	switch u.kind {
	case kindStored, kindRemoved:
		if !u.hasHashes {
			tag := TypeBlockStored
			if u.kind == kindRemoved {
				tag = TypeBlockRemoved
			}
			return nil, x.missing(tag, fieldHashes)
		}
	case kindCleared:
		return &AllBlocksCleared{}, nil
	default:
		if x.again(&x.unknownSeen) {
			return nil, errUnknownTag
		}
		return nil, fmt.Errorf("%w: an event whose tag is none of %q", ErrUnknownEventType,
			[]string{TypeBlockStored, TypeBlockRemoved, TypeAllBlocksCleared})
	}
	if err := x.charge(1, costEvent); err != nil {
		return nil, err
	}
	if u.kind == kindRemoved {
		var r *removedBox
		if x.mem != nil {
			r = x.mem.removedBox()
		} else {
			r = new(removedBox)
		}
		*r = removedBox{ev: BlockRemoved{BlockHashes: u.s.ev.BlockHashes}, groupIdx: u.more.groupIdx, medium: u.s.medium}
		if u.has&hasMedium != 0 {
			r.ev.Medium = &r.medium
		}
		if u.has&hasGroupIdx != 0 {
			r.ev.GroupIdx = &r.groupIdx
		}
		return &r.ev, nil
	}
	var s *storedBox
	if x.mem != nil {
		s = x.mem.storedBox()
	} else {
		s = new(storedBox)
	}
	*s = u.s
	e := &s.ev
	if u.has&hasParent != 0 {
		e.ParentBlockHash = &s.parent
	}
	if u.has&hasMedium != 0 {
		e.Medium = &s.medium
	}
	if u.has&hasMore == 0 {
		return e, nil
	}
	var m *storedMore
	if x.mem != nil {
		m = &take(&x.mem.more, 1)[0]
	} else {
		m = new(storedMore)
	}
	*m = u.more
	if u.has&hasLoRAID != 0 {
		e.LoRAID = &m.loraID
	}
	if u.has&hasGroupIdx != 0 {
		e.GroupIdx = &m.groupIdx
	}
	if u.has&hasWindow != 0 {
		e.KVCacheSpecSlidingWindow = &m.window
	}
	if u.has&hasLoRAName != 0 {
		e.LoRAName = &m.loraName
	}
	if u.has&hasSpecKind != 0 {
		e.KVCacheSpecKind = &m.specKind
	}
	return e, nil
}

// missing reports a required field left out of what.
func (x *decoder) missing(what, field string) error {
	if x.again(&x.mistypedSeen) {
		return errMistyped
	}
	return fmt.Errorf("%w: %s without %s", ErrFieldType, what, field)
}

// field reads the value of the event field id into u; unknown fields are
// skipped.
func (x *decoder) field(id fieldID, u *union) error {
	s, m := &u.s, &u.more
	switch id {
	case fidHashes:
		u.hasHashes = true
		return x.hashes(&s.ev.BlockHashes)
	case fidTokens:
		return x.tokens(&s.ev.TokenIDs)
	case fidBlockSize:
		if null, err := x.isNil(); null || err != nil {
			return err
		}
		n, err := x.int64(fieldBlockSize)
		if err == nil && n < 0 {
			if x.again(&x.mistypedSeen) {
				return errMistyped
			}
			return fmt.Errorf("%w: %s %d, want >= 0", ErrFieldType, fieldBlockSize, n)
		}
		s.ev.BlockSize = n
		return err
	case fidParent:
		if p, i := x.p, x.i; i+9 <= len(p) && p[i] == msgpcode.Uint64 { // vLLM's 64-bit hash
			s.parent = Hash{n: binary.BigEndian.Uint64(p[i+1 : i+9])}
			u.has |= hasParent
			x.i = i + 9
			return nil
		}
		return optionalValue(x, fieldParent, x.hash, &s.parent, &u.has, hasParent)
	case fidLoRAID:
		return optionalValue(x, fieldLoRAID, x.int64, &m.loraID, &u.has, hasLoRAID)
	case fidGroupIdx:
		return optionalValue(x, fieldGroupIdx, x.int64, &m.groupIdx, &u.has, hasGroupIdx)
	case fidSpecWindow:
		return optionalValue(x, fieldSpecWindow, x.int64, &m.window, &u.has, hasWindow)
	case fidMedium:
		if p, i := x.p, x.i; i+4 <= len(p) && string(p[i:i+4]) == "\xa3"+MediumGPU { // the fixstr "GPU"
			s.medium = MediumGPU
			u.has |= hasMedium
			x.i = i + 4
			return nil
		}
		return optionalValue(x, fieldMedium, x.string, &s.medium, &u.has, hasMedium)
	case fidLoRAName:
		return optionalValue(x, fieldLoRAName, x.string, &m.loraName, &u.has, hasLoRAName)
	case fidSpecKind:
		return optionalValue(x, fieldSpecKind, x.string, &m.specKind, &u.has, hasSpecKind)
	case fidExtraKeys:
		if null, err := x.isNil(); null || err != nil {
			return err
		}
		start := x.i
		if err := x.skip(0); err != nil {
			return err
		}
		if err := x.charge(x.i-start, 1); err != nil {
			return err
		}
		raw := x.p[start:x.i]
		if x.mem != nil {
			s.ev.ExtraKeys = take(&x.mem.extra, len(raw))
			copy(s.ev.ExtraKeys, raw)
		} else {
			s.ev.ExtraKeys = append([]byte(nil), raw...)
		}
		return nil
	}
	return x.skip(0)
}

// hashes reads a list of hashes into *hs. vLLM's 64-bit hashes, each a
// msgpack uint 64, take a path of their own.
func (x *decoder) hashes(hs *[]Hash) error {
	n, err := x.array(fieldHashes)
	if err != nil {
		return err
	}
	if err := x.charge(n, costHash); err != nil {
		return err
	}
	var out []Hash
	if x.mem != nil {
		out = take(&x.mem.hashes, n)
	} else {
		out = make([]Hash, n)
	}
	*hs = out
	p, i := x.p, x.i
	for k := range out {
		if i+9 <= len(p) && p[i] == msgpcode.Uint64 {
			// An integer Hash: its other fields are zero already, in a
			// new slice and in a Decoder's, which clears a batch's
			// hashes once one held bytes.
			out[k].n = binary.BigEndian.Uint64(p[i+1 : i+9])
			i += 9
			continue
		}
		x.i = i
		h, err := x.hash(fieldHashes)
		if err != nil {
			if fatal(err) {
				return err
			}
			return x.skipRest(n-k-1, false, err)
		}
		out[k] = h
		i = x.i
	}
	x.i = i
	return nil
}

// tokens reads a list of token ids into *ts.
func (x *decoder) tokens(ts *[]int64) error {
	n, err := x.array(fieldTokens)
	if err != nil {
		return err
	}
	if err := x.charge(n, costInt); err != nil {
		return err
	}
	var out []int64
	if x.mem != nil {
		out = take(&x.mem.tokens, n)
	} else {
		out = make([]int64, n)
	}
	*ts = out
	p, i := x.p, x.i
	for k := range out {
		switch {
		case i < len(p) && p[i] <= 0x7f: // a positive fixnum
			out[k] = int64(p[i])
			i++
			continue
		case i+3 <= len(p) && p[i] == msgpcode.Uint16:
			out[k] = int64(binary.BigEndian.Uint16(p[i+1 : i+3]))
			i += 3
			continue
		case i+5 <= len(p) && p[i] == msgpcode.Uint32:
			out[k] = int64(binary.BigEndian.Uint32(p[i+1 : i+5]))
			i += 5
			continue
		}
		x.i = i
		t, err := x.int64(fieldTokens)
		if err != nil {
			if fatal(err) {
				return err
			}
			return x.skipRest(n-k-1, false, err)
		}
		out[k] = t
		i = x.i
	}
	x.i = i
	return nil
}

// optional reads a value that may be None with read, into *p; None
// leaves *p as it was.
func optional[T any](x *decoder, name string, read func(string) (T, error), p **T) error {
	if null, err := x.isNil(); null || err != nil {
		return err
	}
	v, err := read(name)
	if err == nil {
		*p = &v
	}
	return err
}

// optionalValue is optional for a field of a union: it reads into *v and
// sets bit in *has; None leaves both as they were.
func optionalValue[T any](x *decoder, name string, read func(string) (T, error), v *T, has *uint8, bit uint8) error {
	if null, err := x.isNil(); null || err != nil {
		return err
	}
	r, err := read(name)
	if err == nil {
		*v = r
		*has |= bit
	}
	return err
}
