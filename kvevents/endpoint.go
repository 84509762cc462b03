package kvevents

import (
	"strings"

	"github.com/sagellm/kvevict/kvevents/internal/zmtp"
)

// Binds reports whether a socket on endpoint binds (listens) rather than
// connects, by vLLM's rule: it binds when the endpoint holds a wildcard
// ("*"), an IPv6 "::", or is ipc:// or inproc://, the stable side of the
// link; otherwise it connects.
func Binds(endpoint string) bool {
	return wildcard(endpoint) || strings.HasPrefix(endpoint, "ipc://") || strings.HasPrefix(endpoint, "inproc://")
}

// wildcard reports whether endpoint's address is a wildcard, one that
// only a listening socket can use.
func wildcard(endpoint string) bool {
	return strings.Contains(endpoint, "*") || strings.Contains(endpoint, "::")
}

// seqBytes is the 8-byte big-endian frame of sequence number seq.
func seqBytes(seq int64) []byte {
	return []byte{byte(seq >> 56), byte(seq >> 48), byte(seq >> 40), byte(seq >> 32), byte(seq >> 24), byte(seq >> 16), byte(seq >> 8), byte(seq)}
}

// Transports returns the endpoint schemes the sockets take: "inproc",
// "ipc" and "tcp".
func Transports() []string { return zmtp.Transports() }
