package zmtp

import (
	"context"
	"net"
	"sync"
	"time"
)

// SubOptions configure a [Sub].
type SubOptions struct {
	// Limits bound the messages read from publishers; Queue and
	// QueueBytes bound what waits for Recv, in total over publishers, and
	// MaxPeers the publishers that connect to a listening Sub.
	Limits Limits
	// OnViolation, if not nil, hears of every connection closed for
	// breaking the protocol or a limit. It may be called from several
	// goroutines at once.
	OnViolation func(error)
	// DialWait is how long Dial waits for its first connection: zero
	// means DefaultDialWait, a negative value not to wait at all.
	DialWait time.Duration
	// HandshakeTimeout bounds each connection's handshake; zero means
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// Heartbeat sets the PINGs sent to each publisher, and how long one
	// that answered them may go silent before its connection is closed
	// (and, for Dial, made again).
	Heartbeat Heartbeat
	// Curve, if not nil, speaks CURVE on every connection: as the server
	// on those Listen accepts, as the client on those Dial makes.
	Curve *Curve
}

// Sub is a SUB socket: it receives from any number of publishers, each
// read by its own goroutine, into one bounded queue. When the queue is
// full the readers wait their turn, first come first served, and TCP slows
// the publishers down. A Sub is safe for concurrent use.
type Sub struct {
	s        *socket
	in       inbox
	dialWait time.Duration

	mu     sync.Mutex
	subs   []string // every Subscribe so far, in order
	peers  map[*subPeer]struct{}
	serial uint64 // the connections served so far
}

type subPeer struct {
	c    *Conn
	wake chan struct{} // there are subscriptions to send
	done chan struct{} // the connection ended
}

// NewSub returns a Sub with no connections and no subscriptions; use
// Listen or Dial, and Subscribe.
func NewSub(opts SubOptions) *Sub {
	s := &Sub{
		s:        newSocket("SUB", opts.Limits, opts.OnViolation, opts.HandshakeTimeout, opts.Heartbeat.withDefaults(), opts.Curve),
		dialWait: opts.DialWait,
		peers:    make(map[*subPeer]struct{}),
	}
	if s.dialWait == 0 {
		s.dialWait = DefaultDialWait
	}
	s.in.init(s.s.lim.Queue, s.s.lim.QueueBytes)
	return s
}

// Listen accepts publishers on endpoint, at most Limits.MaxPeers at once.
// It may be called more than once.
func (s *Sub) Listen(endpoint string) error { return s.s.listen(endpoint, s.serve) }

// Dial connects to a PUB socket listening on endpoint. It returns once
// the first handshake is done, or an error if none is within DialWait;
// after that it connects again, with backoff, whenever the connection
// fails or ends, until Close.
func (s *Sub) Dial(endpoint string) error { return s.s.dial(endpoint, s.dialWait, s.serve) }

// Addr returns the address of the first endpoint the Sub listens on, or
// nil.
func (s *Sub) Addr() net.Addr { return s.s.addr() }

// Subscribe asks every publisher, those connected now and those to come,
// for the messages whose first frame starts with prefix; "" is all.
func (s *Sub) Subscribe(prefix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs = append(s.subs, prefix)
	for sp := range s.peers {
		select {
		case sp.wake <- struct{}{}:
		default:
		}
	}
}

// Recv returns the next message from any publisher; each publisher's
// messages come in the order it sent them. It returns [ErrClosed] after
// Close, or ctx's error.
func (s *Sub) Recv(ctx context.Context) ([][]byte, error) {
	m, _, err := s.in.take(ctx)
	return m, err
}

// RecvFrom is Recv that also returns the serial number of the connection
// the message came on: a new number means a new connection, such as a
// publisher that came back or was replaced.
func (s *Sub) RecvFrom(ctx context.Context) (msg [][]byte, conn uint64, err error) {
	return s.in.take(ctx)
}

// Refusals returns what the limits on publishers' connections refused.
func (s *Sub) Refusals() Refusals { return s.s.refusals() }

// ReadBytes returns the bytes of messages being read now from the
// publishers, bounded by Limits.ReadBytes; those read and waiting for
// Recv are bounded by Limits.QueueBytes apart.
func (s *Sub) ReadBytes() int64 { return s.s.readBytes() }

// Unread returns how many received messages Close dropped, never taken by
// Recv: after Close, a consumer that fell behind knows it.
func (s *Sub) Unread() int {
	s.in.mu.Lock()
	defer s.in.mu.Unlock()
	return s.in.unread
}

// Close closes every connection and listener and ends the dialers;
// messages not yet taken by Recv are lost, and counted by Unread.
func (s *Sub) Close() error {
	s.s.stop()
	s.in.close()
	s.s.closeConns()
	return nil
}

// serve runs one publisher's connection: a goroutine sends it the
// subscriptions, and its messages are read here into the queue.
func (s *Sub) serve(c *Conn) {
	sp := &subPeer{c: c, wake: make(chan struct{}, 1), done: make(chan struct{})}
	sp.wake <- struct{}{}
	s.mu.Lock()
	s.peers[sp] = struct{}{}
	s.serial++
	serial := s.serial
	s.mu.Unlock()
	written := make(chan struct{})
	go func() {
		defer close(written)
		s.subscriptions(sp)
	}()
	for {
		msg, err := c.ReadMsg()
		if err != nil || s.in.put(msg, serial) != nil {
			break
		}
	}
	c.Close()
	close(sp.done)
	<-written
	s.mu.Lock()
	delete(s.peers, sp)
	s.mu.Unlock()
}

// subscriptions sends the peer each subscription as it is made, in ZMTP
// 3.0's form: a message of the byte 1 and the prefix.
func (s *Sub) subscriptions(sp *subPeer) {
	sent := 0
	for {
		select {
		case <-sp.wake:
		case <-sp.done:
			return
		}
		s.mu.Lock()
		todo := s.subs[sent:len(s.subs):len(s.subs)]
		s.mu.Unlock()
		msgs := make([][][]byte, len(todo))
		for i, prefix := range todo {
			msgs[i] = [][]byte{append([]byte{1}, prefix...)}
		}
		if _, err := sp.c.writeBatch(msgs); err != nil {
			sp.c.Close()
			return
		}
		sent += len(todo)
	}
}

// inbox is a Sub's receive queue, bounded in messages and bytes. Readers
// that find it full take a ticket and are let in in ticket order, so a
// publisher that floods cannot keep another out.
type inbox struct {
	maxMsgs, maxBytes int

	mu           sync.Mutex
	room         sync.Cond // the queue shrank, or the turn moved on
	q            []received
	bytes        int
	ticket, turn uint64
	closed       bool
	avail        chan struct{} // the queue may have a message
	done         chan struct{} // closed by close

	unread int // messages in the queue when it closed
}

// received is a message and the serial number of its connection.
type received struct {
	m    [][]byte
	conn uint64
}

func (in *inbox) init(maxMsgs, maxBytes int) {
	in.maxMsgs, in.maxBytes = maxMsgs, maxBytes
	in.room.L = &in.mu
	in.avail = make(chan struct{}, 1)
	in.done = make(chan struct{})
}

func size(m [][]byte) int {
	n := 0
	for _, f := range m {
		n += len(f)
	}
	return n
}

// put adds m, from connection conn, waiting for room and for its turn.
func (in *inbox) put(m [][]byte, conn uint64) error {
	n := size(m)
	in.mu.Lock()
	defer in.mu.Unlock()
	t := in.ticket
	in.ticket++
	// A message bigger than maxBytes goes in alone.
	for !in.closed && (t != in.turn || len(in.q) >= in.maxMsgs || (len(in.q) > 0 && in.bytes+n > in.maxBytes)) {
		in.room.Wait()
	}
	if in.closed {
		return ErrClosed
	}
	in.q = append(in.q, received{m, conn})
	in.bytes += n
	in.turn++
	in.room.Broadcast()
	select {
	case in.avail <- struct{}{}:
	default:
	}
	return nil
}

// take returns the oldest message and its connection, waiting for one.
func (in *inbox) take(ctx context.Context) ([][]byte, uint64, error) {
	for {
		in.mu.Lock()
		if in.closed {
			in.mu.Unlock()
			return nil, 0, ErrClosed
		}
		if len(in.q) > 0 {
			r := in.q[0]
			in.q[0] = received{}
			in.q = in.q[1:]
			in.bytes -= size(r.m)
			if len(in.q) > 0 {
				select {
				case in.avail <- struct{}{}:
				default:
				}
			} else {
				in.q = nil
			}
			in.room.Broadcast()
			in.mu.Unlock()
			return r.m, r.conn, nil
		}
		in.mu.Unlock()
		select {
		case <-in.avail:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-in.done:
		}
	}
}

func (in *inbox) close() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.closed {
		in.closed = true
		in.unread = len(in.q)
		close(in.done)
		in.room.Broadcast()
	}
}
