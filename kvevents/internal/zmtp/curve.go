package zmtp

// The CURVE security mechanism: CurveZMQ (RFC 26) as ZMTP 3 carries it
// and libzmq speaks it. The client sends HELLO (its transient key and a
// box only the server's long-term key opens), the server WELCOME (its
// transient key and a cookie, sealed to the client's transient key), the
// client INITIATE (the cookie back, its long-term key and a vouch that
// binds it to the transient one), the server READY; then every frame,
// commands included, travels as a MESSAGE command: a short nonce, strictly
// increasing per direction, and a box of a flags byte and the frame.

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"syscall"

	"golang.org/x/crypto/curve25519"
	"golang.org/x/crypto/nacl/box"
	"golang.org/x/crypto/nacl/secretbox"
)

// Key is a CURVE key: a Curve25519 public or secret key.
type Key [32]byte

// ParseKey decodes a key written in Z85 (RFC 32), the 40 characters that
// zmq_curve_keypair and pyzmq's curve_keypair write.
func ParseKey(z85 string) (Key, error) {
	var k Key
	if len(z85) != 40 {
		return k, fmt.Errorf("zmtp: a CURVE key is 40 characters of Z85, got %d", len(z85))
	}
	b, err := z85Decode(z85)
	if err != nil {
		return k, fmt.Errorf("zmtp: a CURVE key: %w", err)
	}
	copy(k[:], b)
	return k, nil
}

// Z85 returns k in Z85, as zmq_curve_keypair writes it.
func (k Key) Z85() string { return z85Encode(k[:]) }

// Public returns the public key of k, a secret key, as zmq_curve_public
// does.
func (k Key) Public() Key {
	var p Key
	// X25519 fails only for a low-order point, which the base point is not.
	b, _ := curve25519.X25519(k[:], curve25519.Basepoint)
	copy(p[:], b)
	return p
}

// Curve configures the CURVE security mechanism on a socket: a connection
// it accepts speaks CURVE as the server, one it dials as the client. A
// peer of another mechanism (NULL, as vLLM's publisher speaks) fails its
// handshake.
type Curve struct {
	// Secret is the socket's long-term secret key, required; its public
	// key, which clients must know, is Secret.Public().
	Secret Key
	// Server is the public key of the server a dialing socket connects
	// to, required to dial. A server whose key is another fails the
	// handshake.
	Server Key
	// Clients are the client public keys a listening socket admits; a
	// client with another is refused in its handshake (an ERROR "400", as
	// libzmq's authentication answers), counted in Refusals.UnknownKeys
	// and reported as [ErrNotAllowed]. Empty admits any client that knows
	// the server's public key.
	Clients []Key
}

// curveConfig is a Curve made ready for handshakes.
type curveConfig struct {
	secret, public, server Key
	clients                map[Key]struct{} // nil admits any client
}

// prepare returns c ready for handshakes, or nil for none.
func (c *Curve) prepare() *curveConfig {
	if c == nil {
		return nil
	}
	cfg := &curveConfig{secret: c.Secret, public: c.Secret.Public(), server: c.Server}
	if len(c.Clients) > 0 {
		cfg.clients = make(map[Key]struct{}, len(c.Clients))
		for _, k := range c.Clients {
			cfg.clients[k] = struct{}{}
		}
	}
	return cfg
}

// check returns why cfg cannot serve a connection accepted (asServer) or
// dialed, or nil.
func (cfg *curveConfig) check(asServer bool) error {
	switch {
	case cfg == nil:
		return nil
	case cfg.secret == Key{}:
		return errors.New("zmtp: CURVE without a secret key")
	case !asServer && cfg.server == Key{}:
		return errors.New("zmtp: CURVE: no server key to connect with (the public key of the socket that binds)")
	}
	return nil
}

// curveOverhead is what a MESSAGE command adds to a frame's body: its
// name, its short nonce, the box's tag and the flags byte.
const curveOverhead = 1 + 7 + 8 + box.Overhead + 1

// Sizes of the handshake's commands' data, past their names (RFC 26).
const (
	helloData    = 2 + 72 + 32 + 8 + 80  // version, padding, C', short nonce, box of 64 zeros
	welcomeData  = 16 + 144              // long nonce, box of S' and the cookie
	initiateData = 96 + 8 + 32 + 96 + 32 // cookie, short nonce, box of C and the vouch, past its metadata
)

// Flags of a frame inside a MESSAGE's box, as libzmq sets them.
const (
	curveMore    = 1
	curveCommand = 2
)

// keepScratch bounds the scratch buffers a connection keeps between
// writes: a rare large frame does not pin its size for the connection's
// life.
const keepScratch = 64 << 10

// curveSession is a connection's state past a CURVE handshake.
type curveSession struct {
	key        [32]byte // shared by the transient keys
	sendPrefix string   // of our MESSAGEs' nonces
	recvPrefix string   // of the peer's
	heard      uint64   // the peer's last short nonce; the reading goroutine's

	// The writers', under the Conn's wmu.
	sent          uint64 // our last short nonce
	plain, sealed []byte
}

// nonce returns the 24-byte nonce of prefix (16 bytes) and short nonce n.
func nonce(prefix string, n uint64) *[24]byte {
	var b [24]byte
	copy(b[:], prefix)
	binary.BigEndian.PutUint64(b[16:], n)
	return &b
}

// longNonce returns the 24-byte nonce of prefix (8 bytes) and 16 more.
func longNonce(prefix string, rest []byte) *[24]byte {
	var b [24]byte
	copy(b[:], prefix)
	copy(b[8:], rest)
	return &b
}

// handshakeCommand reads a command of the handshake, of at most limit
// bytes, and returns its name and data.
func (c *Conn) handshakeCommand(limit uint64) (string, []byte, error) {
	flags, size, err := c.header()
	if err != nil {
		return "", nil, err
	}
	if flags&flagCommand == 0 || flags&flagMore != 0 {
		return "", nil, fmt.Errorf("zmtp: %s: a message before the CURVE handshake was done: %w", c.label, ErrProtocol)
	}
	if size > limit {
		return "", nil, fmt.Errorf("zmtp: %s: a handshake command of %d bytes, limit %d: %w", c.label, size, limit, ErrFrameTooLong)
	}
	body, err := c.body(size, false)
	c.partial = false
	if err != nil {
		return "", nil, err
	}
	return c.splitCommand(body)
}

// send writes a command of the handshake.
func (c *Conn) send(name string, data []byte) error {
	_, err := c.nc.Write(command(name, data))
	return err
}

// curveClient does the client's side of the handshake, after the
// greetings, as a socket of type typ with the given identity.
func (c *Conn) curveClient(typ string, identity []byte) error {
	cfg := c.curve
	cPub, cSec, err := box.GenerateKey(c.rand)
	if err != nil {
		return err
	}
	var sent uint64 = 1
	hello := make([]byte, 2+72, helloData)
	hello[0] = 1 // CurveZMQ 1.0
	hello = append(hello, cPub[:]...)
	hello = binary.BigEndian.AppendUint64(hello, sent)
	hello = box.Seal(hello, make([]byte, 64), nonce("CurveZMQHELLO---", sent), (*[32]byte)(&cfg.server), cSec)
	if err := c.send("HELLO", hello); err != nil {
		return err
	}

	name, data, err := c.handshakeCommand(maxCommand)
	switch {
	case err != nil:
		return c.closedAfter("HELLO", "the public key it was given for the server is not the server's, or the server does not speak CURVE", err)
	case name == "ERROR":
		return c.refusedBy(data)
	case name != "WELCOME" || len(data) != welcomeData:
		return fmt.Errorf("zmtp: %s: a %q of %d bytes where a WELCOME of %d was due: %w", c.label, name, len(data), welcomeData, ErrProtocol)
	}
	welcome, ok := box.Open(nil, data[16:], longNonce("WELCOME-", data[:16]), (*[32]byte)(&cfg.server), cSec)
	if !ok {
		return fmt.Errorf("zmtp: %s: a WELCOME that the server's key does not open: the peer is not the server that key names: %w", c.label, ErrProtocol)
	}
	var sPrime, shared [32]byte
	copy(sPrime[:], welcome[:32])
	cookie := welcome[32:128]
	box.Precompute(&shared, &sPrime, cSec)

	var vouchNonce [16]byte
	if _, err := io.ReadFull(c.rand, vouchNonce[:]); err != nil {
		return err
	}
	plain := make([]byte, 0, 128+maxCommand)
	plain = append(plain, cfg.public[:]...)
	plain = append(plain, vouchNonce[:]...)
	plain = box.Seal(plain, append(cPub[:32:32], cfg.server[:]...), longNonce("VOUCH---", vouchNonce[:]), &sPrime, (*[32]byte)(&cfg.secret))
	plain = append(plain, metadata(typ, identity)...)
	sent++
	initiate := append(append(make([]byte, 0, 104+len(plain)+box.Overhead), cookie...), 0, 0, 0, 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint64(initiate[96:], sent)
	initiate = box.SealAfterPrecomputation(initiate, plain, nonce("CurveZMQINITIATE", sent), &shared)
	if err := c.send("INITIATE", initiate); err != nil {
		return err
	}

	name, data, err = c.handshakeCommand(maxCommand)
	switch {
	case err != nil:
		return c.closedAfter("INITIATE", "the server may not admit our public key", err)
	case name == "ERROR":
		return c.refusedBy(data)
	case name != "READY" || len(data) < 8+box.Overhead:
		return fmt.Errorf("zmtp: %s: a %q of %d bytes where a READY was due: %w", c.label, name, len(data), ErrProtocol)
	}
	heard := binary.BigEndian.Uint64(data)
	props, ok := box.OpenAfterPrecomputation(nil, data[8:], nonce("CurveZMQREADY---", heard), &shared)
	if !ok {
		return fmt.Errorf("zmtp: %s: a READY that does not open: %w", c.label, ErrProtocol)
	}
	if err := c.properties(typ, props); err != nil {
		return err
	}
	c.cs = &curveSession{key: shared, sendPrefix: "CurveZMQMESSAGEC", recvPrefix: "CurveZMQMESSAGES", heard: heard, sent: sent}
	return nil
}

// closedAfter is the client's error when the server closed the
// connection, or broke it, after our command what: likely why.
func (c *Conn) closedAfter(what, why string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return fmt.Errorf("zmtp: %s: the CURVE server closed the connection after our %s: %s: %w", c.label, what, why, err)
	}
	return err
}

// refusedBy is the client's error for the ERROR command whose data is
// data.
func (c *Conn) refusedBy(data []byte) error {
	reason := ""
	if len(data) > 0 && int(data[0]) < len(data) {
		reason = string(data[1 : 1+data[0]])
	}
	why := "the server refused the handshake"
	if reason == "400" {
		why = "the server does not admit our public key"
	}
	return fmt.Errorf("zmtp: %s: the CURVE server answered ERROR %q: %s", c.label, reason, why)
}

// curveServer does the server's side of the handshake, after the
// greetings, as a socket of type typ.
func (c *Conn) curveServer(typ string) error {
	cfg := c.curve
	name, data, err := c.handshakeCommand(maxCommand)
	if err != nil {
		return err
	}
	if name != "HELLO" || len(data) != helloData || data[0] != 1 || data[1] != 0 {
		return fmt.Errorf("zmtp: %s: a %q of %d bytes where a HELLO of CurveZMQ 1.0 (%d bytes) was due: %w", c.label, name, len(data), helloData, ErrProtocol)
	}
	var cPrime [32]byte
	copy(cPrime[:], data[74:106])
	heard := binary.BigEndian.Uint64(data[106:114])
	zeros, ok := box.Open(nil, data[114:], nonce("CurveZMQHELLO---", heard), &cPrime, (*[32]byte)(&cfg.secret))
	if !ok || subtle.ConstantTimeCompare(zeros, make([]byte, 64)) != 1 {
		return fmt.Errorf("zmtp: %s: a HELLO our key does not open: the client was given another public key for this server: %w", c.label, ErrProtocol)
	}

	sPub, sSec, err := box.GenerateKey(c.rand)
	if err != nil {
		return err
	}
	var cookieKey [32]byte
	var nonces [32]byte // the cookie's and the WELCOME's
	if _, err := io.ReadFull(c.rand, cookieKey[:]); err != nil {
		return err
	}
	if _, err := io.ReadFull(c.rand, nonces[:]); err != nil {
		return err
	}
	welcome := make([]byte, 0, 128)
	welcome = append(welcome, sPub[:]...)
	welcome = append(welcome, nonces[:16]...)
	welcome = secretbox.Seal(welcome, append(cPrime[:32:32], sSec[:]...), longNonce("COOKIE--", nonces[:16]), &cookieKey)
	out := append(make([]byte, 0, welcomeData), nonces[16:]...)
	out = box.Seal(out, welcome, longNonce("WELCOME-", nonces[16:]), &cPrime, (*[32]byte)(&cfg.secret))
	if err := c.send("WELCOME", out); err != nil {
		return err
	}

	name, data, err = c.handshakeCommand(1 + 8 + initiateData + maxCommand)
	if err != nil {
		return err
	}
	if name != "INITIATE" || len(data) < initiateData {
		return fmt.Errorf("zmtp: %s: a %q of %d bytes where an INITIATE was due: %w", c.label, name, len(data), ErrProtocol)
	}
	kept, ok := secretbox.Open(nil, data[16:96], longNonce("COOKIE--", data[:16]), &cookieKey)
	if !ok || subtle.ConstantTimeCompare(kept, append(cPrime[:32:32], sSec[:]...)) != 1 {
		return fmt.Errorf("zmtp: %s: an INITIATE whose cookie is not ours: %w", c.label, ErrProtocol)
	}
	n := binary.BigEndian.Uint64(data[96:104])
	if n <= heard {
		return fmt.Errorf("zmtp: %s: an INITIATE whose nonce %d does not follow the HELLO's %d: %w", c.label, n, heard, ErrProtocol)
	}
	heard = n
	var shared [32]byte
	box.Precompute(&shared, &cPrime, sSec)
	plain, ok := box.OpenAfterPrecomputation(nil, data[104:], nonce("CurveZMQINITIATE", heard), &shared)
	if !ok {
		return fmt.Errorf("zmtp: %s: an INITIATE that does not open: %w", c.label, ErrProtocol)
	}
	var client Key
	copy(client[:], plain[:32])
	vouch, ok := box.Open(nil, plain[48:128], longNonce("VOUCH---", plain[32:48]), (*[32]byte)(&client), sSec)
	if !ok || subtle.ConstantTimeCompare(vouch, append(cPrime[:32:32], cfg.public[:]...)) != 1 {
		return fmt.Errorf("zmtp: %s: an INITIATE whose vouch is not for this connection and this server: %w", c.label, ErrProtocol)
	}
	if _, admitted := cfg.clients[client]; cfg.clients != nil && !admitted {
		c.counts.unknownKeys.Add(1)
		// As libzmq's authentication answers; the peer gets no READY.
		c.send("ERROR", append([]byte{3}, "400"...))
		return fmt.Errorf("zmtp: %s: refused a CURVE client whose public key %s is not among those admitted: %w", c.label, client.Z85(), ErrNotAllowed)
	}
	if err := c.properties(typ, plain[128:]); err != nil {
		return err
	}

	var sent uint64 = 1
	ready := binary.BigEndian.AppendUint64(nil, sent)
	ready = box.SealAfterPrecomputation(ready, metadata(typ, nil), nonce("CurveZMQREADY---", sent), &shared)
	if err := c.send("READY", ready); err != nil {
		return err
	}
	c.cs = &curveSession{key: shared, sendPrefix: "CurveZMQMESSAGES", recvPrefix: "CurveZMQMESSAGEC", heard: heard, sent: sent}
	return nil
}

// nextCurve is next past a CURVE handshake: every frame is a MESSAGE
// command, its size checked against the limit of the frame it carries
// (or of a command, for a message's first frame) before its body is read,
// and its nonce against the last one heard before its box is opened.
func (c *Conn) nextCurve() (msg [][]byte, cmd string, data []byte, err error) {
	cs := c.cs
	for {
		flags, size, err := c.header()
		if err != nil {
			return nil, "", nil, err
		}
		// libzmq sends each MESSAGE as a frame of its own, its flags clear;
		// RFC 26 calls it a command, and a peer may flag it so.
		if flags&flagMore != 0 {
			return nil, "", nil, fmt.Errorf("zmtp: %s: a frame of several under CURVE, where each is a MESSAGE of its own: %w", c.label, ErrProtocol)
		}
		i := len(msg)
		if i >= c.lim.MaxFrames {
			return nil, "", nil, fmt.Errorf("zmtp: %s: a message of more than %d frames: %w", c.label, c.lim.MaxFrames, ErrTooManyFrames)
		}
		limit := c.lim.frame(i)
		if i == 0 {
			limit = max(limit, maxCommand)
		}
		if size > limit+curveOverhead {
			return nil, "", nil, fmt.Errorf("zmtp: %s: frame %d of %d bytes boxed, limit %d: %w", c.label, i, size, limit+curveOverhead, ErrFrameTooLong)
		}
		if size < curveOverhead {
			return nil, "", nil, fmt.Errorf("zmtp: %s: a MESSAGE of %d bytes, shorter than its box: %w", c.label, size, ErrProtocol)
		}
		body, err := c.body(size, true)
		if err != nil {
			return nil, "", nil, err
		}
		if string(body[:8]) != "\x07MESSAGE" {
			return nil, "", nil, fmt.Errorf("zmtp: %s: a %q command where a MESSAGE was due: %w", c.label, body[1:1+min(int(body[0]), 7)], ErrProtocol)
		}
		n := binary.BigEndian.Uint64(body[8:16])
		if n <= cs.heard {
			return nil, "", nil, fmt.Errorf("zmtp: %s: a MESSAGE whose nonce %d does not follow the last, %d (a replay): %w", c.label, n, cs.heard, ErrProtocol)
		}
		// The plaintext needs room of its own, reserved before it is made.
		if err := c.reserve(int64(size - curveOverhead + 1)); err != nil {
			return nil, "", nil, err
		}
		plain, ok := box.OpenAfterPrecomputation(make([]byte, 0, size-curveOverhead+1), body[16:], nonce(cs.recvPrefix, n), &cs.key)
		if !ok {
			return nil, "", nil, fmt.Errorf("zmtp: %s: a MESSAGE whose box does not open: %w", c.label, ErrProtocol)
		}
		cs.heard = n
		inner, frame := plain[0], plain[1:]
		if inner&curveCommand != 0 {
			if i > 0 || inner&curveMore != 0 {
				return nil, "", nil, fmt.Errorf("zmtp: %s: a command inside a message: %w", c.label, ErrProtocol)
			}
			if len(frame) > maxCommand {
				return nil, "", nil, fmt.Errorf("zmtp: %s: a command of %d bytes, limit %d: %w", c.label, len(frame), maxCommand, ErrFrameTooLong)
			}
			name, data, err := c.splitCommand(frame)
			return nil, name, data, err
		}
		if l := c.lim.frame(i); uint64(len(frame)) > l {
			return nil, "", nil, fmt.Errorf("zmtp: %s: frame %d of %d bytes, limit %d: %w", c.label, i, len(frame), l, ErrFrameTooLong)
		}
		msg = append(msg, frame)
		if inner&curveMore == 0 {
			return msg, "", nil, nil
		}
	}
}

// sealFrame writes one frame, head and body together, as a MESSAGE
// command with the inner flags given, and returns the bytes w took. Errors
// stay in w until its Flush. c.wmu is held.
func (c *Conn) sealFrame(inner byte, head, body []byte) int {
	cs := c.cs
	if cs.sent == math.MaxUint64 {
		// No nonce is left to send with: the connection must end.
		c.nc.Close()
		return 0
	}
	cs.sent++
	cs.plain = append(append(append(cs.plain[:0], inner), head...), body...)
	cs.sealed = box.SealAfterPrecomputation(cs.sealed[:0], cs.plain, nonce(cs.sendPrefix, cs.sent), &cs.key)
	n := 16 + len(cs.sealed)
	// A frame of its own with its flags clear, as libzmq sends it: libzmq
	// keeps the outer flags beside those in the box, so a command flag
	// outside would make every message a command.
	var h [9]byte
	hn := frameHeader(n)
	if hn == 9 {
		h[0] = flagLong
		binary.BigEndian.PutUint64(h[1:], uint64(n))
	} else {
		h[1] = byte(n)
	}
	var name [16]byte
	copy(name[:], "\x07MESSAGE")
	binary.BigEndian.PutUint64(name[8:], cs.sent)
	a, _ := c.w.Write(h[:hn])
	b, _ := c.w.Write(name[:])
	d, _ := c.w.Write(cs.sealed)
	if cap(cs.plain) > keepScratch {
		cs.plain, cs.sealed = nil, nil
	}
	return a + b + d
}

// curveWireSize is the length of a message on the wire under CURVE, as
// sealFrame writes it.
func curveWireSize(frames [][]byte) int {
	n := 0
	for _, f := range frames {
		n += frameHeader(len(f)+curveOverhead) + len(f) + curveOverhead
	}
	return n
}

// defaultRand is where handshakes take their keys and nonces.
var defaultRand io.Reader = rand.Reader
