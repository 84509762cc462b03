package zmtp

import (
	"net"
	"time"
)

// ServerOptions configure a [Server].
type ServerOptions struct {
	// Limits bound the messages read from clients (by each Conn's
	// ReadMsg) and MaxPeers the clients connected at once.
	Limits Limits
	// OnViolation, if not nil, hears of every connection closed for
	// breaking the protocol or a limit. It may be called from several
	// goroutines at once.
	OnViolation func(error)
	// HandshakeTimeout bounds each connection's handshake; zero means
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// Curve, if not nil, speaks CURVE, as the server, on every
	// connection.
	Curve *Curve
}

// Server is the server side of a request-reply socket: it speaks as a
// ROUTER to DEALER, REQ and ROUTER peers, but serves each connection on
// its own goroutine instead of routing by identity, so a client that asks
// and never reads blocks only its own goroutine. Frames go on the wire as
// given: a reply to a DEALER starts with the empty delimiter frame.
type Server struct {
	s       *socket
	handler func(*Conn)
}

// NewServer returns a Server that runs handler on each connection after
// its handshake; the connection is closed when handler returns. handler
// must return once its Conn is closed (a read or write then fails).
func NewServer(opts ServerOptions, handler func(c *Conn)) *Server {
	return &Server{s: newSocket(Router, opts.Limits, opts.OnViolation, opts.HandshakeTimeout, Heartbeat{}, opts.Curve), handler: handler}
}

// Listen accepts clients on endpoint, at most Limits.MaxPeers at once. It
// may be called more than once.
func (s *Server) Listen(endpoint string) error { return s.s.listen(endpoint, s.handler) }

// Addr returns the address of the first endpoint the Server listens on, or
// nil.
func (s *Server) Addr() net.Addr { return s.s.addr() }

// Refusals returns what the limits on clients' connections refused.
func (s *Server) Refusals() Refusals { return s.s.refusals() }

// Close closes the listeners and every connection, and waits for the
// handlers to return.
func (s *Server) Close() error {
	s.s.stop()
	s.s.closeConns()
	return nil
}
