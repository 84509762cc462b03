package kvevents

import (
	"bytes"
	"math"
	"testing"
)

// TestHash checks the comma-ok accessors and String on both kinds of hash,
// including an integer above MaxInt64, which vLLM's uint64 hashes reach,
// and the zero Hash, which the doc promises is the integer 0.
func TestHash(t *testing.T) {
	for _, tc := range []struct {
		h       Hash
		n       uint64
		isInt   bool
		b       []byte
		isBytes bool
		s       string
	}{
		{Hash{}, 0, true, nil, false, "0"},
		{IntHash(7), 7, true, nil, false, "7"},
		{IntHash(math.MaxUint64), math.MaxUint64, true, nil, false, "18446744073709551615"},
		{BytesHash([]byte{0xab, 0x01}), 0, false, []byte{0xab, 0x01}, true, "0xab01"},
		{BytesHash(nil), 0, false, []byte{}, true, "0x"},
	} {
		n, isInt := tc.h.Uint64()
		if isInt != tc.isInt || (isInt && n != tc.n) {
			t.Errorf("%s: Uint64() = %d, %v, want %d, %v", tc.s, n, isInt, tc.n, tc.isInt)
		}
		b, isBytes := tc.h.Bytes()
		if isBytes != tc.isBytes || !bytes.Equal(b, tc.b) || (!isBytes && b != nil) {
			t.Errorf("%s: Bytes() = %x, %v, want %x, %v", tc.s, b, isBytes, tc.b, tc.isBytes)
		}
		if got := tc.h.String(); got != tc.s {
			t.Errorf("String() = %q, want %q", got, tc.s)
		}
	}
}

// TestHashCopiesBytes checks that BytesHash and Bytes copy, as their docs
// say: a Hash keys a map, so neither the caller's slice nor the one Bytes
// returns may change it.
func TestHashCopiesBytes(t *testing.T) {
	src := []byte{1, 2}
	h := BytesHash(src)
	src[0] = 9
	out, _ := h.Bytes()
	out[1] = 9
	if want := BytesHash([]byte{1, 2}); h != want {
		t.Errorf("hash changed through a slice to %s, want %s", h, want)
	}
}

// TestHashKinds checks that an integer hash and a bytes hash of the same
// value are different map keys: vLLM's producers send one kind or the
// other, and a mirror must not confuse them.
func TestHashKinds(t *testing.T) {
	m := map[Hash]int{IntHash(1): 1, BytesHash([]byte{1}): 2, BytesHash([]byte{0, 0, 0, 0, 0, 0, 0, 1}): 3}
	if len(m) != 3 {
		t.Errorf("%d distinct keys, want 3: %v", len(m), m)
	}
}
