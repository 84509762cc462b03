package zmtp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// PubOptions configure a [Pub].
type PubOptions struct {
	// Limits bound what subscribers send (subscriptions: one frame of a
	// flag byte and a topic prefix, so Frames: {1 + longest prefix} and
	// MaxFrames: 1 fit); Queue and QueueBytes are each subscriber's
	// high-water marks, in messages and in bytes, and MaxPeers bounds the
	// subscribers that connect to a listening Pub.
	Limits Limits
	// OnViolation, if not nil, hears of every connection closed for
	// breaking the protocol or a limit. It may be called from several
	// goroutines at once.
	OnViolation func(error)
	// OnDrop, if not nil, hears of the first message dropped for each
	// subscriber, with the subscriber's address; the later ones are
	// counted in PubStats. It is called from Send.
	OnDrop func(peer string)
	// HandshakeTimeout bounds each connection's handshake; zero means
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// Heartbeat sets the PINGs sent to each subscriber, and how long one
	// that answered them may go silent.
	Heartbeat Heartbeat
	// Curve, if not nil, speaks CURVE on every connection: as the server
	// on those Listen accepts, as the client on those Dial makes.
	Curve *Curve
}

// Pub is a PUB socket. Each subscriber has its own queue of at most
// Limits.Queue messages and Limits.QueueBytes bytes and its own writer
// goroutine, so Send never waits for a subscriber: a subscriber whose
// queue is full loses that message alone, counted in [PubStats]. A Pub is
// safe for concurrent use.
type Pub struct {
	s      *socket
	subs   trie // every subscriber's prefixes
	onDrop func(peer string)
	closed atomic.Bool
	// subBytes is the cost of every subscriber's subscriptions, bounded
	// by Limits.SubscriptionBytes; queued, the bytes of every
	// subscriber's queue, bounded by Limits.SharedQueueBytes; npeers,
	// the subscribers connected, whose share of it each may always take.
	subBytes, queued, npeers atomic.Int64

	mu    sync.RWMutex
	peers map[*pubPeer]struct{}
	gone  PubStats    // totals of the peers gone
	final []PeerStats // the peers at Close

	cmu     sync.Mutex
	changed chan struct{} // closed and replaced when subscriptions change
}

// PubStats are a Pub's counts. The totals include the peers gone, so they
// never go backwards.
type PubStats struct {
	Peers        []PeerStats // the subscribers connected now; after Close, those connected at Close
	Sent         int64       // messages written, over all subscribers
	Dropped      int64       // messages not queued for a subscriber whose queue was full
	Queued       int64       // messages waiting to be written
	QueuedBytes  int64       // their bytes on the wire, each subscriber's counted apart
	Unsent       int64       // messages queued but never written: the subscriber went away or Close's flush time ran out
	Connected    int64       // subscribers that completed a handshake
	Disconnected int64       // of those, the ones gone since
	// SubscriptionBytes is the cost of the subscriptions held now, as
	// Limits.SubscriptionBytes counts it.
	SubscriptionBytes int64
	// Reached counts the subscribers, gone included, that were written at
	// least one message: a handshake alone, or subscriptions that match
	// nothing sent, reach no one. Lossy counts those of them that lost a
	// message too, Dropped or Unsent.
	Reached, Lossy int64
}

// PeerStats are one subscriber's counts; see [PubStats].
type PeerStats struct {
	Peer                                       string // remote address
	Sent, Dropped, Queued, QueuedBytes, Unsent int64
}

// pubPeer is one subscriber's connection, subscriptions and queue.
type pubPeer struct {
	c    *Conn
	wake chan struct{} // the writer has something to do
	done chan struct{} // the writer ended

	subBytes int64 // the cost of subs, by Limits.SubscriptionBytes' count; the reading goroutine's

	mu       sync.Mutex
	subs     map[string]struct{}
	q        [][][]byte
	inflight int // messages taken from q and being written
	qbytes   int // wire bytes of q and the messages in flight
	closing  bool
	sent     int64
	dropped  int64
	unsent   int64
}

func newPubPeer(c *Conn) *pubPeer {
	return &pubPeer{c: c, wake: make(chan struct{}, 1), done: make(chan struct{}), subs: make(map[string]struct{})}
}

// maxBatch bounds the messages a writer takes from its queue at once.
const maxBatch = 512

// NewPub returns a Pub with no connections; use Listen or Dial.
func NewPub(opts PubOptions) *Pub {
	return &Pub{
		s:       newSocket("PUB", opts.Limits, opts.OnViolation, opts.HandshakeTimeout, opts.Heartbeat.withDefaults(), opts.Curve),
		onDrop:  opts.OnDrop,
		peers:   make(map[*pubPeer]struct{}),
		changed: make(chan struct{}),
	}
}

// Listen accepts subscribers on endpoint, at most Limits.MaxPeers at once.
// It may be called more than once.
func (p *Pub) Listen(endpoint string) error { return p.s.listen(endpoint, p.serve) }

// Dial connects to a SUB socket listening on endpoint, in the background:
// it returns at once (with an error only for a bad endpoint), and whenever
// the connection fails or ends it connects again, with backoff, until
// Close.
func (p *Pub) Dial(endpoint string) error { return p.s.dial(endpoint, 0, p.serve) }

// DialError returns why Dial's last attempt to connect failed, or nil if
// none failed since the last connection succeeded (or Dial was not
// called).
func (p *Pub) DialError() error {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return p.s.dialErr
}

// Addr returns the address of the first endpoint the Pub listens on, or
// nil.
func (p *Pub) Addr() net.Addr { return p.s.addr() }

// Send queues a message for every subscriber with a subscription that is
// a prefix of its first frame, found in a trie: the cost does not grow
// with the subscribers that do not match. It never waits: a subscriber
// whose queue is full loses the message, counted as Dropped. Send keeps
// frames: the caller must not change them afterwards. After Close it
// returns [ErrClosed].
func (p *Pub) Send(frames [][]byte) error {
	if len(frames) == 0 {
		return errors.New("zmtp: a message of no frames")
	}
	if p.closed.Load() {
		return ErrClosed
	}
	n := wireSize(frames)
	p.subs.match(frames[0], func(pp *pubPeer) {
		if p.offer(pp, frames, n) && p.onDrop != nil {
			p.onDrop(pp.c.label)
		}
	})
	return nil
}

// offer queues m, of n bytes on the wire, for pp unless its queue is
// full, or the queues together are and pp's holds more than its share,
// and reports whether that was the peer's first drop.
func (p *Pub) offer(pp *pubPeer, m [][]byte, n int) (firstDrop bool) {
	lim := &p.s.lim
	pp.mu.Lock()
	if pp.closing {
		pp.mu.Unlock()
		return false
	}
	// A message larger than QueueBytes goes in alone.
	queued := len(pp.q) + pp.inflight
	full := queued >= lim.Queue || (queued > 0 && pp.qbytes+n > lim.QueueBytes)
	if !full && queued > 0 && p.queued.Load()+int64(n) > int64(lim.SharedQueueBytes) {
		full = int64(pp.qbytes+n) > int64(lim.SharedQueueBytes)/max(p.npeers.Load(), 1)
	}
	if full {
		pp.dropped++
		first := pp.dropped == 1
		pp.mu.Unlock()
		return first
	}
	pp.q = append(pp.q, m)
	pp.qbytes += n
	p.queued.Add(int64(n))
	pp.mu.Unlock()
	select {
	case pp.wake <- struct{}{}:
	default:
	}
	return false
}

// Subscribers returns how many connected peers have at least one
// subscription.
func (p *Pub) Subscribers() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	n := 0
	for pp := range p.peers {
		pp.mu.Lock()
		if len(pp.subs) > 0 {
			n++
		}
		pp.mu.Unlock()
	}
	return n
}

// WaitSubscribers waits until at least n connected peers have a
// subscription, ctx is done or the Pub is closed.
func (p *Pub) WaitSubscribers(ctx context.Context, n int) error {
	for {
		p.cmu.Lock()
		ch := p.changed
		p.cmu.Unlock()
		if p.Subscribers() >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-p.s.ctx.Done():
			return ErrClosed
		}
	}
}

func (p *Pub) notify() {
	p.cmu.Lock()
	close(p.changed)
	p.changed = make(chan struct{})
	p.cmu.Unlock()
}

// Stats returns the counts so far; after Close, the final ones.
func (p *Pub) Stats() PubStats {
	p.mu.RLock()
	defer p.mu.RUnlock()
	st := p.gone
	st.Peers = nil
	st.SubscriptionBytes = p.subBytes.Load()
	for pp := range p.peers {
		ps := pp.stats()
		st.Sent += ps.Sent
		st.Dropped += ps.Dropped
		st.Queued += ps.Queued
		st.QueuedBytes += ps.QueuedBytes
		st.Unsent += ps.Unsent
		st.count(ps)
		st.Peers = append(st.Peers, ps)
	}
	if p.final != nil {
		st.Peers = slices.Clone(p.final)
	}
	slices.SortFunc(st.Peers, func(a, b PeerStats) int { return strings.Compare(a.Peer, b.Peer) })
	return st
}

// count adds one subscriber's PeerStats to Reached and Lossy.
func (st *PubStats) count(ps PeerStats) {
	if ps.Sent > 0 {
		st.Reached++
		if ps.Dropped+ps.Unsent > 0 {
			st.Lossy++
		}
	}
}

func (pp *pubPeer) stats() PeerStats {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return PeerStats{Peer: pp.c.label, Sent: pp.sent, Dropped: pp.dropped,
		Queued: int64(len(pp.q) + pp.inflight), QueuedBytes: int64(pp.qbytes), Unsent: pp.unsent}
}

// Refusals returns what the limits on subscribers' connections refused.
func (p *Pub) Refusals() Refusals { return p.s.refusals() }

// ReadBytes returns the bytes of messages being read now from the
// subscribers, bounded by Limits.ReadBytes.
func (p *Pub) ReadBytes() int64 { return p.s.readBytes() }

// Close stops Send and the listeners and dialers, lets each subscriber's
// writer write its queue for up to flush, then closes every connection.
// What was not written by then is counted as Unsent in [Pub.Stats].
// Closing again does nothing.
func (p *Pub) Close(flush time.Duration) error {
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return nil
	}
	p.closed.Store(true)
	var peers []*pubPeer
	for pp := range p.peers {
		peers = append(peers, pp)
	}
	p.mu.Unlock()
	p.s.stop()
	deadline := time.Now().Add(flush)
	for _, pp := range peers {
		pp.c.setWriteDeadline(deadline) // a writer blocked on a peer that does not read gives up then
		pp.shut()
	}
	final := []PeerStats{}
	for _, pp := range peers {
		<-pp.done
		final = append(final, pp.stats())
	}
	p.mu.Lock()
	p.final = final
	p.mu.Unlock()
	p.s.closeConns()
	p.notify()
	return nil
}

// shut tells the writer to end once its queue is empty.
func (pp *pubPeer) shut() {
	pp.mu.Lock()
	pp.closing = true
	pp.mu.Unlock()
	select {
	case pp.wake <- struct{}{}:
	default:
	}
}

// serve runs one subscriber's connection: a writer goroutine for its
// queue, and its subscriptions read here until the connection ends.
func (p *Pub) serve(c *Conn) {
	pp := newPubPeer(c)
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return
	}
	p.peers[pp] = struct{}{}
	p.gone.Connected++
	p.npeers.Add(1)
	p.mu.Unlock()
	go p.write(pp)
	p.read(pp)
	for prefix := range pp.subs { // read is over: no one else changes subs
		p.subs.remove(prefix, pp)
	}
	p.subBytes.Add(-pp.subBytes)
	c.Close()
	pp.shut()
	<-pp.done
	ps := pp.stats()
	p.mu.Lock()
	delete(p.peers, pp)
	p.npeers.Add(-1)
	p.gone.Disconnected++
	p.gone.Sent += ps.Sent
	p.gone.Dropped += ps.Dropped
	p.gone.Unsent += ps.Unsent
	p.gone.count(ps)
	p.mu.Unlock()
	p.notify()
}

// read takes a subscriber's subscriptions, in either form: a message
// whose first byte is 1 (subscribe) or 0 (cancel) then the prefix (ZMTP
// 3.0), or a SUBSCRIBE or CANCEL command (ZMTP 3.1).
func (p *Pub) read(pp *pubPeer) {
	for {
		msg, cmd, data, err := pp.c.recv()
		if err != nil {
			return
		}
		switch {
		case cmd == "SUBSCRIBE" || cmd == "CANCEL":
			err = p.subscribe(pp, data, cmd == "SUBSCRIBE")
		case cmd != "":
			err = pp.c.command(cmd, data)
		case len(msg) == 1 && len(msg[0]) > 0 && msg[0][0] <= 1:
			err = p.subscribe(pp, msg[0][1:], msg[0][0] == 1)
		}
		// Other messages mean nothing to a PUB; libzmq drops them too.
		if err != nil {
			pp.c.fail(err)
			return
		}
	}
}

// subscribe adds or cancels a subscription of pp, from its reading
// goroutine alone, so that pp.subs cannot change between its check and
// its change. The trie is changed outside pp.mu, which Send takes inside
// the trie's lock; a new prefix is in the trie before pp.subs counts it,
// so that a Send after WaitSubscribers reaches it.
func (p *Pub) subscribe(pp *pubPeer, prefix []byte, on bool) error {
	k := string(prefix)
	pp.mu.Lock()
	_, had := pp.subs[k]
	n := len(pp.subs)
	pp.mu.Unlock()
	switch {
	case on == had:
		return nil
	case on && n >= maxSubscriptions:
		return fmt.Errorf("zmtp: %s: more than %d subscriptions: %w", pp.c.label, maxSubscriptions, ErrProtocol)
	case on:
		cost := int64(len(k) + SubscriptionOverhead)
		if total := p.subBytes.Add(cost); total > int64(p.s.lim.SubscriptionBytes) && pp.subBytes >= subscriptionFloor {
			p.subBytes.Add(-cost)
			p.s.refused.subscriptions.Add(1)
			return fmt.Errorf("zmtp: %s: a subscription past the %d bytes the subscribers' subscriptions may take: %w", pp.c.label, p.s.lim.SubscriptionBytes, ErrProtocol)
		}
		pp.subBytes += cost
		p.subs.add(k, pp)
		pp.mu.Lock()
		pp.subs[k] = struct{}{}
		pp.mu.Unlock()
	default:
		cost := int64(len(k) + SubscriptionOverhead)
		pp.subBytes -= cost
		p.subBytes.Add(-cost)
		pp.mu.Lock()
		delete(pp.subs, k)
		pp.mu.Unlock()
		p.subs.remove(k, pp)
	}
	// A subscriber with a subscription is of use silent: a peer of ZMTP
	// 3.0 sends nothing more.
	pp.c.keep.Store(on || n > 1)
	p.notify()
	return nil
}

// write writes the peer's queue, a batch per flush, until the peer is
// shut and its queue empty, or a write fails.
func (p *Pub) write(pp *pubPeer) {
	defer close(pp.done)
	var batch [][][]byte
	for {
		pp.mu.Lock()
		for len(pp.q) == 0 {
			if pp.closing {
				pp.mu.Unlock()
				return
			}
			pp.mu.Unlock()
			<-pp.wake
			pp.mu.Lock()
		}
		n := min(len(pp.q), maxBatch)
		batch = append(batch[:0], pp.q[:n]...)
		clear(pp.q[:n]) // the queue's array must not keep written messages alive
		pp.q = pp.q[n:]
		if len(pp.q) == 0 {
			pp.q = nil
		}
		pp.inflight = n
		pp.mu.Unlock()
		whole, err := pp.c.writeBatch(batch)
		written := 0
		for _, m := range batch {
			written += wireSize(m)
		}
		clear(batch)
		pp.mu.Lock()
		pp.inflight = 0
		pp.qbytes -= written
		p.queued.Add(-int64(written))
		pp.sent += int64(whole)
		if err != nil {
			pp.unsent += int64(n - whole + len(pp.q))
			p.queued.Add(-int64(pp.qbytes))
			pp.q, pp.qbytes = nil, 0
			pp.closing = true
			pp.mu.Unlock()
			pp.c.Close()
			return
		}
		pp.mu.Unlock()
	}
}
