package kvevents

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/sagellm/kvevict/kvevents/internal/zmtp"
)

// Direction says whether a socket binds its endpoint, where its peers
// connect, or connects to a peer that binds it. Either side of a link may
// bind; exactly one must.
type Direction int

const (
	// ByRule binds or connects as the endpoint says: a [Publisher] by
	// [Binds], a [Subscriber] when the address is a wildcard (see
	// [Wildcard]). It is the zero Direction.
	ByRule Direction = iota
	// Bind listens on the endpoint: one interface (tcp://127.0.0.1:5557,
	// a pod's address, tcp://[::1]:5557), every one (tcp://*:5557), a
	// unix socket or an inproc name.
	Bind
	// Connect connects to a peer that binds the endpoint, and reconnects
	// whenever it goes away.
	Connect
)

func (d Direction) String() string {
	switch d {
	case ByRule:
		return "by rule"
	case Bind:
		return "bind"
	case Connect:
		return "connect"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

func (d Direction) valid() bool { return d >= ByRule && d <= Connect }

// Binds reports whether a [Publisher] on endpoint binds rather than
// connects when told neither ([ByRule]): it binds a wildcard address (see
// [Wildcard]) and every ipc:// and inproc:// endpoint, the stable side of
// the link; it connects to any other address. This is vLLM's rule with
// one difference: vLLM binds any endpoint that holds "::", so
// tcp://[::1]:5557 too, where Binds parses the address and connects.
func Binds(endpoint string) bool {
	return Wildcard(endpoint) || strings.HasPrefix(endpoint, "ipc://") || strings.HasPrefix(endpoint, "inproc://")
}

// Wildcard reports whether endpoint is a tcp:// endpoint that only a
// socket that binds can use: its host is "*", "0.0.0.0", "::" (written
// [::]) or empty (every interface), or its port is "*" (any free port).
func Wildcard(endpoint string) bool {
	rest, ok := strings.CutPrefix(endpoint, "tcp://")
	if !ok {
		return false
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return false
	}
	if port == "*" {
		return true
	}
	switch host {
	case "", "*", "0.0.0.0", "::":
		return true
	}
	return false
}

// binds decides, for a socket given direction d, whether it binds
// endpoint; byRule is the socket's own rule for ByRule. A wildcard cannot
// be connected to.
func binds(endpoint string, d Direction, byRule func(string) bool) (bool, error) {
	switch d {
	case Bind:
		return true, nil
	case Connect:
		if Wildcard(endpoint) {
			return false, fmt.Errorf("kvevents: cannot connect to %s, a wildcard address that only binds: give the address of the side that binds", endpoint)
		}
		return false, nil
	case ByRule:
		return byRule(endpoint), nil
	}
	return false, fmt.Errorf("kvevents: unknown direction %d", int(d))
}

// NothingBinds reports whether err, from a socket that connects, means
// that nothing bound the endpoint: a refused connection, a unix socket
// that is not there, an inproc name nobody bound, or no answer at all. Two
// sides that both connect fail so; one of them must bind.
func NothingBinds(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist) ||
		errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, zmtp.ErrNotBound)
}

// seqBytes is the 8-byte big-endian frame of sequence number seq.
func seqBytes(seq int64) []byte {
	return []byte{byte(seq >> 56), byte(seq >> 48), byte(seq >> 40), byte(seq >> 32), byte(seq >> 24), byte(seq >> 16), byte(seq >> 8), byte(seq)}
}

// Transports returns the endpoint schemes the sockets take: "inproc",
// "ipc" and "tcp".
func Transports() []string { return zmtp.Transports() }
