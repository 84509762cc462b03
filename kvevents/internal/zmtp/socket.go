package zmtp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
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

	ctx    context.Context // done on close
	cancel context.CancelFunc
	wg     sync.WaitGroup // accept loops, dialers, connections

	mu        sync.Mutex
	stopped   bool
	listeners []net.Listener
	conns     map[net.Conn]struct{}
	peers     int                   // connections from listeners past their handshake, bounded by lim.MaxPeers
	pending   map[string][]*pending // accepted connections in their handshake, by source address, oldest first
	npending  int                   // bounded by lim.MaxHandshakes
	dialErr   error                 // why the dialer's last attempt failed; nil after a success
}

// pending is an accepted connection in its handshake.
type pending struct {
	nc   net.Conn
	src  string
	done bool // no longer counted: past its handshake, failed, or closed to make room
}

func newSocket(typ string, lim Limits, onViolation func(error), handshake time.Duration, hb Heartbeat) *socket {
	if handshake <= 0 {
		handshake = DefaultHandshakeTimeout
	}
	report := onViolation
	if report == nil {
		report = func(error) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	lim = lim.withDefaults()
	return &socket{typ: typ, lim: lim, report: report, handshake: handshake, hb: hb,
		budget: newBudget(lim.ReadBytes), ctx: ctx, cancel: cancel,
		conns: make(map[net.Conn]struct{}), pending: make(map[string][]*pending)}
}

// Refusals returns what the socket's limits refused so far.
func (s *socket) refusals() Refusals { return s.refused.load() }

// readBytes returns the bytes of messages being read now, over the
// socket's connections.
func (s *socket) readBytes() int64 { return s.budget.inUse() }

// newConn returns a Conn of the socket on nc.
func (s *socket) newConn(nc net.Conn, ep endpoint) *Conn {
	c := newConn(nc, s.lim, s.report, label(nc, ep))
	c.budget, c.counts = s.budget, &s.refused
	if s.hb.Interval > 0 {
		c.hbTimeout = s.hb.Timeout
	}
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
	q := s.pending[p.src]
	if i := slices.Index(q, p); i >= 0 {
		q = slices.Delete(q, i, i+1)
	}
	if len(q) == 0 {
		delete(s.pending, p.src)
	} else {
		s.pending[p.src] = q
	}
	s.npending--
}

// admit counts nc, from src, among the handshakes if the limits let it
// in, and returns its entry, or the error to report. It may close the
// oldest handshake of the source that holds most, to make room for one
// from a source that holds at least two fewer (an attacker needs as many
// addresses as MaxHandshakes to keep a new one out), and then returns
// that to report too. s.mu is held.
func (s *socket) admit(nc net.Conn, src string, ep endpoint) (p *pending, evicted, err error) {
	from := label(nc, ep)
	switch {
	case s.peers >= s.lim.MaxPeers:
		s.refused.peers.Add(1)
		return nil, nil, fmt.Errorf("zmtp: %s: closed a connection from %s: %d peers already: %w", ep, from, s.lim.MaxPeers, ErrTooManyPeers)
	case src != "" && len(s.pending[src]) >= s.lim.MaxHandshakesPerSource:
		s.refused.perSource.Add(1)
		return nil, nil, fmt.Errorf("zmtp: %s: closed a connection from %s: %d handshakes from %s already: %w", ep, from, s.lim.MaxHandshakesPerSource, src, ErrTooManyPeers)
	case s.npending >= s.lim.MaxHandshakes:
		var busiest []*pending
		for _, q := range s.pending {
			if len(q) > len(busiest) {
				busiest = q
			}
		}
		s.refused.handshakes.Add(1)
		if len(busiest) < len(s.pending[src])+2 {
			return nil, nil, fmt.Errorf("zmtp: %s: closed a connection from %s: %d handshakes under way: %w", ep, from, s.lim.MaxHandshakes, ErrTooManyPeers)
		}
		old := busiest[0]
		s.settle(old)
		old.nc.Close()
		evicted = fmt.Errorf("zmtp: %s: closed a handshake from %s to make room for %s: %d under way: %w", ep, old.src, from, s.lim.MaxHandshakes, ErrTooManyPeers)
	}
	p = &pending{nc: nc, src: src}
	s.pending[src] = append(s.pending[src], p)
	s.npending++
	return p, evicted, nil
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
	c := s.newConn(nc, ep)
	peer := false
	defer func() {
		c.Close()
		s.untrack(nc, p, peer)
	}()
	if err := c.handshake(s.typ, nil, deadline); err != nil {
		return err
	}
	if p != nil {
		s.mu.Lock()
		s.settle(p)
		if peer = s.peers < s.lim.MaxPeers; peer {
			s.peers++
		}
		s.mu.Unlock()
		if !peer {
			s.refused.peers.Add(1)
			err := fmt.Errorf("zmtp: %s: closed a connection from %s: %d peers already: %w", ep, c.label, s.lim.MaxPeers, ErrTooManyPeers)
			s.report(err)
			return err
		}
	}
	// A ZMTP 3.0 peer may not know PING: go-zeromq/zmq4 hands it to its
	// reader as a message.
	if s.hb.Interval > 0 && c.minor >= 1 {
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
