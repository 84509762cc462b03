package kvevents

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// maxSkipDepth is the nesting a skipped value may have; vLLM's deepest
// is 3.
const maxSkipDepth = 64

// checkValue reports whether raw is exactly one msgpack value.
func checkValue(raw []byte) error {
	r := bytes.NewReader(raw)
	x := &decoder{d: msgpack.NewDecoder(r), r: r}
	if err := x.skip(0); err != nil {
		return err
	}
	if r.Len() > 0 {
		return fmt.Errorf("%w: %d bytes after the value", ErrMalformed, r.Len())
	}
	return nil
}

// Decode reads a payload in either encoding, and any mix of them: the
// batch and each event may be an array or a map. Unknown map keys and
// array elements beyond the known fields are ignored, missing optional
// fields are None, and a negative integer hash (which older producers
// sent) is read as its two's complement.
//
// err, matching [ErrMalformed] or [ErrFieldType], means the payload gave
// no batch. Otherwise b holds the events that decoded, and skipped has one
// error per event left out, each matching [ErrUnknownEventType] or
// [ErrFieldType]. Decode never panics and allocates O(len(payload)).
func Decode(payload []byte) (b EventBatch, skipped []error, err error) {
	r := bytes.NewReader(payload)
	x := &decoder{d: msgpack.NewDecoder(r), r: r}
	b, skipped, err = x.batch()
	if err == nil && r.Len() > 0 {
		err = fmt.Errorf("%w: %d bytes after the batch", ErrMalformed, r.Len())
	}
	if err != nil {
		return EventBatch{}, nil, err
	}
	return b, skipped, nil
}

// decoder reads msgpack values off a byte slice. Its methods return errors
// matching ErrMalformed when the stream cannot be followed, and
// ErrFieldType when a value was of the wrong type but was skipped, so the
// stream is still aligned.
type decoder struct {
	d *msgpack.Decoder
	r *bytes.Reader
}

func malformed(err error) error {
	if errors.Is(err, ErrMalformed) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrMalformed, err)
}

func (x *decoder) peek() (byte, error) {
	c, err := x.d.PeekCode()
	if err != nil {
		return 0, malformed(err)
	}
	return c, nil
}

// mismatch skips the value at hand and reports it as the wrong type for
// name.
func (x *decoder) mismatch(name string, c byte, want string) error {
	if err := x.skip(0); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s is msgpack 0x%02x, want %s", ErrFieldType, name, c, want)
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
// maxSkipDepth so that a hostile payload cannot exhaust the stack.
func (x *decoder) skip(depth int) error {
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
			return malformed(err)
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
func (x *decoder) length(array bool) (int, error) {
	var n int
	var err error
	if array {
		n, err = x.d.DecodeArrayLen()
	} else {
		n, err = x.d.DecodeMapLen()
	}
	if err != nil {
		return 0, malformed(err)
	}
	if n < 0 || n > x.r.Len() {
		return 0, fmt.Errorf("%w: length %d with %d bytes left", ErrMalformed, n, x.r.Len())
	}
	return n, nil
}

// container reads the header of an array (or map) named name.
func (x *decoder) container(name string, array bool) (int, error) {
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

func (x *decoder) int64(name string) (int64, error) {
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
			return 0, malformed(err)
		}
		if u > math.MaxInt64 {
			return 0, fmt.Errorf("%w: %s = %d overflows int64", ErrFieldType, name, u)
		}
		return int64(u), nil
	}
	n, err := x.d.DecodeInt64()
	if err != nil {
		return 0, malformed(err)
	}
	return n, nil
}

func (x *decoder) string(name string) (string, error) {
	c, err := x.peek()
	if err != nil {
		return "", err
	}
	if !msgpcode.IsString(c) {
		return "", x.mismatch(name, c, "a string")
	}
	s, err := x.d.DecodeString()
	if err != nil {
		return "", malformed(err)
	}
	return s, nil
}

func (x *decoder) hash(name string) (Hash, error) {
	c, err := x.peek()
	if err != nil {
		return Hash{}, err
	}
	switch {
	case msgpcode.IsBin(c):
		b, err := x.d.DecodeBytes()
		if err != nil {
			return Hash{}, malformed(err)
		}
		return BytesHash(b), nil
	case c == msgpcode.Uint64:
		u, err := x.d.DecodeUint64()
		if err != nil {
			return Hash{}, malformed(err)
		}
		return IntHash(u), nil
	case isInt(c):
		n, err := x.d.DecodeInt64()
		if err != nil {
			return Hash{}, malformed(err)
		}
		return IntHash(uint64(n)), nil
	}
	return Hash{}, x.mismatch(name, c, "an integer or bytes")
}

// isNil consumes a nil if one is next.
func (x *decoder) isNil() (bool, error) {
	c, err := x.peek()
	if err != nil || c != msgpcode.Nil {
		return false, err
	}
	if err := x.d.DecodeNil(); err != nil {
		return false, malformed(err)
	}
	return true, nil
}

// list reads an array named name, calling elem for each element. After a
// wrong element it still consumes the rest, so the stream stays aligned,
// and returns the first error.
func (x *decoder) list(name string, elem func() error) error {
	n, err := x.container(name, true)
	if err != nil {
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
			if errors.Is(err, ErrMalformed) {
				return err
			}
			first = err
		}
	}
	return first
}

func (x *decoder) batch() (EventBatch, []error, error) {
	c, err := x.peek()
	if err != nil {
		return EventBatch{}, nil, err
	}
	if !isArray(c) && !isMap(c) {
		return EventBatch{}, nil, fmt.Errorf("%w: batch is msgpack 0x%02x, want an array or a map", ErrMalformed, c)
	}
	var b EventBatch
	var skipped []error
	var hasTS, hasEvents bool
	err = x.record("batch", func() []string { return batchFields }, func(name string) error {
		var err error
		switch name {
		case fieldTS:
			hasTS = true
			b.TS, err = x.float(name)
		case fieldEvents:
			hasEvents = true
			err = x.list(name, func() error {
				ev, err := x.event()
				if err != nil && !errors.Is(err, ErrMalformed) {
					skipped = append(skipped, err)
					return nil
				}
				if err == nil {
					b.Events = append(b.Events, ev)
				}
				return err
			})
		case fieldDPRank:
			err = optional(x, name, x.int64, &b.DataParallelRank)
		default:
			err = x.skip(0)
		}
		return err
	})
	if err == nil && (!hasTS || !hasEvents) {
		err = fmt.Errorf("%w: batch without ts or events", ErrFieldType)
	}
	if err != nil {
		return EventBatch{}, nil, err
	}
	return b, skipped, nil
}

// record reads a struct in either encoding: an array of its fields in the
// order names returns (called before each element, as an event's tag
// decides the order of the fields after it), or a map from field name to
// value. set reads the value of the named field; elements past the known
// fields are skipped. After an error matching ErrFieldType the rest of the
// record is skipped, so the stream stays aligned, and the first error is
// returned.
func (x *decoder) record(what string, names func() []string, set func(name string) error) error {
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
			if key, err = x.string(what + " key"); err == nil {
				err = set(key)
			} else if !errors.Is(err, ErrMalformed) {
				_ = x.skip(0) // the value of the bad key; a failure shows on the next read
			}
		}
		if err != nil {
			if errors.Is(err, ErrMalformed) {
				return err
			}
			first = cmp.Or(first, err)
		}
	}
	return first
}

func (x *decoder) float(name string) (float64, error) {
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
		return 0, malformed(err)
	}
	return f, nil
}

// event reads one event in either encoding. An error matching
// ErrUnknownEventType or ErrFieldType means the event was consumed and
// left out.
func (x *decoder) event() (Event, error) {
	var u union
	var hasTag bool
	order := tagField // the array encoding's element names, known once the tag is
	err := x.record("event", func() []string { return order }, func(name string) error {
		if name != fieldType {
			return x.field(name, &u)
		}
		var err error
		u.tag, err = x.string(name)
		hasTag = err == nil
		if fields := fieldsOf(u.tag); hasTag && fields != nil {
			order = slices.Concat(tagField, fields)
		}
		return err
	})
	if err == nil && !hasTag {
		err = fmt.Errorf("%w: event without %q", ErrFieldType, fieldType)
	}
	if err != nil {
		return nil, err
	}
	return u.event()
}

func fieldsOf(tag string) []string {
	switch tag {
	case TypeBlockStored:
		return storedFields
	case TypeBlockRemoved:
		return removedFields
	}
	return nil
}

// union holds the fields of any event while it is read; a map event may
// name its type after its fields.
type union struct {
	tag       string
	s         BlockStored
	hasHashes bool
}

func (u *union) event() (Event, error) {
	switch u.tag {
	case TypeBlockStored:
		if !u.hasHashes {
			return nil, fmt.Errorf("%w: %s without %s", ErrFieldType, u.tag, fieldHashes)
		}
		s := u.s
		return &s, nil
	case TypeBlockRemoved:
		if !u.hasHashes {
			return nil, fmt.Errorf("%w: %s without %s", ErrFieldType, u.tag, fieldHashes)
		}
		return &BlockRemoved{BlockHashes: u.s.BlockHashes, Medium: u.s.Medium, GroupIdx: u.s.GroupIdx}, nil
	case TypeAllBlocksCleared:
		return &AllBlocksCleared{}, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownEventType, u.tag)
}

// field reads the value of the field name into u; unknown names are
// skipped.
func (x *decoder) field(name string, u *union) error {
	s := &u.s
	switch name {
	case fieldHashes:
		u.hasHashes = true
		s.BlockHashes = []Hash{}
		return x.list(name, func() error {
			h, err := x.hash(name)
			s.BlockHashes = append(s.BlockHashes, h)
			return err
		})
	case fieldTokens:
		s.TokenIDs = []int64{}
		return x.list(name, func() error {
			n, err := x.int64(name)
			s.TokenIDs = append(s.TokenIDs, n)
			return err
		})
	case fieldBlockSize:
		if null, err := x.isNil(); null || err != nil {
			return err
		}
		n, err := x.int64(name)
		s.BlockSize = n
		return err
	case fieldParent:
		return optional(x, name, x.hash, &s.ParentBlockHash)
	case fieldLoRAID:
		return optional(x, name, x.int64, &s.LoRAID)
	case fieldGroupIdx:
		return optional(x, name, x.int64, &s.GroupIdx)
	case fieldSpecWindow:
		return optional(x, name, x.int64, &s.KVCacheSpecSlidingWindow)
	case fieldMedium:
		return optional(x, name, x.string, &s.Medium)
	case fieldLoRAName:
		return optional(x, name, x.string, &s.LoRAName)
	case fieldSpecKind:
		return optional(x, name, x.string, &s.KVCacheSpecKind)
	case fieldExtraKeys:
		if null, err := x.isNil(); null || err != nil {
			return err
		}
		start := x.r.Size() - int64(x.r.Len())
		if err := x.skip(0); err != nil {
			return err
		}
		end := x.r.Size() - int64(x.r.Len())
		raw := make([]byte, end-start)
		_, _ = x.r.ReadAt(raw, start) // inside what was just read
		s.ExtraKeys = raw
		return nil
	}
	return x.skip(0)
}

// optional reads a value that may be None with read, into *p; None
// leaves *p nil.
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
