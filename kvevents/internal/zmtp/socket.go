package zmtp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Reconnection backoff of a socket that dials.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// socket is what Pub, Sub and Server share: listeners, reconnecting
// dialers, and every open connection, so that Close can end them all.
type socket struct {
	typ       string
	lim       Limits
	report    func(error)
	handshake time.Duration
	hb        Heartbeat // Interval 0: none (a Server's)
	budget    *budget   // of the messages being read, over the connections
	refused   refusals
	curve     *curveConfig // nil for the NULL mechanism

	ctx    context.Context // done on close
	cancel context.CancelFunc
	wg     sync.WaitGroup // accept loops, dialers, connections

	mu        sync.Mutex
	stopped   bool
	listeners []net.Listener
	conns     map[net.Conn]struct{}
	peers     int                   // connections from listeners past their handshake, bounded by lim.MaxPeers
	peersBy   map[string]int        // of those, by source address, each bounded by lim.MaxPeersPerSource
	pending   map[string][]*pending // accepted connections in their handshake, by source address, oldest first
	npending  int                   // bounded by lim.MaxHandshakes
	probation []*pending            // accepted connections whose greeting has not started yet, bounded by maxProbation times lim.MaxHandshakes
	dialErr   error                 // why the dialer's last attempt failed; nil after a success
}

// pending is an accepted connection on probation or in its handshake.
type pending struct {
	nc       net.Conn
	src      string
	start    time.Time
	progress atomic.Int64 // bytes of the handshake read so far
	claimed  bool         // holds a handshake's slot, past its probation
	done     bool         // no longer counted: past its handshake, failed, or closed to make room
}

// behind reports whether p's handshake is further behind q's: fewer of
// its bytes read, or as many since longer. Every ZeroMQ socket sends the
// start of its greeting at once and the rest as soon as it has ours, so a
// peer that trickles its greeting, however long ago it came, stays behind
// one that just did.
func (p *pending) behind(q *pending) bool {
	pp, qp := p.progress.Load(), q.progress.Load()
	return pp < qp || pp == qp && p.start.Before(q.start)
}

func newSocket(typ string, lim Limits, onViolation func(error), handshake time.Duration, hb Heartbeat, curve *Curve) *socket {
	if handshake <= 0 {
		handshake = DefaultHandshakeTimeout
	}
	report := onViolation
	if report == nil {
		report = func(error) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	lim = lim.withDefaults()
	return &socket{typ: typ, lim: lim, report: report, handshake: handshake, hb: hb, curve: curve.prepare(),
		budget: newBudget(lim.ReadBytes), ctx: ctx, cancel: cancel,
		conns: make(map[net.Conn]struct{}), peersBy: make(map[string]int), pending: make(map[string][]*pending)}
}

// Refusals returns what the socket's limits refused so far.
func (s *socket) refusals() Refusals { return s.refused.load() }

// readBytes returns the bytes of messages being read now, over the
// socket's connections.
func (s *socket) readBytes() int64 { return s.budget.inUse() }

// newConn returns a Conn of the socket on nc, accepted or dialed.
func (s *socket) newConn(nc net.Conn, ep endpoint, accepted bool) *Conn {
	c := newConn(nc, s.lim, s.report, label(nc, ep))
	c.budget, c.counts = s.budget, &s.refused
	c.curve, c.asServer = s.curve, accepted
	return c
}

// addr returns the address of the first listener, or nil.
func (s *socket) addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.listeners) == 0 {
		return nil
	}
	return s.listeners[0].Addr()
}

// track adds nc to the open connections, unless the socket is closed.
func (s *socket) track(nc net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.conns[nc] = struct{}{}
	return true
}

// untrack forgets nc; a listened connection frees its slot, among the
// peers or the handshakes, before the peer can see the close.
func (s *socket) untrack(nc net.Conn, p *pending, peer bool) {
	s.mu.Lock()
	delete(s.conns, nc)
	if peer {
		s.peers--
		if s.peersBy[p.src]--; s.peersBy[p.src] == 0 {
			delete(s.peersBy, p.src)
		}
	}
	if p != nil {
		s.settle(p)
	}
	s.mu.Unlock()
	nc.Close()
}

// settle stops counting p among the handshakes. s.mu is held.
func (s *socket) settle(p *pending) {
	if p.done {
		return
	}
	p.done = true
	if !p.claimed {
		s.probation = slices.DeleteFunc(s.probation, func(q *pending) bool { return q == p })
		return
	}
	q := slices.DeleteFunc(s.pending[p.src], func(q *pending) bool { return q == p })
	if len(q) == 0 {
		delete(s.pending, p.src)
	} else {
		s.pending[p.src] = q
	}
	s.npending--
}

// maxProbation is how many connections, per handshake slot, may wait on
// probation: one costs a goroutine and the start of a greeting, far less
// than a connection's buffers, so that an attacker needs that many
// connections at once before a newcomer can lose its place there.
const maxProbation = 16

// admit takes nc, from src, on probation: until the start of its greeting
// has come (probe), it holds no handshake's slot and no buffers. At most
// maxProbation times MaxHandshakes connections are on probation: past
// that, the one furthest behind (the fewest bytes read, the oldest of
// those) yields its place, and admit returns that to report too. It
// returns the error to report if the peers are at their limit. s.mu is
// held.
func (s *socket) admit(nc net.Conn, src string, ep endpoint) (p *pending, evicted, err error) {
	from := label(nc, ep)
	if s.peers >= s.lim.MaxPeers {
		s.refused.peers.Add(1)
		return nil, nil, fmt.Errorf("zmtp: %s: closed a connection from %s: %d peers already: %w", ep, from, s.lim.MaxPeers, ErrTooManyPeers)
	}
	if len(s.probation) >= maxProbation*s.lim.MaxHandshakes {
		s.refused.handshakes.Add(1)
		evicted = s.yield(s.probation, from, ep)
	}
	p = &pending{nc: nc, src: src, start: time.Now()}
	s.probation = append(s.probation, p)
	return p, evicted, nil
}

// claim gives p, on probation, a handshake's slot, now that the start of
// its greeting has come, which every ZeroMQ socket sends at once. A
// newcomer that got so far is never refused a slot: when its source holds
// MaxHandshakesPerSource of them, or all MaxHandshakes are taken, the
// handshake furthest behind of that source, or of the sources that hold
// most, yields its slot. So handshakes that trickle their greeting, from
// one address or from many, never hold a slot, and cannot keep out a peer
// that sends its greeting promptly. It returns the eviction to report,
// and ErrClosed if p was closed meanwhile.
func (s *socket) claim(p *pending, ep endpoint) (evicted, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.done {
		return nil, ErrClosed
	}
	s.settle(p)
	var yielding []*pending
	switch {
	case p.src != "" && len(s.pending[p.src]) >= s.lim.MaxHandshakesPerSource:
		s.refused.perSource.Add(1)
		yielding = s.pending[p.src]
	case s.npending >= s.lim.MaxHandshakes:
		s.refused.handshakes.Add(1)
		most := 0
		for _, q := range s.pending {
			most = max(most, len(q))
		}
		for _, q := range s.pending {
			if len(q) == most {
				yielding = append(yielding, q...)
			}
		}
	}
	if len(yielding) > 0 {
		evicted = s.yield(yielding, label(p.nc, ep), ep)
	}
	p.done, p.claimed = false, true
	s.pending[p.src] = append(s.pending[p.src], p)
	s.npending++
	return evicted, nil
}

// probe sends the start of our greeting on nc, accepted and on
// probation, and reads the start of the peer's, counting its bytes as
// they come, by deadline; then it claims a handshake's slot for it. It
// returns the start of the peer's greeting, for the handshake to go on
// from.
func (s *socket) probe(nc net.Conn, ep endpoint, p *pending, deadline time.Time) ([]byte, error) {
	nc.SetDeadline(deadline)
	start := make([]byte, greetingStart)
	err := exchange(nc, greeting(1, "")[:greetingStart], func() error {
		for n := 0; n < len(start); {
			k, err := nc.Read(start[n:])
			n += k
			p.progress.Add(int64(k))
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			s.refused.timeouts.Add(1)
			err = fmt.Errorf("zmtp: %s: no greeting by the deadline: %w", label(nc, ep), ErrProtocol)
			s.report(err)
		}
		return nil, err
	}
	evicted, err := s.claim(p, ep)
	if evicted != nil {
		s.report(evicted)
	}
	return start, err
}

// yield closes the handshake of among that is furthest behind, to make
// room for one from newcomer, and returns what to report. s.mu is held.
func (s *socket) yield(among []*pending, newcomer string, ep endpoint) error {
	slowest := among[0]
	for _, q := range among[1:] {
		if q.behind(slowest) {
			slowest = q
		}
	}
	s.settle(slowest)
	slowest.nc.Close()
	return fmt.Errorf("zmtp: %s: closed the handshake furthest behind, from %s (%d bytes in %v), to make room for %s: %w",
		ep, slowest.src, slowest.progress.Load(), time.Since(slowest.start).Round(time.Millisecond), newcomer, ErrTooManyPeers)
}

// source returns the IP address a connection comes from, or "" for a
// local transport.
func source(nc net.Conn) string {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return ""
}

// listen accepts connections on endpoint and runs serve on each after its
// handshake, in a goroutine of its own.
func (s *socket) listen(endpoint string, serve func(*Conn)) error {
	ep, err := parseEndpoint(endpoint)
	if err == nil {
		err = s.curve.check(true)
	}
	if err != nil {
		return err
	}
	l, err := ep.listen()
	if err != nil {
		return fmt.Errorf("zmtp: listen on %s: %w", endpoint, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		l.Close()
		return ErrClosed
	}
	s.listeners = append(s.listeners, l)
	s.wg.Add(1)
	go s.accept(l, ep, serve)
	return nil
}

func (s *socket) accept(l net.Listener, ep endpoint, serve func(*Conn)) {
	defer s.wg.Done()
	for {
		nc, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.ctx.Err() != nil {
				return
			}
			// Out of file descriptors, say: wait rather than spin.
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if !s.lim.allowed(nc) {
			s.refused.disallowed.Add(1)
			nc.Close()
			s.report(fmt.Errorf("zmtp: %s: closed a connection from %s, outside the allowed addresses: %w", ep, label(nc, ep), ErrNotAllowed))
			continue
		}
		s.mu.Lock()
		var p *pending
		var evicted error
		err = ErrClosed
		if !s.stopped {
			p, evicted, err = s.admit(nc, source(nc), ep)
		}
		if err == nil {
			s.conns[nc] = struct{}{}
			s.wg.Add(1)
		}
		s.mu.Unlock()
		if evicted != nil {
			s.report(evicted)
		}
		if err != nil {
			nc.Close()
			if err != ErrClosed {
				s.report(err)
			}
			continue
		}
		go func() {
			defer s.wg.Done()
			s.run(nc, ep, p, time.Now().Add(s.handshake), serve)
		}()
	}
}

// run does the handshake on a tracked connection and serves it, and
// returns the handshake's error. p is the entry of an accepted
// connection among the handshakes, nil for one dialed.
func (s *socket) run(nc net.Conn, ep endpoint, p *pending, deadline time.Time, serve func(*Conn)) error {
	peer := false
	var c *Conn
	defer func() {
		if c != nil {
			c.Close()
		}
		s.untrack(nc, p, peer)
	}()
	var start []byte
	if p != nil {
		var err error
		if start, err = s.probe(nc, ep, p, deadline); err != nil {
			return err
		}
	}
	c = s.newConn(nc, ep, p != nil)
	if p != nil {
		c.progress = &p.progress
	}
	err := c.handshake(s.typ, nil, deadline, start)
	c.progress = nil
	if err != nil {
		return err
	}
	if p != nil {
		s.mu.Lock()
		s.settle(p)
		all, fromSource := s.peers < s.lim.MaxPeers, p.src == "" || s.peersBy[p.src] < s.lim.MaxPeersPerSource
		if peer = all && fromSource; peer {
			s.peers++
			s.peersBy[p.src]++
		}
		s.mu.Unlock()
		if !peer {
			err := fmt.Errorf("zmtp: %s: closed a connection from %s: %d peers already: %w", ep, c.label, s.lim.MaxPeers, ErrTooManyPeers)
			if s.refused.peers.Add(1); all {
				s.refused.peersPerSource.Add(1)
				err = fmt.Errorf("zmtp: %s: closed a connection from %s: %d peers from %s already: %w", ep, c.label, s.lim.MaxPeersPerSource, p.src, ErrTooManyPeers)
			}
			s.report(err)
			return err
		}
	}
	// A ZMTP 3.0 peer may not know PING: go-zeromq/zmq4 hands it to its
	// reader as a message. It is held to the quiet time instead.
	if s.hb.Interval > 0 && c.minor >= 1 {
		c.hbTimeout = s.hb.Timeout
		go c.heartbeat(s.hb)
	}
	serve(c)
	return nil
}

// dial connects to endpoint in the background and serves each connection,
// reconnecting with backoff whenever one ends, until the socket closes.
// With wait > 0 it returns once the first handshake is done, or an error
// (and gives up) if none is within wait; otherwise it returns at once.
func (s *socket) dial(endpoint string, wait time.Duration, serve func(*Conn)) error {
	ep, err := parseEndpoint(endpoint)
	if err == nil {
		err = ep.dialable()
	}
	if err == nil {
		err = s.curve.check(false)
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return ErrClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()
	first := make(chan error, 1)
	go s.redial(ep, wait, first, serve)
	return <-first
}

func (s *socket) redial(ep endpoint, wait time.Duration, first chan<- error, serve func(*Conn)) {
	defer s.wg.Done()
	var giveUp time.Time
	if wait > 0 {
		giveUp = time.Now().Add(wait)
	} else {
		first <- nil
		first = nil
	}
	pause := minBackoff
	var telling error // the last failure that says more than a timeout
	for {
		deadline := time.Now().Add(s.handshake)
		if first != nil && giveUp.Before(deadline) {
			deadline = giveUp
		}
		ctx, cancel := context.WithDeadline(s.ctx, deadline)
		nc, err := ep.dial(ctx)
		cancel()
		if err == nil {
			if !s.track(nc) {
				nc.Close()
				err = ErrClosed
			} else {
				err = s.run(nc, ep, nil, deadline, func(c *Conn) {
					s.setDialErr(nil)
					if first != nil {
						first <- nil
						first = nil
					}
					serve(c)
				})
				if err == nil {
					pause = minBackoff
				}
			}
		}
		if s.ctx.Err() != nil {
			if first != nil {
				first <- ErrClosed
			}
			return
		}
		if err != nil {
			if telling == nil || !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, context.DeadlineExceeded) {
				telling = err
			}
			s.setDialErr(telling)
		}
		if first != nil && !time.Now().Before(giveUp) {
			first <- fmt.Errorf("zmtp: no answer from %s within %v: %w", ep, wait, telling)
			return
		}
		sleep := pause
		if first != nil {
			sleep = min(sleep, time.Until(giveUp))
		}
		select {
		case <-s.ctx.Done():
		case <-time.After(sleep):
		}
		pause = min(2*pause, maxBackoff)
	}
}

func (s *socket) setDialErr(err error) {
	s.mu.Lock()
	s.dialErr = err
	s.mu.Unlock()
}

// stop closes the listeners and ends the dialers; the connections stay
// open until closeConns.
func (s *socket) stop() {
	s.mu.Lock()
	s.stopped = true
	ls := s.listeners
	s.mu.Unlock()
	s.cancel()
	for _, l := range ls {
		l.Close()
	}
}

// closeConns closes every open connection and waits for every goroutine
// of the socket to end.
func (s *socket) closeConns() {
	s.mu.Lock()
	for nc := range s.conns {
		nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
