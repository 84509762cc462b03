package zmtp

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
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
