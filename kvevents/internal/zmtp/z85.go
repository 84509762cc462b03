package zmtp

// Z85 (RFC 32), the text form of CURVE keys that zmq_curve_keypair and
// pyzmq's curve_keypair write: 5 characters for 4 bytes, big-endian.

import (
	"errors"
	"fmt"
)

const z85Alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"

// z85Value maps a character to its digit plus one; 0 is not a Z85 character.
var z85Value = func() (v [256]byte) {
	for i := range len(z85Alphabet) {
		v[z85Alphabet[i]] = byte(i + 1)
	}
	return v
}()

// z85Encode returns b in Z85; len(b) must be a multiple of 4.
func z85Encode(b []byte) string {
	out := make([]byte, 0, len(b)/4*5)
	for i := 0; i+4 <= len(b); i += 4 {
		v := uint32(b[i])<<24 | uint32(b[i+1])<<16 | uint32(b[i+2])<<8 | uint32(b[i+3])
		var d [5]byte
		for j := 4; j >= 0; j-- {
			d[j] = z85Alphabet[v%85]
			v /= 85
		}
		out = append(out, d[:]...)
	}
	return string(out)
}

// errZ85 is what a malformed Z85 string's error wraps.
var errZ85 = errors.New("not Z85")

// z85Decode returns the bytes s encodes: a multiple of 5 characters of the
// Z85 alphabet, each group at most 2^32-1.
func z85Decode(s string) ([]byte, error) {
	if len(s)%5 != 0 {
		return nil, fmt.Errorf("%w: %d characters, not a multiple of 5", errZ85, len(s))
	}
	out := make([]byte, 0, len(s)/5*4)
	for i := 0; i < len(s); i += 5 {
		var v uint64
		for j := range 5 {
			d := z85Value[s[i+j]]
			if d == 0 {
				return nil, fmt.Errorf("%w: character %q at %d", errZ85, s[i+j], i+j)
			}
			v = v*85 + uint64(d-1)
		}
		if v > 0xFFFFFFFF {
			return nil, fmt.Errorf("%w: %q at %d is past 32 bits", errZ85, s[i:i+5], i)
		}
		out = append(out, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return out, nil
}
