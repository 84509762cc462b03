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

	// CURVE: the configuration (nil for NULL) and the role it takes in
	// the handshake, where its keys and nonces come from, and, past the
	// handshake, the session that boxes every frame.
	curve    *curveConfig
	asServer bool
	rand     io.Reader
	cs       *curveSession

	// The reading goroutine's: the message being read holds held bytes
	// of budget, and partial says one is under way (so FrameTimeout, not
	// the heartbeat's, bounds the wait for its next byte).
	budget  *budget
	held    int64
	partial bool

	hbTimeout time.Duration // our heartbeat timeout when we send PINGs, else 0
	peerTTL   atomic.Int64  // the TTL of the peer's last PING, in nanoseconds
	// quiet bounds the silence between messages of a peer held to no
	// heartbeat timeout (0: none), unless keep says it is of use silent:
	// a Pub's subscriber of ZMTP 3.0 once it has a subscription.
	quiet time.Duration
	keep  atomic.Bool
	// progress counts the bytes read in the handshake of an accepted
	// connection, so that the handshake furthest behind yields its slot; nil
	// otherwise. The reading goroutine's.
	progress *atomic.Int64

	wdmu      sync.Mutex
	wdeadline time.Time // the write deadline set by SetDeadline or setWriteDeadline, zero for none

	dmu      sync.Mutex
	deadline time.Time // the caller's read deadline (SetDeadline), zero for none

	done      chan struct{} // closed by Close
	closeOnce sync.Once

	wmu sync.Mutex
	w   *bufio.Writer
}

func newConn(nc net.Conn, lim Limits, report func(error), label string) *Conn {
	c := &Conn{nc: nc, w: bufio.NewWriterSize(nc, bufSize), lim: lim, report: report, label: label,
		counts: &refusals{}, budget: newBudget(lim.ReadBytes), quiet: lim.IdleTimeout, done: make(chan struct{}), rand: defaultRand}
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
	if c.progress != nil {
		c.progress.Add(int64(n))
	}
	if err != nil && ours && errors.Is(err, os.ErrDeadlineExceeded) {
		kind.Add(1)
		err = fmt.Errorf("zmtp: %s: %s for %v: %w", c.label, what, wait, ErrTimeout)
	}
	return n, err
}

// idle returns how long the peer may stay silent between messages, 0 for
// no limit. A peer of ZMTP 3.1 answers every PING (RFC 37), so it is held
// to our heartbeat timeout from the start when we send PINGs, and to the
// TTL of its own last PING when it is shorter (a TTL of 0 asks for none).
// A peer held to neither, a ZMTP 3.0 peer or one we do not PING, is held
// to the quiet time unless it is of use silent.
func (c *Conn) idle() time.Duration {
	var d time.Duration
	shorten := func(t time.Duration) {
		if t > 0 && (d == 0 || t < d) {
			d = t
		}
	}
	if c.minor >= 1 {
		shorten(c.hbTimeout)
		shorten(time.Duration(c.peerTTL.Load()))
	}
	if d == 0 && !c.keep.Load() {
		d = c.quiet
	}
	return d
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
		c.tryWrite("PING", data)
	}
}

// tryWrite writes the command name unless a write is under way, within
// FrameTimeout: a peer that does not take a heartbeat in that time (one
// that floods PINGs and never reads) is closed, rather than left to hold
// the writer and its reader, which answers its PINGs.
func (c *Conn) tryWrite(name string, data []byte) {
	if !c.wmu.TryLock() {
		return
	}
	defer c.wmu.Unlock()
	select {
	case <-c.done:
		return
	default:
	}
	c.wdmu.Lock()
	limit := time.Now().Add(c.lim.FrameTimeout)
	if !c.wdeadline.IsZero() && c.wdeadline.Before(limit) {
		limit = c.wdeadline
	}
	c.nc.SetWriteDeadline(limit)
	c.wdmu.Unlock()
	c.putCommand(name, data)
	err := c.w.Flush()
	c.wdmu.Lock()
	c.nc.SetWriteDeadline(c.wdeadline)
	c.wdmu.Unlock()
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.counts.stalled.Add(1)
		c.fail(fmt.Errorf("zmtp: %s: a heartbeat not taken within %v: %w", c.label, c.lim.FrameTimeout, ErrTimeout))
	case err != nil:
		c.Close()
	}
}

// setWriteDeadline sets the connection's write deadline, which the
// heartbeats' own writes keep to.
func (c *Conn) setWriteDeadline(t time.Time) {
	c.wdmu.Lock()
	c.wdeadline = t
	c.nc.SetWriteDeadline(t)
	c.wdmu.Unlock()
}

// Dial connects to endpoint as a socket of type socketType (usually
// [Dealer]) with the given identity, and does the handshake, within ctx
// (and at most [DefaultHandshakeTimeout] for the handshake): as the client
// of curve if it is not nil, else with the NULL mechanism. Messages read
// from the Conn are bounded by limits. It does not reconnect: a Conn that
// fails is done.
func Dial(ctx context.Context, endpoint, socketType string, identity []byte, limits Limits, curve *Curve) (*Conn, error) {
	cfg := curve.prepare()
	if err := cfg.check(false); err != nil {
		return nil, err
	}
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
	c.curve = cfg
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
	err = c.handshake(socketType, identity, deadline, nil)
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
	c.putMsg(frames)
	return c.w.Flush()
}

// writeBatch writes several messages with one flush.
func (c *Conn) writeBatch(msgs [][][]byte) (whole int, err error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var accepted int
	for _, m := range msgs {
		accepted += c.putMsg(m)
	}
	if err = c.w.Flush(); err == nil {
		return len(msgs), nil
	}
	// After a failed write, the bytes the connection took are those handed
	// to the writer less what it still buffers; the messages within them
	// arrived whole.
	written := accepted - c.w.Buffered()
	for end := 0; whole < len(msgs); whole++ {
		if end += c.wireSize(msgs[whole]); end > written {
			break
		}
	}
	return whole, err
}

// putMsg writes the frames of one message to c's writer, boxed past a
// CURVE handshake, and returns the bytes the writer took. c.wmu is held.
func (c *Conn) putMsg(frames [][]byte) int {
	if c.cs == nil {
		return writeMsg(c.w, frames)
	}
	took := 0
	for i, f := range frames {
		var inner byte
		if i < len(frames)-1 {
			inner = curveMore
		}
		took += c.sealFrame(inner, nil, f)
	}
	return took
}

// putCommand writes the command name to c's writer, boxed past a CURVE
// handshake. c.wmu is held.
func (c *Conn) putCommand(name string, data []byte) {
	if c.cs == nil {
		c.w.Write(command(name, data))
		return
	}
	c.sealFrame(curveCommand, append([]byte{byte(len(name))}, name...), data)
}

// wireSize is the length of a message on c's wire, as putMsg writes it.
func (c *Conn) wireSize(frames [][]byte) int {
	if c.cs == nil {
		return wireSize(frames)
	}
	return curveWireSize(frames)
}

// SetDeadline sets the read and write deadline of the connection, as
// net.Conn's does; the zero time means none. The limits' timeouts apply
// within it.
func (c *Conn) SetDeadline(t time.Time) error {
	c.dmu.Lock()
	c.deadline = t
	c.dmu.Unlock()
	c.wdmu.Lock()
	defer c.wdmu.Unlock()
	c.wdeadline = t
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
			ctx := data[2:]
			// Not behind a write that waits for the peer to read: the
			// reader must go on, to notice if the peer went silent.
			c.tryWrite("PONG", ctx[:min(len(ctx), 16)])
		}
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
