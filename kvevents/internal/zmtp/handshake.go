package zmtp

// ZMTP 3's handshake (RFC 23): the greeting, the NULL mechanism's READY,
// and which socket types may talk to which.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

// compatible lists, per socket type, the peer types it accepts (RFC 23).
var compatible = map[string][]string{
	"PUB":  {"SUB", "XSUB"},
	"SUB":  {"PUB", "XPUB"},
	Router: {Dealer, Req, Router},
	Dealer: {Router, "REP", Dealer},
	Req:    {Router, "REP"},
}

// greeting returns the 64-byte ZMTP 3 greeting of the mechanism mech.
// Its as-server byte stays 0 whatever the role, as libzmq writes it (and
// libzmq never reads it): a mechanism's own commands tell the roles apart.
func greeting(minor byte, mech string) []byte {
	g := make([]byte, 64)
	g[0], g[9], g[10], g[11] = 0xFF, 0x7F, 3, minor
	copy(g[12:], mech)
	return g
}

// mechanism returns the name of the security mechanism c speaks.
func (c *Conn) mechanism() string {
	if c.curve != nil {
		return "CURVE"
	}
	return "NULL"
}

// checkGreeting checks the signature and major version of a greeting's
// first 11 bytes, and the mechanism too when g is the whole greeting.
func (c *Conn) checkGreeting(g []byte) error {
	var mech [20]byte
	copy(mech[:], c.mechanism())
	switch {
	case g[0] != 0xFF || g[9]&1 != 1:
		return fmt.Errorf("zmtp: %s: not a ZMTP greeting: %w", c.label, ErrProtocol)
	case g[10] < 3:
		return fmt.Errorf("zmtp: %s: ZMTP version %d, want 3: %w", c.label, g[10], ErrProtocol)
	case len(g) == 64 && string(g[12:32]) != string(mech[:]):
		return fmt.Errorf("zmtp: %s: security mechanism %q, want %s: %w", c.label, strings.TrimRight(string(g[12:32]), "\x00"), c.mechanism(), ErrProtocol)
	}
	return nil
}

// ready returns the READY command of a socket of type typ.
func ready(typ string, identity []byte) []byte {
	return command("READY", metadata(typ, identity))
}

// metadata returns the properties a socket of type typ announces in its
// READY (or, under CURVE, its INITIATE).
func metadata(typ string, identity []byte) []byte {
	p := property(nil, "Socket-Type", []byte(typ))
	if typ == Dealer || typ == Req || typ == Router {
		p = property(p, "Identity", identity)
	}
	return p
}

func property(b []byte, name string, value []byte) []byte {
	b = append(b, byte(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(value)))
	return append(b, value...)
}

// greetingStart is the part of the greeting sent first, signature and
// major version: see shake.
const greetingStart = 11

// handshake exchanges greetings and READY commands as a socket of type
// typ, by deadline, and checks that the peer is of a compatible type.
// start, if not nil, is the start of the peer's greeting, read once ours
// was sent (socket.probe). The caller closes the connection if it fails.
func (c *Conn) handshake(typ string, identity []byte, deadline time.Time, start []byte) error {
	err := c.shake(typ, identity, deadline, start)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.counts.timeouts.Add(1)
		err = fmt.Errorf("zmtp: %s: no handshake by the deadline: %w", c.label, ErrProtocol)
	}
	c.violated(err)
	return err
}

func (c *Conn) shake(typ string, identity []byte, deadline time.Time, start []byte) error {
	c.SetDeadline(deadline)
	// We announce ZMTP 3.1: we answer its PING and take its SUBSCRIBE and
	// CANCEL commands, and still send subscriptions as 3.0 messages, which
	// every PUB takes. The signature and major version go first, then the
	// rest, as libzmq does: an older peer sends no more until it has ours,
	// and libzmq sends its mechanism only then, but closes at once if it
	// reads a mechanism other than its own: so its mechanism is read, and
	// named in the error, before ours is sent.
	out, g := greeting(1, c.mechanism()), make([]byte, 64)
	var err error
	if start != nil {
		copy(g, start)
		err = c.checkGreeting(g[:greetingStart])
	} else {
		err = exchange(c.nc, out[:greetingStart], func() error {
			if _, err := io.ReadFull(c.r, g[:greetingStart]); err != nil {
				if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
					// The one hint a dialer gets from a peer that refuses it.
					return fmt.Errorf("zmtp: %s: the peer closed the connection before its greeting, as a peer at its limit of connections does, or one that does not allow our address (or one that speaks another protocol): %w", c.label, err)
				}
				return err
			}
			return c.checkGreeting(g[:greetingStart])
		})
	}
	if err == nil {
		err = exchange(c.nc, out[greetingStart:], func() error {
			if _, err := io.ReadFull(c.r, g[greetingStart:]); err != nil {
				return err
			}
			c.minor = g[11]
			return c.checkGreeting(g)
		})
	}
	if err != nil {
		return err
	}
	if c.curve != nil {
		if c.asServer {
			err = c.curveServer(typ)
		} else {
			err = c.curveClient(typ, identity)
		}
		if err != nil {
			return err
		}
		return c.SetDeadline(time.Time{})
	}
	err = exchange(c.nc, ready(typ, identity), func() error {
		flags, size, err := c.header()
		if err != nil {
			return err
		}
		if flags&flagCommand == 0 || flags&flagMore != 0 {
			return fmt.Errorf("zmtp: %s: a message before READY: %w", c.label, ErrProtocol)
		}
		if size > maxCommand {
			return fmt.Errorf("zmtp: %s: a READY of %d bytes, limit %d: %w", c.label, size, maxCommand, ErrFrameTooLong)
		}
		body, err := c.body(size, false)
		c.partial = false
		if err != nil {
			return err
		}
		name, data, err := c.splitCommand(body)
		if err != nil {
			return err
		}
		if name != "READY" {
			return fmt.Errorf("zmtp: %s: command %q before READY: %w", c.label, name, ErrProtocol)
		}
		return c.properties(typ, data)
	})
	if err != nil {
		return err
	}
	return c.SetDeadline(time.Time{})
}

// exchange writes out on nc while in reads: a peer may wait for our
// bytes before it sends its own, and an inproc pipe has no buffer.
func exchange(nc net.Conn, out []byte, in func() error) error {
	done := make(chan error, 1)
	go func() {
		_, err := nc.Write(out)
		done <- err
	}()
	err := in()
	// Even after a failed read, the write is let finish (the handshake
	// deadline bounds it), so that the peer learns what we are.
	if werr := <-done; err == nil {
		err = werr
	}
	return err
}

// properties reads the READY command's properties and checks the peer's
// socket type.
func (c *Conn) properties(typ string, p []byte) error {
	for len(p) > 0 {
		n := int(p[0])
		if 1+n+4 > len(p) {
			return fmt.Errorf("zmtp: %s: a malformed READY: %w", c.label, ErrProtocol)
		}
		name := string(p[1 : 1+n])
		vlen := binary.BigEndian.Uint32(p[1+n:])
		p = p[1+n+4:]
		if uint64(vlen) > uint64(len(p)) {
			return fmt.Errorf("zmtp: %s: a malformed READY: %w", c.label, ErrProtocol)
		}
		switch v := p[:vlen]; {
		case strings.EqualFold(name, "Socket-Type"):
			c.peerType = string(v)
		case strings.EqualFold(name, "Identity"):
			c.identity = slices.Clone(v)
		}
		p = p[vlen:]
	}
	if !slices.Contains(compatible[typ], c.peerType) {
		return fmt.Errorf("zmtp: %s: a %s socket cannot talk to a %q peer: %w", c.label, typ, c.peerType, ErrProtocol)
	}
	return nil
}
