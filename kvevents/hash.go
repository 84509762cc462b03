package kvevents

import (
	"encoding/hex"
	"strconv"
)

// Hash names a KV block on the wire. vLLM's ExternalBlockHash is either an
// int (a uint64, which can exceed math.MaxInt64) or bytes; Hash holds
// either and is comparable, so it can key a map. The zero Hash is the
// integer 0.
type Hash struct {
	n       uint64
	b       string // the bytes of a bytes hash
	isBytes bool
}

// IntHash returns the integer hash n.
func IntHash(n uint64) Hash { return Hash{n: n} }

// BytesHash returns the bytes hash b (copied).
func BytesHash(b []byte) Hash { return Hash{b: string(b), isBytes: true} }

// IntHashes returns ns as integer hashes.
func IntHashes(ns []uint64) []Hash {
	hs := make([]Hash, len(ns))
	for i, n := range ns {
		hs[i] = IntHash(n)
	}
	return hs
}

// Uint64 returns the integer value of h, and whether h is an integer hash.
func (h Hash) Uint64() (uint64, bool) { return h.n, !h.isBytes }

// Bytes returns a copy of the bytes of h, and whether h is a bytes hash.
func (h Hash) Bytes() ([]byte, bool) {
	if !h.isBytes {
		return nil, false
	}
	return []byte(h.b), true
}

// String returns the integer in decimal, or the bytes in hex after "0x".
func (h Hash) String() string {
	if h.isBytes {
		return "0x" + hex.EncodeToString([]byte(h.b))
	}
	return strconv.FormatUint(h.n, 10)
}
