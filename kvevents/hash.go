package kvevents

import (
	"encoding/hex"
	"strconv"
)

// Hash names a KV block on the wire. vLLM's ExternalBlockHash is either an
// int (a uint64, which can exceed math.MaxInt64) or bytes; Hash holds
// either and is comparable, so it can key a map. The zero Hash is the
// integer 0.
//
// A bytes hash is its bytes after a mark, so that an empty one differs
// from every integer hash without a field of its own to say so: a field
// would make a Hash a quarter larger, and a batch's lists of hashes are
// most of what a decode allocates.
type Hash struct {
	n uint64
	b string // "": an integer hash; else bytesMark and the bytes of a bytes hash
}

// bytesMark starts the string of every bytes hash.
const bytesMark = "\x01"

// IntHash returns the integer hash n.
func IntHash(n uint64) Hash { return Hash{n: n} }

// BytesHash returns the bytes hash b (copied).
func BytesHash(b []byte) Hash { return Hash{b: bytesMark + string(b)} }

// IntHashes returns ns as integer hashes.
func IntHashes(ns []uint64) []Hash {
	hs := make([]Hash, len(ns))
	for i, n := range ns {
		hs[i] = IntHash(n)
	}
	return hs
}

// Uint64 returns the integer value of h, and whether h is an integer hash.
func (h Hash) Uint64() (uint64, bool) { return h.n, !h.isBytes() }

// Bytes returns a copy of the bytes of h, and whether h is a bytes hash.
func (h Hash) Bytes() ([]byte, bool) {
	if !h.isBytes() {
		return nil, false
	}
	return []byte(h.bytes()), true
}

// String returns the integer in decimal, or the bytes in hex after "0x".
func (h Hash) String() string {
	if h.isBytes() {
		return "0x" + hex.EncodeToString([]byte(h.bytes()))
	}
	return strconv.FormatUint(h.n, 10)
}

// isBytes reports whether h is a bytes hash.
func (h Hash) isBytes() bool { return h.b != "" }

// bytes returns the bytes of a bytes hash, without the mark.
func (h Hash) bytes() string { return h.b[len(bytesMark):] }
