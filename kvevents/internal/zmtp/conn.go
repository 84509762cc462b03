package zmtp

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Socket types for [Dial]. The other socket types this package speaks
// have their own constructors ([NewPub], [NewSub], [NewServer]).
const (
	Dealer = "DEALER"
	Router = "ROUTER"
	Req    = "REQ"
)

// compatible lists, per socket type, the peer types it accepts (RFC 23).
var compatible = map[string][]string{
	"PUB":  {"SUB", "XSUB"},
	"SUB":  {"PUB", "XPUB"},
	Router: {Dealer, Req, Router},
	Dealer: {Router, "REP", Dealer},
	Req:    {Router, "REP"},
}

// Frame flags.
const (
	flagMore    = 1
	flagLong    = 2
	flagCommand = 4
)

// bufSize is the size of each connection's read and write buffers.
const bufSize = 64 << 10

// Conn is one ZMTP connection past its handshake. ReadMsg is for one
// goroutine at a time; WriteMsg, SetDeadline and Close may be called from
// any goroutine. Any read error closes the connection.
type Conn struct {
	nc       net.Conn
	r        *bufio.Reader
	lim      Limits
	report   func(error) // nil, or the socket's OnViolation
	counts   *refusals   // the socket's, or the Conn's own
	label    string
	peerType string
	minor    byte // the peer's ZMTP minor version: 1 or more speaks heartbeats (RFC 37)
	identity []byte
	hdr      [8]byte
	reported atomic.Bool

	// The reading goroutine's: the message being read holds held bytes
	// of budget, and partial says one is under way (so FrameTimeout, not
	// the heartbeat's, bounds the wait for its next byte).
	budget  *budget
	held    int64
	partial bool

	hbTimeout time.Duration // our heartbeat timeout when we send PINGs, else 0
	heard     atomic.Bool   // the peer sent a PING or a PONG: it speaks heartbeats
	peerTTL   atomic.Int64  // the TTL of the peer's last PING, in nanoseconds

	dmu      sync.Mutex
	deadline time.Time // the caller's read deadline (SetDeadline), zero for none

	done      chan struct{} // closed by Close
	closeOnce sync.Once

	wmu sync.Mutex
	w   *bufio.Writer
}

func newConn(nc net.Conn, lim Limits, report func(error), label string) *Conn {
	c := &Conn{nc: nc, w: bufio.NewWriterSize(nc, bufSize), lim: lim, report: report, label: label,
		counts: &refusals{}, budget: newBudget(lim.ReadBytes), done: make(chan struct{})}
	c.r = bufio.NewReaderSize(connReader{c}, bufSize)
	return c
}

// connReader reads the connection under a read deadline set before each
// read: the caller's, or sooner FrameTimeout inside a message or the
// heartbeat timeout between messages, each counted from the start of the
// read, so that the time spent elsewhere (a full receive queue) does not
// count against the peer.
type connReader struct{ c *Conn }

func (r connReader) Read(p []byte) (int, error) {
	c := r.c
	c.dmu.Lock()
	d := c.deadline
	c.dmu.Unlock()
	wait, kind, what := c.lim.FrameTimeout, &c.counts.stalled, "a message made no progress"
	if !c.partial {
		wait, kind, what = c.idle(), &c.counts.silent, "nothing heard"
	}
	ours := false
	if t := time.Now().Add(wait); wait > 0 && (d.IsZero() || t.Before(d)) {
		d, ours = t, true
	}
	c.nc.SetReadDeadline(d)
	n, err := c.nc.Read(p)
	if err != nil && ours && errors.Is(err, os.ErrDeadlineExceeded) {
		kind.Add(1)
		err = fmt.Errorf("zmtp: %s: %s for %v: %w", c.label, what, wait, ErrTimeout)
	}
	return n, err
}

// idle returns how long the peer may stay silent between messages: our
// heartbeat timeout, or else its PING's TTL, once it has shown it speaks
// heartbeats; 0 for no limit.
func (c *Conn) idle() time.Duration {
	if !c.heard.Load() {
		return 0
	}
	if c.hbTimeout > 0 {
		return c.hbTimeout
	}
	return time.Duration(c.peerTTL.Load())
}

// heartbeat sends a PING every h.Interval until the connection closes.
// A PING that would wait for another write is skipped: that write is
// traffic too.
func (c *Conn) heartbeat(h Heartbeat) {
	t := time.NewTicker(h.Interval)
	defer t.Stop()
	ttl := uint16(min(h.Timeout/(100*time.Millisecond), 0xFFFF)) // in tenths of a second (RFC 37)
	var n uint32
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		n++
		data := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, ttl), n)
		c.tryWrite(command("PING", data))
	}
}

// tryWrite writes b unless a write is under way.
func (c *Conn) tryWrite(b []byte) {
	if c.wmu.TryLock() {
		c.w.Write(b)
		_ = c.w.Flush()
		c.wmu.Unlock()
	}
}

// Dial connects to endpoint as a socket of type socketType (usually
// [Dealer]) with the given identity, and does the handshake, within ctx
// (and at most [DefaultHandshakeTimeout] for the handshake). Messages read
// from the Conn are bounded by limits. It does not reconnect: a Conn that
// fails is done.
func Dial(ctx context.Context, endpoint, socketType string, identity []byte, limits Limits) (*Conn, error) {
	if compatible[socketType] == nil {
		return nil, fmt.Errorf("zmtp: unsupported socket type %q", socketType)
	}
	if len(identity) > 255 {
		return nil, fmt.Errorf("zmtp: an identity of %d bytes, limit 255", len(identity))
	}
	ep, err := parseEndpoint(endpoint)
	if err == nil {
		err = ep.dialable()
	}
	if err != nil {
		return nil, err
	}
	nc, err := ep.dial(ctx)
	if err != nil {
		return nil, err
	}
	c := newConn(nc, limits.withDefaults(), nil, ep.raw)
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	deadline := time.Now().Add(DefaultHandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	err = c.handshake(socketType, identity, deadline)
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("zmtp: handshake with %s: %w", ep, ctx.Err())
		}
		return nil, err
	}
	return c, nil
}

// ReadMsg returns the next message, answering PING and skipping the other
// commands on the way. A message that breaks the limits closes the
// connection and returns an error wrapping [ErrFrameTooLong],
// [ErrTooManyFrames] or [ErrProtocol] (a Server's connection reports it to
// OnViolation too).
func (c *Conn) ReadMsg() ([][]byte, error) {
	for {
		msg, cmd, data, err := c.recv()
		if err != nil {
			return nil, err
		}
		if cmd == "" {
			return msg, nil
		}
		if err := c.command(cmd, data); err != nil {
			return nil, err
		}
	}
}

// WriteMsg writes one message of one or more frames and flushes it.
func (c *Conn) WriteMsg(frames [][]byte) error {
	if len(frames) == 0 {
		return errors.New("zmtp: a message of no frames")
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	writeMsg(c.w, frames)
	return c.w.Flush()
}

// writeBatch writes several messages with one flush.
func (c *Conn) writeBatch(msgs [][][]byte) (whole int, err error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var accepted int
	for _, m := range msgs {
		accepted += writeMsg(c.w, m)
	}
	if err = c.w.Flush(); err == nil {
		return len(msgs), nil
	}
	// After a failed write, the bytes the connection took are those handed
	// to the writer less what it still buffers; the messages within them
	// arrived whole.
	written := accepted - c.w.Buffered()
	for end := 0; whole < len(msgs); whole++ {
		if end += wireSize(msgs[whole]); end > written {
			break
		}
	}
	return whole, err
}

// SetDeadline sets the read and write deadline of the connection, as
// net.Conn's does; the zero time means none. The limits' timeouts apply
// within it.
func (c *Conn) SetDeadline(t time.Time) error {
	c.dmu.Lock()
	c.deadline = t
	c.dmu.Unlock()
	return c.nc.SetDeadline(t)
}

// Close closes the connection.
func (c *Conn) Close() error {
	err := net.ErrClosed
	c.closeOnce.Do(func() {
		close(c.done)
		err = c.nc.Close()
	})
	return err
}

// handOn frees the budget held by the message just read: it belongs to
// its reader now.
func (c *Conn) handOn() {
	c.budget.release(c.held)
	c.held = 0
}

// reserve takes n bytes of the budget for the message being read,
// waiting up to FrameTimeout for room.
func (c *Conn) reserve(n int64) error {
	if !c.budget.reserve(n, c.held, time.Now().Add(c.lim.FrameTimeout), c.done) {
		c.counts.stalled.Add(1)
		return fmt.Errorf("zmtp: %s: no room for %d more bytes of a message within %v: %w", c.label, n, c.lim.FrameTimeout, ErrTimeout)
	}
	c.held += n
	return nil
}

// PeerType returns the socket type the peer announced, such as "DEALER".
func (c *Conn) PeerType() string { return c.peerType }

// Identity returns the identity the peer announced, if any.
func (c *Conn) Identity() []byte { return c.identity }

// NetConn returns the connection under c, whose handshake is done and
// whose writes are flushed: for a test that plays a peer writing bytes no
// well-behaved peer sends.
func (c *Conn) NetConn() net.Conn { return c.nc }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// fail closes the connection after err, and reports err if it is a
// violation.
func (c *Conn) fail(err error) {
	c.violated(err)
	c.Close()
}

// violated reports err if it is a violation, once per connection.
func (c *Conn) violated(err error) {
	if violation(err) && c.report != nil && c.reported.CompareAndSwap(false, true) {
		c.report(err)
	}
}

// command handles a command that the socket itself does not use.
func (c *Conn) command(name string, data []byte) error {
	switch name {
	case "PING": // 2 bytes of TTL in tenths of a second, then up to 16 bytes of context for the PONG
		if len(data) >= 2 {
			c.peerTTL.Store(int64(binary.BigEndian.Uint16(data)) * int64(100*time.Millisecond))
			c.heard.Store(true)
			ctx := data[2:]
			// Not behind a write that waits for the peer to read: the
			// reader must go on, to notice if the peer went silent.
			c.tryWrite(command("PONG", ctx[:min(len(ctx), 16)]))
		}
	case "PONG":
		c.heard.Store(true)
	case "ERROR":
		reason := ""
		if len(data) > 0 && int(data[0]) < len(data) {
			reason = string(data[1 : 1+data[0]])
		}
		c.Close()
		return fmt.Errorf("zmtp: %s: the peer sent ERROR %q", c.label, reason)
	}
	return nil
}

// recv is next that closes the connection on error, and hands the
// message on: its bytes leave the read budget.
func (c *Conn) recv() (msg [][]byte, cmd string, data []byte, err error) {
	msg, cmd, data, err = c.next()
	c.partial = false
	c.handOn()
	if err != nil {
		c.fail(err)
	}
	return msg, cmd, data, err
}

// next reads one message, or one command (cmd is its name). Every size is
// checked against its limit before the body is read.
func (c *Conn) next() (msg [][]byte, cmd string, data []byte, err error) {
	for {
		flags, size, err := c.header()
		if err != nil {
			return nil, "", nil, err
		}
		if flags&flagCommand != 0 {
			if len(msg) > 0 || flags&flagMore != 0 {
				return nil, "", nil, fmt.Errorf("zmtp: %s: a command inside a message: %w", c.label, ErrProtocol)
			}
			if size > maxCommand {
				return nil, "", nil, fmt.Errorf("zmtp: %s: a command of %d bytes, limit %d: %w", c.label, size, maxCommand, ErrFrameTooLong)
			}
			body, err := c.body(size, false)
			if err != nil {
				return nil, "", nil, err
			}
			name, data, err := c.splitCommand(body)
			return nil, name, data, err
		}
		i := len(msg)
		if i >= c.lim.MaxFrames {
			return nil, "", nil, fmt.Errorf("zmtp: %s: a message of more than %d frames: %w", c.label, c.lim.MaxFrames, ErrTooManyFrames)
		}
		if limit := c.lim.frame(i); size > limit {
			return nil, "", nil, fmt.Errorf("zmtp: %s: frame %d of %d bytes, limit %d: %w", c.label, i, size, limit, ErrFrameTooLong)
		}
		body, err := c.body(size, true)
		if err != nil {
			return nil, "", nil, err
		}
		msg = append(msg, body)
		if flags&flagMore == 0 {
			return msg, "", nil, nil
		}
	}
}

// header reads a frame's flags and size.
func (c *Conn) header() (flags byte, size uint64, err error) {
	if flags, err = c.r.ReadByte(); err != nil {
		return 0, 0, err
	}
	c.partial = true
	if flags&^(flagMore|flagLong|flagCommand) != 0 {
		return 0, 0, fmt.Errorf("zmtp: %s: frame flags %#x: %w", c.label, flags, ErrProtocol)
	}
	if flags&flagLong == 0 {
		b, err := c.r.ReadByte()
		return flags, uint64(b), err
	}
	if _, err := io.ReadFull(c.r, c.hdr[:]); err != nil {
		return 0, 0, err
	}
	return flags, binary.BigEndian.Uint64(c.hdr[:]), nil
}

// body reads a frame body of n bytes, n already within a limit; a
// counted body's bytes are reserved from the budget first. A long body
// grows with what arrives, so a peer that announces the limit and sends
// nothing costs little.
func (c *Conn) body(n uint64, counted bool) ([]byte, error) {
	if n <= bufSize {
		if counted {
			if err := c.reserve(int64(n)); err != nil {
				return nil, err
			}
		}
		b := make([]byte, n)
		_, err := io.ReadFull(c.r, b)
		return b, err
	}
	var b []byte
	for uint64(len(b)) < n {
		k := int(min(n-uint64(len(b)), uint64(max(len(b), bufSize))))
		if counted {
			if err := c.reserve(int64(k)); err != nil {
				return nil, err
			}
		}
		b = append(make([]byte, 0, len(b)+k), b...)
		m, err := io.ReadFull(c.r, b[len(b):len(b)+k])
		b = b[:len(b)+m]
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (c *Conn) splitCommand(body []byte) (name string, data []byte, err error) {
	if len(body) == 0 || body[0] == 0 || int(body[0]) > len(body)-1 {
		return "", nil, fmt.Errorf("zmtp: %s: a malformed command: %w", c.label, ErrProtocol)
	}
	n := int(body[0])
	return string(body[1 : 1+n]), body[1+n:], nil
}

// greeting returns the 64-byte ZMTP 3 greeting of the NULL mechanism.
func greeting(minor byte) []byte {
	g := make([]byte, 64)
	g[0], g[9], g[10], g[11] = 0xFF, 0x7F, 3, minor
	copy(g[12:], "NULL")
	return g
}

// checkGreeting checks the signature and major version of a greeting's
// first 11 bytes, and the mechanism too when g is the whole greeting.
func (c *Conn) checkGreeting(g []byte) error {
	var mech [20]byte
	copy(mech[:], "NULL")
	switch {
	case g[0] != 0xFF || g[9]&1 != 1:
		return fmt.Errorf("zmtp: %s: not a ZMTP greeting: %w", c.label, ErrProtocol)
	case g[10] < 3:
		return fmt.Errorf("zmtp: %s: ZMTP version %d, want 3: %w", c.label, g[10], ErrProtocol)
	case len(g) == 64 && string(g[12:32]) != string(mech[:]):
		return fmt.Errorf("zmtp: %s: security mechanism %q, want NULL: %w", c.label, strings.TrimRight(string(g[12:32]), "\x00"), ErrProtocol)
	}
	return nil
}

// command returns the frame of a command.
func command(name string, data []byte) []byte {
	body := append([]byte{byte(len(name))}, name...)
	body = append(body, data...)
	h := []byte{flagCommand, byte(len(body))}
	if len(body) > 255 {
		h = binary.BigEndian.AppendUint64([]byte{flagCommand | flagLong}, uint64(len(body)))
	}
	return append(h, body...)
}

// ready returns the READY command of a socket of type typ.
func ready(typ string, identity []byte) []byte {
	p := property(nil, "Socket-Type", []byte(typ))
	if typ == Dealer || typ == Req || typ == Router {
		p = property(p, "Identity", identity)
	}
	return command("READY", p)
}

func property(b []byte, name string, value []byte) []byte {
	b = append(b, byte(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(value)))
	return append(b, value...)
}

// handshake exchanges greetings and READY commands as a socket of type
// typ, by deadline, and checks that the peer is of a compatible type. The
// caller closes the connection if it fails.
func (c *Conn) handshake(typ string, identity []byte, deadline time.Time) error {
	err := c.shake(typ, identity, deadline)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.counts.timeouts.Add(1)
		err = fmt.Errorf("zmtp: %s: no handshake by the deadline: %w", c.label, ErrProtocol)
	}
	c.violated(err)
	return err
}

func (c *Conn) shake(typ string, identity []byte, deadline time.Time) error {
	c.SetDeadline(deadline)
	// We announce ZMTP 3.1: we answer its PING and take its SUBSCRIBE and
	// CANCEL commands, and still send subscriptions as 3.0 messages, which
	// every PUB takes. The signature and major version go first, then the
	// rest, as libzmq does: an older peer sends no more until it has ours,
	// and libzmq sends its mechanism only then, but closes at once if it
	// reads a mechanism other than its own: so its mechanism is read, and
	// named in the error, before ours is sent.
	out, g := greeting(1), make([]byte, 64)
	err := c.exchange(out[:11], func() error {
		if _, err := io.ReadFull(c.r, g[:11]); err != nil {
			return err
		}
		return c.checkGreeting(g[:11])
	})
	if err == nil {
		err = c.exchange(out[11:], func() error {
			if _, err := io.ReadFull(c.r, g[11:]); err != nil {
				return err
			}
			c.minor = g[11]
			return c.checkGreeting(g)
		})
	}
	if err != nil {
		return err
	}
	err = c.exchange(ready(typ, identity), func() error {
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

// exchange writes out while in reads: a peer may wait for our bytes
// before it sends its own, and an inproc pipe has no buffer.
func (c *Conn) exchange(out []byte, in func() error) error {
	done := make(chan error, 1)
	go func() {
		_, err := c.nc.Write(out)
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

// writeMsg writes the frames of one message to w; errors stay in w until
// its Flush.
// writeMsg writes the frames of one message to w and returns the bytes w
// took: all of them, but after a write error.
func writeMsg(w *bufio.Writer, frames [][]byte) int {
	var h [9]byte
	took := 0
	for i, f := range frames {
		h[0] = 0
		if i < len(frames)-1 {
			h[0] = flagMore
		}
		n := frameHeader(len(f))
		if n == 9 {
			h[0] |= flagLong
			binary.BigEndian.PutUint64(h[1:], uint64(len(f)))
		} else {
			h[1] = byte(len(f))
		}
		k, _ := w.Write(h[:n])
		m, _ := w.Write(f)
		took += k + m
	}
	return took
}

// wireSize is the length of a message on the wire, as writeMsg writes it.
func wireSize(frames [][]byte) int {
	n := 0
	for _, f := range frames {
		n += frameHeader(len(f)) + len(f)
	}
	return n
}

// frameHeader is the length of a frame's flags and size: a short frame's
// size takes one byte, a long one's eight.
func frameHeader(size int) int {
	if size > 255 {
		return 9
	}
	return 2
}
