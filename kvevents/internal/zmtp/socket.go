package zmtp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
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

	ctx    context.Context // done on close
	cancel context.CancelFunc
	wg     sync.WaitGroup // accept loops, dialers, connections

	mu        sync.Mutex
	stopped   bool
	listeners []net.Listener
	conns     map[net.Conn]struct{}
	accepted  int   // open connections from listeners, bounded by lim.MaxPeers
	dialErr   error // why the dialer's last attempt failed; nil after a success
}

func newSocket(typ string, lim Limits, onViolation func(error), handshake time.Duration) *socket {
	if handshake <= 0 {
		handshake = DefaultHandshakeTimeout
	}
	report := onViolation
	if report == nil {
		report = func(error) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &socket{typ: typ, lim: lim.withDefaults(), report: report, handshake: handshake,
		ctx: ctx, cancel: cancel, conns: make(map[net.Conn]struct{})}
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

// untrack closes nc and forgets it; listened says whether it holds one of
// the MaxPeers slots, freed before the peer can see the close.
func (s *socket) untrack(nc net.Conn, listened bool) {
	s.mu.Lock()
	delete(s.conns, nc)
	if listened {
		s.accepted--
	}
	s.mu.Unlock()
	nc.Close()
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
		full := s.accepted >= s.lim.MaxPeers
		ok := !s.stopped && !full
		if ok {
			s.accepted++
			s.conns[nc] = struct{}{}
			s.wg.Add(1)
		}
		s.mu.Unlock()
		if !ok {
			from := label(nc, ep)
			nc.Close()
			if full {
				s.report(fmt.Errorf("zmtp: %s: closed a connection from %s: %d peers already: %w",
					ep, from, s.lim.MaxPeers, ErrTooManyPeers))
			}
			continue
		}
		go func() {
			defer s.wg.Done()
			s.run(nc, ep, true, time.Now().Add(s.handshake), serve)
		}()
	}
}

// run does the handshake on a tracked connection and serves it, and
// returns the handshake's error.
func (s *socket) run(nc net.Conn, ep endpoint, listened bool, deadline time.Time, serve func(*Conn)) error {
	defer s.untrack(nc, listened)
	c := newConn(nc, s.lim, s.report, label(nc, ep))
	if err := c.handshake(s.typ, nil, deadline); err != nil {
		return err
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
				err = s.run(nc, ep, false, deadline, func(c *Conn) {
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
