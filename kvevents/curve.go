package kvevents

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sagellm/kvevict/kvevents/internal/zmtp"
)

// CurveKey is a key of CurveZMQ (RFC 26), ZeroMQ's CURVE security: a
// Curve25519 public or secret key.
type CurveKey [32]byte

// ParseCurveKey decodes a key written in Z85 (RFC 32), the 40 characters
// that libzmq's zmq_curve_keypair (pyzmq's zmq.curve_keypair, the
// curve_keygen tool) writes.
func ParseCurveKey(z85 string) (CurveKey, error) {
	k, err := zmtp.ParseKey(z85)
	if err != nil {
		return CurveKey{}, fmt.Errorf("kvevents: %w", err)
	}
	return CurveKey(k), nil
}

// Z85 returns k in Z85, as ParseCurveKey reads it.
func (k CurveKey) Z85() string { return zmtp.Key(k).Z85() }

// Public returns the public key of k, a secret key, as libzmq's
// zmq_curve_public does.
func (k CurveKey) Public() CurveKey { return CurveKey(zmtp.Key(k).Public()) }

// ReadCurveKeys reads the keys of a key file: one key in Z85 per line,
// as zmq.curve_keypair returns it, blank lines and lines that start with
// # ignored, spaces around a key too. It refuses any other line, naming
// it by its number, and a file without a key.
func ReadCurveKeys(r io.Reader) ([]CurveKey, error) {
	var keys []CurveKey
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := ParseCurveKey(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errors.New("no key: want one key of 40 Z85 characters per line")
	}
	return keys, nil
}

// Curve configures CURVE, ZeroMQ's encryption and authentication, on a
// [Publisher]'s or a [Subscriber]'s sockets ([WithPublisherCurve],
// [WithSubscriberCurve]). Every socket that binds is a CURVE server of
// Secret's public key, and every socket that connects (a replay
// subscriber's connection to the replay socket included) is a CURVE
// client that authenticates with Secret to the server of public key
// Server. Either side of a link may bind: the one that binds is the
// server. A peer without CURVE (vLLM's publisher speaks the NULL
// mechanism) cannot connect to such a socket, nor be connected to.
type Curve struct {
	// Secret is this side's long-term secret key, required. Its public
	// key, Secret.Public(), is what the other side's Server names (when
	// this side binds) or Clients admits (when it connects).
	Secret CurveKey
	// Server is the public key of the side this one connects to: required
	// when a socket connects, refused when none does.
	Server CurveKey
	// Clients are the public keys the sockets that bind admit: a client
	// with another key is refused in its handshake, and counted as a
	// refusal. Empty admits any client that knows the server's public
	// key. Refused when no socket binds.
	Clients []CurveKey
}

// sockets checks c for sockets that bind (binds) and connect (connects),
// and returns it as the transport takes it, or nil without CURVE.
func (c *Curve) sockets(option string, binds, connects bool) (*zmtp.Curve, error) {
	if c == nil {
		return nil, nil
	}
	switch {
	case c.Secret == CurveKey{}:
		return nil, fmt.Errorf("kvevents: %s: no secret key", option)
	case connects && c.Server == CurveKey{}:
		return nil, fmt.Errorf("kvevents: %s: a socket connects, and there is no server key to connect with (the public key of the side that binds)", option)
	case !connects && c.Server != CurveKey{}:
		return nil, fmt.Errorf("kvevents: %s: a server key, and no socket connects to use it", option)
	case !binds && len(c.Clients) > 0:
		return nil, fmt.Errorf("kvevents: %s: client keys to admit, and no socket binds to admit them", option)
	}
	zc := &zmtp.Curve{Secret: zmtp.Key(c.Secret), Server: zmtp.Key(c.Server)}
	for _, k := range c.Clients {
		zc.Clients = append(zc.Clients, zmtp.Key(k))
	}
	return zc, nil
}
