package kvevents

// The decoder kvevents had before its own, over vmihailenco/msgpack's
// Decoder, kept as the reference FuzzDecodeDifferential compares Decode
// with. Two changes from it, both on malformed input: a bad map key whose
// value cannot be skipped ends the decode (it went on, misaligned), and a
// bin hash longer than the bytes left is malformed before the library
// allocates its claimed length.

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

var (
	refBatchFields   = []string{fieldTS, fieldEvents, fieldDPRank}
	refTagField      = []string{fieldType}
	refStoredFields  = []string{fieldHashes, fieldParent, fieldTokens, fieldBlockSize, fieldLoRAID, fieldMedium, fieldLoRAName, fieldExtraKeys, fieldGroupIdx, fieldSpecKind, fieldSpecWindow}
	refRemovedFields = []string{fieldHashes, fieldMedium, fieldGroupIdx}
	refStoredOrder   = append(refTagField[:1:1], refStoredFields...)
	refRemovedOrder  = append(refTagField[:1:1], refRemovedFields...)
	refEventKeys     = append(refTagField[:1:1], refStoredFields...)
	refTags          = []string{TypeBlockStored, TypeBlockRemoved, TypeAllBlocksCleared}
)

// binFits checks that the bin whose code c is next fits the bytes left,
// without moving the reader.
func (x *refDecoder) binFits(c byte) error {
	size := 1 << (c - msgpcode.Bin8)
	left := x.r.Len()
	if left < 1+size {
		return nil // the library reports the truncated header
	}
	var hdr [5]byte
	_, _ = x.r.ReadAt(hdr[:1+size], x.r.Size()-int64(left))
	n := 0
	for _, b := range hdr[1 : 1+size] {
		n = n<<8 | int(b)
	}
	if n > left-1-size {
		return fmt.Errorf("%w: bin of %d bytes with %d left", ErrMalformed, n, left-1-size)
	}
	return nil
}

// Decode reads a payload in any [Encoding], and any mix of them: the batch
// and each event may be an array or a map. Unknown map keys and array
// elements beyond the known fields are ignored, missing refOptional fields
// are None, and a negative integer hash (which older producers sent) is
// read as its two's complement.
//
// err, matching [ErrMalformed], [ErrFieldType] or [ErrOversized] (a
// payload whose values would take more than 16 times its length in memory
// once decoded), means the payload gave no batch. Otherwise b holds the
// events that decoded and skipped counts those left out. Decode never
// panics, does O(len(payload)) work and allocates at most a small multiple
// of len(payload); events it skips allocate nothing.
func refDecode(payload []byte) (b EventBatch, skipped Skipped, err error) {
	r := bytes.NewReader(payload)
	x := &refDecoder{d: msgpack.NewDecoder(r), r: r, budget: allocFactor*len(payload) + allocSlack}
	b, skipped, err = x.batch()
	if err == nil && r.Len() > 0 {
		err = fmt.Errorf("%w: %d bytes after the batch", ErrMalformed, r.Len())
	}
	if err != nil {
		return EventBatch{}, Skipped{}, err
	}
	return b, skipped, nil
}

// refDecoder reads msgpack values off a byte slice. Its methods return errors
// matching ErrMalformed when the stream cannot be followed, and
// ErrFieldType when a value was of the wrong type but was skipped, so the
// stream is still aligned.
type refDecoder struct {
	d      *msgpack.Decoder
	r      *bytes.Reader
	budget int // bytes the decoded values may still take
	// unknownSeen and mistypedSeen are set once an error of their kind
	// has been made with details; later ones are the static errors.
	unknownSeen, mistypedSeen bool
}

// charge takes n bytes from the allocation budget, failing with an error
// matching ErrOversized once it is spent. An ErrOversized error, like a
// malformed one, ends the decode.
func (x *refDecoder) charge(n int) error {
	x.budget -= n
	if x.budget < 0 {
		return fmt.Errorf("%w: decoded, it would take more than %d times its length", ErrOversized, allocFactor)
	}
	return nil
}

func refMalformed(err error) error {
	if fatal(err) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrMalformed, err)
}

func (x *refDecoder) peek() (byte, error) {
	c, err := x.d.PeekCode()
	if err != nil {
		return 0, refMalformed(err)
	}
	return c, nil
}

// mismatch skips the value at hand and reports it as the wrong type for
// name.
func (x *refDecoder) mismatch(name string, c byte, want string) error {
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
func (x *refDecoder) again(seen *bool) bool {
	was := *seen
	*seen = true
	return was
}

// skip consumes one value of any type, refusing nesting deeper than
// maxSkipDepth so that a hostile payload cannot exhaust the stack.
func (x *refDecoder) skip(depth int) error {
	c, err := x.peek()
	if err != nil {
		return err
	}
	var n int
	switch {
	case isArray(c):
		if n, err = x.length(true); err != nil {
			return err
		}
	case isMap(c):
		if n, err = x.length(false); err != nil {
			return err
		}
		n *= 2
	default:
		if err := x.d.Skip(); err != nil {
			return refMalformed(err)
		}
		return nil
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

// length reads an array (or map) header. A length the remaining bytes
// cannot hold is malformed: each element takes at least one byte, so
// nothing is allocated on a false promise.
func (x *refDecoder) length(array bool) (int, error) {
	var n int
	var err error
	if array {
		n, err = x.d.DecodeArrayLen()
	} else {
		n, err = x.d.DecodeMapLen()
	}
	if err != nil {
		return 0, refMalformed(err)
	}
	if n < 0 || n > x.r.Len() {
		return 0, fmt.Errorf("%w: length %d with %d bytes left", ErrMalformed, n, x.r.Len())
	}
	return n, nil
}

// container reads the header of an array (or map) named name.
func (x *refDecoder) container(name string, array bool) (int, error) {
	c, err := x.peek()
	if err != nil {
		return 0, err
	}
	if array && !isArray(c) {
		return 0, x.mismatch(name, c, "an array")
	}
	if !array && !isMap(c) {
		return 0, x.mismatch(name, c, "a map")
	}
	return x.length(array)
}

func (x *refDecoder) int64(name string) (int64, error) {
	c, err := x.peek()
	if err != nil {
		return 0, err
	}
	if !isInt(c) {
		return 0, x.mismatch(name, c, "an integer")
	}
	if c == msgpcode.Uint64 {
		u, err := x.d.DecodeUint64()
		if err != nil {
			return 0, refMalformed(err)
		}
		if u > math.MaxInt64 {
			return 0, fmt.Errorf("%w: %s = %d overflows int64", ErrFieldType, name, u)
		}
		return int64(u), nil
	}
	n, err := x.d.DecodeInt64()
	if err != nil {
		return 0, refMalformed(err)
	}
	return n, nil
}

func (x *refDecoder) string(name string) (string, error) {
	c, err := x.peek()
	if err != nil {
		return "", err
	}
	if !msgpcode.IsString(c) {
		return "", x.mismatch(name, c, "a string")
	}
	s, err := x.d.DecodeString()
	if err != nil {
		return "", refMalformed(err)
	}
	return s, nil
}

func (x *refDecoder) hash(name string) (Hash, error) {
	c, err := x.peek()
	if err != nil {
		return Hash{}, err
	}
	switch {
	case msgpcode.IsBin(c):
		if err := x.binFits(c); err != nil {
			return Hash{}, err
		}
		b, err := x.d.DecodeBytes()
		if err != nil {
			return Hash{}, refMalformed(err)
		}
		return BytesHash(b), nil
	case c == msgpcode.Uint64:
		u, err := x.d.DecodeUint64()
		if err != nil {
			return Hash{}, refMalformed(err)
		}
		return IntHash(u), nil
	case isInt(c):
		n, err := x.d.DecodeInt64()
		if err != nil {
			return Hash{}, refMalformed(err)
		}
		return IntHash(uint64(n)), nil
	}
	return Hash{}, x.mismatch(name, c, "an integer or bytes")
}

// isNil consumes a nil if one is next.
func (x *refDecoder) isNil() (bool, error) {
	c, err := x.peek()
	if err != nil || c != msgpcode.Nil {
		return false, err
	}
	if err := x.d.DecodeNil(); err != nil {
		return false, refMalformed(err)
	}
	return true, nil
}

// list reads an array named name, calling begin with its length (which
// the bytes left can hold) and elem for each element. After a wrong
// element it still consumes the rest, so the stream stays aligned, and
// returns the first error.
func (x *refDecoder) list(name string, begin func(n int) error, elem func() error) error {
	n, err := x.container(name, true)
	if err != nil {
		return err
	}
	if err := begin(n); err != nil {
		return err
	}
	var first error
	for range n {
		err := first
		if err == nil {
			err = elem()
		} else {
			err = x.skip(0)
		}
		if err != nil {
			if fatal(err) {
				return err
			}
			first = err
		}
	}
	return first
}

func (x *refDecoder) batch() (EventBatch, Skipped, error) {
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
	err = x.record("batch", "batch key", refBatchFields, func() []string { return refBatchFields }, func(name string) error {
		var err error
		switch name {
		case fieldTS:
			hasTS = true
			b.TS, err = x.float(name)
			if err == nil && (math.IsNaN(b.TS) || math.IsInf(b.TS, 0)) {
				err = fmt.Errorf("%w: ts %v, want a finite number", ErrFieldType, b.TS)
			}
		case fieldEvents:
			hasEvents = true
			err = x.list(name, func(int) error { return nil }, func() error {
				ev, err := x.event()
				if err != nil && !fatal(err) {
					skipped.add(err)
					return nil
				}
				if err == nil {
					b.Events = append(b.Events, ev)
				}
				return err
			})
		case fieldDPRank:
			err = refOptional(x, name, x.int64, &b.DataParallelRank)
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

// record reads a struct in either encoding: an array of its fields in the
// order names returns (called before each element, as an event's tag
// decides the order of the fields after it), or a map from field name to
// value, whose keys are matched against keys ("" for any other key;
// keyWhat names a key in errors). set
// reads the value of the named field, or skips it; elements past the
// known fields are skipped. After an error matching ErrFieldType the rest
// of the record is skipped, so the stream stays aligned, and the first
// error is returned.
func (x *refDecoder) record(what, keyWhat string, keys []string, names func() []string, set func(name string) error) error {
	c, err := x.peek()
	if err != nil {
		return err
	}
	array := isArray(c)
	if !array && !isMap(c) {
		return x.mismatch(what, c, "an array or a map")
	}
	n, err := x.length(array)
	if err != nil {
		return err
	}
	var first error
	for i := range n {
		switch {
		case first != nil:
			err = x.skip(0)
			if err == nil && !array {
				err = x.skip(0)
			}
		case array:
			if ns := names(); i < len(ns) {
				err = set(ns[i])
			} else {
				err = x.skip(0)
			}
		default:
			var key string
			if key, err = x.name(keyWhat, keys); err == nil {
				err = set(key)
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
			first = cmp.Or(first, err)
		}
	}
	return first
}

// refMaxName is the longest string name compares with its known names; a
// longer one is none of them.
const refMaxName = 32

// name reads a string and returns the one of known it equals, or "" for
// any other string, allocating nothing.
func (x *refDecoder) name(what string, known []string) (string, error) {
	c, err := x.peek()
	if err != nil {
		return "", err
	}
	if !msgpcode.IsString(c) {
		return "", x.mismatch(what, c, "a string")
	}
	n, err := x.strLen()
	if err != nil {
		return "", err
	}
	if n > x.r.Len() {
		return "", fmt.Errorf("%w: string of %d bytes with %d left", ErrMalformed, n, x.r.Len())
	}
	if n > refMaxName {
		_, _ = x.r.Seek(int64(n), io.SeekCurrent) // within the bytes left, checked above
		return "", nil
	}
	var buf [refMaxName]byte
	_, _ = x.r.Read(buf[:n])
	for _, k := range known {
		if string(buf[:n]) == k {
			return k, nil
		}
	}
	return "", nil
}

// strLen reads a msgpack string header and returns the string's length.
func (x *refDecoder) strLen() (int, error) {
	c, err := x.r.ReadByte()
	if err != nil {
		return 0, refMalformed(err)
	}
	if msgpcode.IsFixedString(c) {
		return int(c & msgpcode.FixedStrMask), nil
	}
	var size int
	switch c {
	case msgpcode.Str8:
		size = 1
	case msgpcode.Str16:
		size = 2
	default: // Str32, as IsString left no other
		size = 4
	}
	var buf [4]byte
	if _, err := io.ReadFull(x.r, buf[:size]); err != nil {
		return 0, refMalformed(err)
	}
	n := 0
	for _, b := range buf[:size] {
		n = n<<8 | int(b)
	}
	return n, nil
}

func (x *refDecoder) float(name string) (float64, error) {
	c, err := x.peek()
	if err != nil {
		return 0, err
	}
	if c != msgpcode.Float && c != msgpcode.Double && !isInt(c) {
		return 0, x.mismatch(name, c, "a number")
	}
	if isInt(c) {
		n, err := x.int64(name)
		return float64(n), err
	}
	f, err := x.d.DecodeFloat64()
	if err != nil {
		return 0, refMalformed(err)
	}
	return f, nil
}

// event reads one event in either encoding. An error matching
// ErrUnknownEventType or ErrFieldType means the event was consumed and
// left out.
func (x *refDecoder) event() (Event, error) {
	var u refUnion
	var hasTag bool
	order := refTagField // the array encoding's element names, known once the tag is
	err := x.record("event", "event key", refEventKeys, func() []string { return order }, func(name string) error {
		switch name {
		case "":
			return x.skip(0)
		case fieldType:
		default:
			return x.field(name, &u)
		}
		var err error
		u.tag, err = x.name(name, refTags)
		hasTag = err == nil
		switch u.tag {
		case TypeBlockStored:
			order = refStoredOrder
		case TypeBlockRemoved:
			order = refRemovedOrder
		}
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case !hasTag:
		return nil, x.missing("event", fieldType)
	}
	return x.build(&u)
}

// refUnion holds the fields of any event while it is read; a map event may
// name its type after its fields.
type refUnion struct {
	tag       string
	s         BlockStored
	hasHashes bool
}

// build returns the event u holds, charging it to the budget.
func (x *refDecoder) build(u *refUnion) (Event, error) {
	switch u.tag {
	case TypeBlockStored, TypeBlockRemoved:
		if !u.hasHashes {
			return nil, x.missing(u.tag, fieldHashes)
		}
	case TypeAllBlocksCleared:
		return &AllBlocksCleared{}, nil
	default:
		if x.again(&x.unknownSeen) {
			return nil, errUnknownTag
		}
		return nil, fmt.Errorf("%w: an event whose tag is none of %q", ErrUnknownEventType, refTags)
	}
	if err := x.charge(costEvent); err != nil {
		return nil, err
	}
	if u.tag == TypeBlockRemoved {
		return &BlockRemoved{BlockHashes: u.s.BlockHashes, Medium: u.s.Medium, GroupIdx: u.s.GroupIdx}, nil
	}
	s := u.s
	return &s, nil
}

// missing reports a required field left out of what.
func (x *refDecoder) missing(what, field string) error {
	if x.again(&x.mistypedSeen) {
		return errMistyped
	}
	return fmt.Errorf("%w: %s without %s", ErrFieldType, what, field)
}

// field reads the value of the field name into u; unknown names are
// skipped.
func (x *refDecoder) field(name string, u *refUnion) error {
	s := &u.s
	switch name {
	case fieldHashes:
		u.hasHashes = true
		return x.list(name, func(n int) error {
			if err := x.charge(n * costHash); err != nil {
				return err
			}
			s.BlockHashes = make([]Hash, 0, n)
			return nil
		}, func() error {
			h, err := x.hash(name)
			s.BlockHashes = append(s.BlockHashes, h)
			return err
		})
	case fieldTokens:
		return x.list(name, func(n int) error {
			if err := x.charge(n * costInt); err != nil {
				return err
			}
			s.TokenIDs = make([]int64, 0, n)
			return nil
		}, func() error {
			n, err := x.int64(name)
			s.TokenIDs = append(s.TokenIDs, n)
			return err
		})
	case fieldBlockSize:
		if null, err := x.isNil(); null || err != nil {
			return err
		}
		n, err := x.int64(name)
		if err == nil && n < 0 {
			if x.again(&x.mistypedSeen) {
				return errMistyped
			}
			return fmt.Errorf("%w: %s %d, want >= 0", ErrFieldType, name, n)
		}
		s.BlockSize = n
		return err
	case fieldParent:
		return refOptional(x, name, x.hash, &s.ParentBlockHash)
	case fieldLoRAID:
		return refOptional(x, name, x.int64, &s.LoRAID)
	case fieldGroupIdx:
		return refOptional(x, name, x.int64, &s.GroupIdx)
	case fieldSpecWindow:
		return refOptional(x, name, x.int64, &s.KVCacheSpecSlidingWindow)
	case fieldMedium:
		return refOptional(x, name, x.string, &s.Medium)
	case fieldLoRAName:
		return refOptional(x, name, x.string, &s.LoRAName)
	case fieldSpecKind:
		return refOptional(x, name, x.string, &s.KVCacheSpecKind)
	case fieldExtraKeys:
		if null, err := x.isNil(); null || err != nil {
			return err
		}
		start := x.r.Size() - int64(x.r.Len())
		if err := x.skip(0); err != nil {
			return err
		}
		end := x.r.Size() - int64(x.r.Len())
		if err := x.charge(int(end - start)); err != nil {
			return err
		}
		raw := make([]byte, end-start)
		_, _ = x.r.ReadAt(raw, start) // inside what was just read
		s.ExtraKeys = raw
		return nil
	}
	return x.skip(0)
}

// refOptional reads a value that may be None with read, into *p; None
// leaves *p nil.
func refOptional[T any](x *refDecoder, name string, read func(string) (T, error), p **T) error {
	if null, err := x.isNil(); null || err != nil {
		return err
	}
	v, err := read(name)
	if err == nil {
		*p = &v
	}
	return err
}
