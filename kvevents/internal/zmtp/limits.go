package zmtp

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Errors that a violation reported to OnViolation wraps, so a caller can
// count them by kind with errors.Is.
var (
	// ErrFrameTooLong: a frame announced a body longer than its limit
	// (Limits.Frames, or the fixed limit of a command).
	ErrFrameTooLong = errors.New("zmtp: frame too long")
	// ErrTooManyFrames: a message had more than Limits.MaxFrames frames.
	ErrTooManyFrames = errors.New("zmtp: too many frames")
	// ErrProtocol: a bad greeting, bad flags, an incompatible socket type,
	// a malformed command, too many subscriptions, or a handshake that did
	// not finish in time.
	ErrProtocol = errors.New("zmtp: protocol violation")
	// ErrTooManyPeers: a listening socket closed a connection for one of
	// its connection limits: Limits.MaxPeers, Limits.MaxPeersPerSource,
	// Limits.MaxHandshakes or Limits.MaxHandshakesPerSource.
	ErrTooManyPeers = errors.New("zmtp: too many peers")
	// ErrTimeout: a peer stopped in the middle of a message for
	// Limits.FrameTimeout, or went silent past its heartbeat timeout.
	ErrTimeout = errors.New("zmtp: peer timed out")
	// ErrNotAllowed: a listening socket closed a connection from a source
	// address outside Limits.Allow, or refused a CURVE client whose public
	// key is not among Curve.Clients.
	ErrNotAllowed = errors.New("zmtp: peer not allowed")
	// ErrClosed is returned by a socket's methods after Close.
	ErrClosed = errors.New("zmtp: socket closed")
)

// Defaults of the zero fields of Limits and of the options.
const (
	DefaultMaxFrame  = 1 << 20 // bytes of any frame when Limits.Frames is empty
	DefaultMaxFrames = 16
	DefaultQueue     = 10000 // ten times libzmq's default high-water mark: an engine's events come in bursts
	// DefaultQueueBytes bounds a Sub's receive queue, and each subscriber's
	// queue of a Pub.
	DefaultQueueBytes = 64 << 20
	// DefaultMaxPeers leaves room for a router that mirrors a thousand
	// engines, each with a replay client beside its subscriber, with room
	// to spare for restarts.
	DefaultMaxPeers = 4096
	// DefaultMaxPeersPerSource keeps one address from taking every peer's
	// room: a host runs a few engines, not hundreds.
	DefaultMaxPeersPerSource = 256
	// DefaultIdleTimeout is how long a peer held to no heartbeat may send
	// nothing: twice the heartbeat timeout.
	DefaultIdleTimeout = 2 * DefaultHeartbeatTimeout
	// DefaultMaxHandshakes is small: a handshake takes a round trip or two,
	// so legitimate peers seldom hold a slot for long, and a peer that
	// holds one without finishing is what an attacker does.
	DefaultMaxHandshakes          = 64
	DefaultMaxHandshakesPerSource = 8
	// DefaultReadBytes bounds the bytes of messages being read, over all
	// connections of a socket: one hostile peer per frame limit's worth
	// cannot add up past it.
	DefaultReadBytes    = 64 << 20
	DefaultFrameTimeout = 10 * time.Second
	// DefaultSubscriptionBytes bounds a Pub's subscriptions over all its
	// subscribers: room for thousands of topic prefixes.
	DefaultSubscriptionBytes = 16 << 20
	// DefaultSharedQueueBytes bounds a Pub's queues over all its
	// subscribers: four subscribers' worth of DefaultQueueBytes.
	DefaultSharedQueueBytes = 4 * DefaultQueueBytes
	// DefaultHandshakeTimeout bounds a handshake; DefaultDialWait is how
	// long a Sub's Dial waits for its first connection.
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultDialWait         = 2500 * time.Millisecond
)

// maxCommand bounds a command frame's body (READY, PING, SUBSCRIBE...):
// none that this package reads needs more.
const maxCommand = 4096

// maxSubscriptions bounds the distinct subscriptions one peer of a Pub may
// hold, as each costs memory (and a trie node) while it lasts.
const maxSubscriptions = 1024

// SubscriptionOverhead is what a subscription costs beside its prefix's
// bytes, counted against Limits.SubscriptionBytes: its entry in the
// peer's set and its node in the trie.
const SubscriptionOverhead = 192

// subscriptionFloor is what one subscriber may always hold in
// subscriptions, whatever the others hold: room for a few topic prefixes
// of the longest kind, so that peers that fill Limits.SubscriptionBytes
// cannot keep another from subscribing.
const subscriptionFloor = 4 << 10

// Limits bound what peers can make a socket allocate or hold; zero fields
// take the defaults. An entry of 0 in Frames accepts empty frames only.
type Limits struct {
	Frames    []int // Frames[i] is the longest body accepted for frame i of a message; the last entry applies to every later frame
	MaxFrames int   // most frames in one message
	// Queue is the messages queued per peer (a Pub's high-water mark per
	// subscriber) or in total (a Sub's receive queue).
	Queue int
	// QueueBytes bounds, in bytes, the same queues as Queue: a message
	// that would take a Pub's subscriber past it is dropped, and a Sub's
	// readers wait while its receive queue is full.
	QueueBytes int
	// MaxPeers is the connections a listening socket keeps at once past
	// their handshake; a peer that finishes its handshake with MaxPeers
	// already there is closed.
	MaxPeers int
	// MaxPeersPerSource is the connections past their handshake that a
	// listening socket keeps at once from one IP address; a further one
	// is closed when its handshake is done.
	MaxPeersPerSource int
	// MaxHandshakes is the accepted connections in their handshake at
	// once, apart from MaxPeers. When they are all taken, a new one takes
	// the place of the handshake furthest behind (the fewest bytes read,
	// the oldest of those) of the addresses that hold most.
	MaxHandshakes int
	// MaxHandshakesPerSource is the accepted connections in their
	// handshake at once from one IP address. Past it, a new one from that
	// address takes the place of its handshake furthest behind.
	MaxHandshakesPerSource int
	// IdleTimeout is how long a peer held to no heartbeat timeout (a peer
	// of ZMTP 3.0, or one we do not PING, such as a replay client) may
	// send nothing between messages before its connection is closed,
	// unless it is of use silent: a Pub's subscriber with a subscription.
	IdleTimeout time.Duration
	// ReadBytes bounds the bytes of the messages being read, over every
	// connection of the socket, reserved as each frame's body grows and
	// freed when its message is handed on. A reader that finds no room
	// waits, within FrameTimeout; a frame larger than ReadBytes is read
	// when it is alone.
	ReadBytes int
	// SubscriptionBytes bounds a Pub's subscriptions over all its
	// subscribers, each counted as its prefix's length plus
	// SubscriptionOverhead. A subscriber whose own come to less than a
	// few KiB may always add one; past that, one whose SUBSCRIBE would
	// take the total over is closed (ErrProtocol), counted in
	// Refusals.Subscriptions. So the subscriptions hold at most
	// SubscriptionBytes plus a few KiB per peer.
	SubscriptionBytes int
	// SharedQueueBytes bounds a Pub's queues over all its subscribers,
	// beside each one's QueueBytes: past it, a message is dropped for a
	// subscriber whose queue holds more than its share (SharedQueueBytes
	// over the subscribers connected), so that those that fall behind
	// cannot take a healthy one's room. An empty queue always takes one
	// message. So the queues hold at most about twice SharedQueueBytes,
	// plus a message per subscriber.
	SharedQueueBytes int
	// FrameTimeout is how long a message being read may go without a
	// byte, or wait for room in ReadBytes, before its connection is
	// closed: a peer cannot hold a partly read frame for long.
	FrameTimeout time.Duration
	// Allow, if not empty, is the IP prefixes a listening socket accepts
	// TCP connections from: one from any other source address is closed as
	// it is accepted, before its greeting and before anything is allocated
	// for it, counted in Refusals.Disallowed and reported. An IPv4 peer
	// that reaches a dual-stack listener is matched by its IPv4 address.
	// A unix socket or inproc peer has no source address and is not
	// subject to it: file permissions and the process guard those. Empty
	// admits every address.
	Allow []netip.Prefix
}

// withDefaults returns l with its zero fields set to the defaults.
func (l Limits) withDefaults() Limits {
	if len(l.Frames) == 0 {
		l.Frames = []int{DefaultMaxFrame}
	}
	set := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	set(&l.MaxFrames, DefaultMaxFrames)
	set(&l.Queue, DefaultQueue)
	set(&l.QueueBytes, DefaultQueueBytes)
	set(&l.MaxPeers, DefaultMaxPeers)
	set(&l.MaxPeersPerSource, DefaultMaxPeersPerSource)
	set(&l.MaxHandshakes, DefaultMaxHandshakes)
	set(&l.MaxHandshakesPerSource, DefaultMaxHandshakesPerSource)
	set(&l.ReadBytes, DefaultReadBytes)
	set(&l.SubscriptionBytes, DefaultSubscriptionBytes)
	set(&l.SharedQueueBytes, DefaultSharedQueueBytes)
	if l.FrameTimeout <= 0 {
		l.FrameTimeout = DefaultFrameTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	return l
}

// allowed reports whether a connection accepted as nc may stay: a TCP
// peer whose address is within Allow, or any peer without Allow or over a
// local transport.
func (l *Limits) allowed(nc net.Conn) bool {
	tcp, ok := nc.RemoteAddr().(*net.TCPAddr)
	if len(l.Allow) == 0 || !ok {
		return true
	}
	a := tcp.AddrPort().Addr().Unmap().WithZone("")
	for _, p := range l.Allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// frame returns the longest body accepted for frame i of a message.
func (l *Limits) frame(i int) uint64 {
	n := l.Frames[min(i, len(l.Frames)-1)]
	return uint64(max(n, 0))
}

// violation reports whether err is one of the kinds OnViolation hears of.
func violation(err error) bool {
	return errors.Is(err, ErrFrameTooLong) || errors.Is(err, ErrTooManyFrames) ||
		errors.Is(err, ErrProtocol) || errors.Is(err, ErrTooManyPeers) || errors.Is(err, ErrTimeout) ||
		errors.Is(err, ErrNotAllowed)
}

// Refusals counts what a socket's limits refused, by limit, since it was
// made. Each refusal is reported to OnViolation too.
type Refusals struct {
	Peers          int64 // handshakes finished with MaxPeers peers already connected, or MaxPeersPerSource from their address
	PeersPerSource int64 // of Peers, those refused for MaxPeersPerSource
	Handshakes     int64 // connections closed to make room for a newcomer, with MaxHandshakes in their handshake or on probation
	PerSource      int64 // handshakes closed to make room for a newcomer from their address, with MaxHandshakesPerSource from it under way
	Timeouts       int64 // handshakes not done within the handshake timeout
	Stalled        int64 // messages that made no progress within FrameTimeout
	Silent         int64 // peers that sent nothing within their heartbeat timeout
	Disallowed     int64 // connections from a source address outside Limits.Allow
	UnknownKeys    int64 // CURVE clients whose public key is not among Curve.Clients
	Subscriptions  int64 // subscribers closed for a SUBSCRIBE past Limits.SubscriptionBytes
}

// refusals is a socket's Refusals, counted from any goroutine.
type refusals struct {
	peers, peersPerSource, handshakes, perSource, timeouts, stalled, silent, disallowed, unknownKeys, subscriptions atomic.Int64
}

func (r *refusals) load() Refusals {
	return Refusals{Peers: r.peers.Load(), PeersPerSource: r.peersPerSource.Load(), Handshakes: r.handshakes.Load(), PerSource: r.perSource.Load(),
		Timeouts: r.timeouts.Load(), Stalled: r.stalled.Load(), Silent: r.silent.Load(), Disallowed: r.disallowed.Load(),
		UnknownKeys: r.unknownKeys.Load(), Subscriptions: r.subscriptions.Load()}
}

// budget is bytes shared by a socket's connections, reserved before they
// are allocated.
type budget struct {
	max int64

	mu      sync.Mutex
	used    int64
	waiting int           // readers waiting for room
	room    chan struct{} // closed and replaced when bytes are freed while readers wait
}

func newBudget(max int) *budget {
	return &budget{max: int64(max), room: make(chan struct{})}
}

// reserve takes n more bytes for a reader that holds own already,
// waiting for room until deadline or done. A reader that holds all that
// is held may go past the budget: a frame larger than the budget is read
// when it is alone.
func (b *budget) reserve(n, own int64, deadline time.Time, done <-chan struct{}) bool {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		b.mu.Lock()
		if b.used+n <= b.max || b.used == own {
			b.used += n
			b.mu.Unlock()
			return true
		}
		room := b.room
		b.waiting++
		b.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline))
		}
		var ok bool
		select {
		case <-room:
			ok = true
		case <-timer.C:
		case <-done:
		}
		b.mu.Lock()
		b.waiting--
		b.mu.Unlock()
		if !ok {
			return false
		}
	}
}

// release frees n bytes.
func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.waiting > 0 {
		close(b.room)
		b.room = make(chan struct{})
	}
	b.mu.Unlock()
}

// inUse returns the bytes reserved now.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Heartbeat configures ZMTP 3.1 heartbeats on a socket's connections: a
// PING every Interval, carrying Timeout as its TTL, to each peer that
// announced ZMTP 3.1 or later, which must answer with a PONG (RFC 37). A
// connection whose peer sends nothing, PONGs included, for Timeout, or
// for the TTL of the peer's own last PING when that is shorter, is closed
// (a dialing socket then connects again): a frozen peer is dropped. A
// peer of ZMTP 3.0, which does not speak heartbeats, is never held to
// them (Limits.IdleTimeout applies to it).
type Heartbeat struct {
	Interval time.Duration // 0 means DefaultHeartbeatInterval; negative sends no PING
	Timeout  time.Duration // 0 means DefaultHeartbeatTimeout
}

// Heartbeat defaults: three PINGs go unanswered before a peer is dropped.
const (
	DefaultHeartbeatInterval = 5 * time.Second
	DefaultHeartbeatTimeout  = 15 * time.Second
)

func (h Heartbeat) withDefaults() Heartbeat {
	if h.Interval == 0 {
		h.Interval = DefaultHeartbeatInterval
	}
	if h.Timeout <= 0 {
		h.Timeout = DefaultHeartbeatTimeout
	}
	return h
}
