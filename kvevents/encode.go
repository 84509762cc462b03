package kvevents

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Encode returns the msgpack payload of b in encoding enc. Integer hashes
// are always written as msgpack uint 64, as vLLM's 64-bit hashes are:
// consumers such as llm-d refuse narrower integers. It fails only for an
// event of a type it does not know, ExtraKeys that are not one msgpack
// value, or an unknown encoding. The result's length is O(size of b).
func Encode(b *EventBatch, enc Encoding) ([]byte, error) {
	if !enc.valid() {
		return nil, fmt.Errorf("kvevents: unknown encoding %d", enc)
	}
	var buf bytes.Buffer
	w := &encoder{buf: &buf, e: msgpack.NewEncoder(&buf), mapEvents: enc != EncodingArray}
	nb := batchRequired
	if b.DataParallelRank != nil {
		nb++
	}
	mapBatch := enc == EncodingMap
	if mapBatch {
		w.mapLen(nb)
		w.str(fieldTS)
	} else {
		w.arrayLen(nb)
	}
	w.check(w.e.EncodeFloat64(b.TS))
	if mapBatch {
		w.str(fieldEvents)
	}
	w.arrayLen(len(b.Events))
	for _, ev := range b.Events {
		if err := w.event(ev); err != nil {
			return nil, err
		}
	}
	if b.DataParallelRank != nil {
		if mapBatch {
			w.str(fieldDPRank)
		}
		w.check(w.e.EncodeInt(*b.DataParallelRank))
	}
	if w.err != nil {
		return nil, w.err
	}
	return buf.Bytes(), nil
}

// encoder writes msgpack values, keeping the first error (a bytes.Buffer
// reports none).
type encoder struct {
	buf       *bytes.Buffer
	e         *msgpack.Encoder
	mapEvents bool // events as maps, or as tagged arrays
	err       error
}

func (w *encoder) check(err error) {
	if w.err == nil {
		w.err = err
	}
}

func (w *encoder) arrayLen(n int) { w.check(w.e.EncodeArrayLen(n)) }
func (w *encoder) mapLen(n int)   { w.check(w.e.EncodeMapLen(n)) }
func (w *encoder) str(s string)   { w.check(w.e.EncodeString(s)) }

// field is one field of an event being written: its name and a writer of
// its value, or nil for None.
type field struct {
	name  string
	write func()
}

func (w *encoder) event(ev Event) error {
	var fields []field
	var required int
	switch ev := ev.(type) {
	case *BlockStored:
		if ev.ExtraKeys != nil {
			if err := checkValue(ev.ExtraKeys); err != nil {
				return fmt.Errorf("kvevents: ExtraKeys: %w", err)
			}
		}
		required = storedRequired
		fields = []field{
			{fieldHashes, func() { w.hashes(ev.BlockHashes) }},
			{fieldParent, w.optHash(ev.ParentBlockHash)},
			{fieldTokens, func() { w.ints(ev.TokenIDs) }},
			{fieldBlockSize, func() { w.check(w.e.EncodeInt(ev.BlockSize)) }},
			{fieldLoRAID, w.optInt(ev.LoRAID)},
			{fieldMedium, w.optStr(ev.Medium)},
			{fieldLoRAName, w.optStr(ev.LoRAName)},
			{fieldExtraKeys, w.raw(ev.ExtraKeys)},
			{fieldGroupIdx, w.optInt(ev.GroupIdx)},
			{fieldSpecKind, w.optStr(ev.KVCacheSpecKind)},
			{fieldSpecWindow, w.optInt(ev.KVCacheSpecSlidingWindow)},
		}
	case *BlockRemoved:
		required = removedRequired
		fields = []field{
			{fieldHashes, func() { w.hashes(ev.BlockHashes) }},
			{fieldMedium, w.optStr(ev.Medium)},
			{fieldGroupIdx, w.optInt(ev.GroupIdx)},
		}
	case *AllBlocksCleared:
	default:
		return fmt.Errorf("%w: cannot encode %T", ErrUnknownEventType, ev)
	}
	if !w.mapEvents {
		// Trailing fields equal to their defaults are left out; one set
		// after them keeps the Nones before it, as positions matter.
		n := len(fields)
		for n > required && fields[n-1].write == nil {
			n--
		}
		w.arrayLen(1 + n)
		w.str(ev.Type())
		for _, f := range fields[:n] {
			w.value(f)
		}
		return nil
	}
	n := 0
	for i, f := range fields {
		if i < required || f.write != nil {
			n++
		}
	}
	w.mapLen(1 + n)
	w.str(fieldType)
	w.str(ev.Type())
	for i, f := range fields {
		if i < required || f.write != nil {
			w.str(f.name)
			w.value(f)
		}
	}
	return nil
}

func (w *encoder) value(f field) {
	if f.write == nil {
		w.check(w.e.EncodeNil())
		return
	}
	f.write()
}

func (w *encoder) hash(h Hash) {
	if h.isBytes() {
		w.check(w.e.EncodeBytes([]byte(h.bytes())))
		return
	}
	w.check(w.e.EncodeUint64(h.n))
}

func (w *encoder) hashes(hs []Hash) {
	w.arrayLen(len(hs))
	for _, h := range hs {
		w.hash(h)
	}
}

func (w *encoder) ints(ns []int64) {
	w.arrayLen(len(ns))
	for _, n := range ns {
		w.check(w.e.EncodeInt(n))
	}
}

func (w *encoder) optHash(h *Hash) func() {
	if h == nil {
		return nil
	}
	return func() { w.hash(*h) }
}

func (w *encoder) optInt(n *int64) func() {
	if n == nil {
		return nil
	}
	return func() { w.check(w.e.EncodeInt(*n)) }
}

func (w *encoder) optStr(s *string) func() {
	if s == nil {
		return nil
	}
	return func() { w.str(*s) }
}

func (w *encoder) raw(b []byte) func() {
	if b == nil {
		return nil
	}
	return func() {
		_, err := w.buf.Write(b)
		w.check(err)
	}
}
