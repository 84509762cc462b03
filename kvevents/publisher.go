package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/sagellm/kvevict/kvevents/internal/zmtp"
)

// Publisher defaults.
const (
	// DefaultReplayBuffer is how many batches a [Publisher] keeps for
	// replay unless told otherwise: vLLM's buffer_steps.
	DefaultReplayBuffer = 10_000
	// DefaultHighWaterMark is how many batches a [Publisher] queues for
	// one subscriber before it drops that subscriber's batches. A queue
	// holds the payloads the replay buffer holds too, so a subscriber that
	// stops reading pins no more than the buffer does.
	DefaultHighWaterMark = DefaultReplayBuffer
	// DefaultLinger is how long Close waits, unless told otherwise, for
	// the subscribers' queues to drain.
	DefaultLinger = time.Second
	// DefaultReplayDeadline bounds how long a replay client may take to
	// read each batch of an answer, and so its request, before it is
	// dropped: a client that stops reading holds up no one, and one that
	// reads an answer of thousands of batches at its own pace gets it
	// whole. A client connected that asks nothing for as long is dropped
	// too.
	DefaultReplayDeadline = 5 * time.Second
	// DefaultQueueBytes is how many bytes of batches a [Publisher] queues
	// for one subscriber before it drops that subscriber's batches, beside
	// the high-water mark in batches: large batches reach it first.
	DefaultQueueBytes = zmtp.DefaultQueueBytes
	// DefaultReplayBytes is how many bytes of payloads the replay buffer
	// keeps at most, beside its count of batches, unless told otherwise:
	// its share of DefaultMemory (see [WithPublisherMemory]), sized so
	// that vLLM's 10,000 batches of a real trace fit (docs/kvevents.md,
	// Limits). Past it the oldest go.
	DefaultReplayBytes = DefaultMemory / 16 * 11
	// DefaultMaxPeers is how many connections past their handshake a
	// listening socket keeps at once (publishers for a subscriber,
	// subscribers or replay clients for a publisher): room for a router
	// of a thousand engines and more.
	DefaultMaxPeers = zmtp.DefaultMaxPeers
	// DefaultMaxPeersPerAddress is how many of those one IP address may
	// hold at once at DefaultMaxPeers: a host runs a few engines, so one
	// host cannot take every other's room. Where a memory budget holds
	// fewer peers, the default is the same sixteenth of them, at least 1.
	DefaultMaxPeersPerAddress = zmtp.DefaultMaxPeersPerSource
	// DefaultIdleTimeout is how long a peer that speaks no heartbeats
	// (ZMTP 3.0) may send nothing before its connection is closed, unless
	// it is a subscriber with a subscription, which has nothing more to
	// say.
	DefaultIdleTimeout = zmtp.DefaultIdleTimeout
	// DefaultHeartbeatInterval and DefaultHeartbeatTimeout are the ZMTP
	// heartbeats of every socket that carries batches: a PING every
	// interval, and a peer that answered PINGs and then says nothing for
	// the timeout (a frozen process) is dropped; a subscriber that
	// connected connects again.
	DefaultHeartbeatInterval = zmtp.DefaultHeartbeatInterval
	DefaultHeartbeatTimeout  = zmtp.DefaultHeartbeatTimeout
)

// endSeq is the sequence number that ends a replay: -1, as 8 signed bytes.
const endSeq = -1

// ErrClosed is returned by [Publisher.Publish] after Close.
var ErrClosed = errors.New("kvevents: publisher closed")

// Publisher sends event batches as vLLM's ZmqEventPublisher does: on a PUB
// socket, each message the three frames topic, sequence number (8 bytes,
// big-endian, from 0, one more per message) and msgpack payload. With a
// replay endpoint it also serves a ROUTER socket from which a subscriber
// asks for the buffered batches from a sequence number on.
//
// Publish never waits for a subscriber: as ZeroMQ's PUB socket does, it
// queues each batch for every subscriber, up to a high-water mark per
// subscriber ([WithHighWaterMark]), and a subscriber whose queue is full
// loses that batch alone, counted in [PublisherStats]. Each replay client
// is served on its own, within a deadline.
//
// A Publisher is safe for concurrent use; batches are numbered in the
// order Publish is called.
type Publisher struct {
	pub    *zmtp.Pub
	replay *zmtp.Server // nil without a replay endpoint
	topic  []byte
	enc    Encoding
	rank   int64
	once   onceLog
	linger time.Duration

	mu           sync.Mutex
	closed       bool
	replayClosed bool      // no replay request is answered any more
	clients      int       // replay clients connected
	left         time.Time // when the last one went away
	seq          int64
	buf          []buffered // the latest batches, for replay, from buf[head] on
	head         int
	bufCap       int   // most batches in buf
	bufBytes     int64 // most payload bytes in buf
	stats        PublisherStats
}

// buffered is one published batch kept for replay.
type buffered struct {
	seq     int64
	payload []byte
}

// PublisherStats counts what a [Publisher] did with its batches.
type PublisherStats struct {
	Published int64 // batches numbered and queued by Publish
	// Sent, Dropped and Unsent add up, per batch, over the subscribers
	// connected when it was published: written to one, dropped for one
	// whose queue was full, or still queued for one when Close gave up.
	Sent, Dropped, Unsent int64
	// Subscribers has one entry per subscriber connected now, or after
	// Close, connected at Close; the totals above count those gone too.
	Subscribers []SubscriberStats
	// Connected counts the subscriber connections that completed their
	// handshake, those gone included: 0 means no subscriber ever heard
	// the publisher.
	Connected int64
	// Reached counts the subscribers, those gone included, that were sent
	// at least one batch: a subscriber of another topic, or one that did
	// the handshake and left, is not among them. Lossy counts those of
	// them that lost batches too, Dropped or Unsent: they hold a gap that
	// only replay can fill.
	Reached, Lossy int64
	// ReplayReached counts the replay connections answered with at least
	// one batch: a subscriber that joined after the last batch was
	// published catches up by replay alone, and Reached misses it.
	ReplayReached int64
	// ReplayRequests counts the replay requests answered; ReplayFailures
	// those malformed, those whose client did not take a batch of the
	// answer within the deadline (or whose answer Close cut at the end of
	// the linger), and those read after Close gave up on replay.
	ReplayRequests, ReplayFailures int64
	// RefusedSubscribers counts subscriber connections closed for breaking
	// the protocol or a limit (a frame too long, too many subscriptions,
	// too many subscribers or handshakes, an address outside
	// [WithPublisherAllow] or a CURVE key outside Curve.Clients, a CURVE
	// box that does not open, silence past the heartbeat
	// timeout, or past DefaultIdleTimeout for one of ZMTP 3.0 without a
	// subscription).
	RefusedSubscribers int64
	// ReplayClientsDropped counts replay connections closed for a limit
	// on connections or handshakes, for an address outside
	// [WithPublisherAllow] or a CURVE key outside Curve.Clients, or for
	// asking nothing and reading nothing within DefaultReplayDeadline.
	ReplayClientsDropped int64
	// QueuedBytes is the bytes of batches queued for the subscribers now,
	// each subscriber's counted apart; each is bounded by
	// [WithQueueBytes].
	QueuedBytes int64
	// ReplayBytes is the payload bytes the replay buffer holds, bounded by
	// [WithReplayBytes]; ReplayTrimmed counts the batches it let go
	// before it held as many as [WithReplay] asks, to stay within it.
	ReplayBytes, ReplayTrimmed int64
}

// SubscriberStats counts one subscriber connection's batches.
type SubscriberStats struct {
	Peer                  string // its address
	Sent, Dropped, Unsent int64
}

// PublisherOption configures a [Publisher] made by [NewPublisher].
type PublisherOption func(*publisherConfig)

type publisherConfig struct {
	memory      int64
	topic       string
	replay      string
	buffer      int
	replayBytes int
	hwm         int
	queueBytes  int
	maxPeers    int
	perAddress  int
	heartbeat   zmtp.Heartbeat
	allow       []netip.Prefix
	curve       *Curve
	enc         Encoding
	rank        int64
	log         *slog.Logger
	linger      time.Duration
	dir         Direction
	errs        []error
}

// WithPublisherMemory sets the publisher's memory budget in bytes (n >=
// [MinMemory]; [DefaultMemory] by default), which bounds every kind of
// memory its peers can make it hold, each to a share: the replay
// buffer's payloads 11/16 ([WithReplayBytes] within it), the subscribers'
// queues together 1/8 (each within [WithQueueBytes]; they hold the
// payloads the replay buffer holds), the connections 1/8, at about
// 160 KiB each, which bounds the subscribers and replay clients
// ([WithMaxSubscribers] within it; the two sockets share it), the
// subscriptions 1/32, and the bytes being read 1/32. What would go past
// a share is refused as that kind is refused past its own limit: a
// subscriber closed and counted, a batch dropped for a subscriber whose
// queue holds more than its share, the oldest replay batch let go.
func WithPublisherMemory(n int64) PublisherOption {
	return func(c *publisherConfig) {
		c.memory, c.errs = memory("publisher", n, c.errs)
	}
}

// WithPublisherDirection sets whether the PUB socket binds its endpoint or
// connects to a subscriber that binds it; the default, [ByRule], is
// [Binds]. The replay socket ([WithReplay]) always binds: a replay request
// is for the one publisher whose buffer it reads.
func WithPublisherDirection(d Direction) PublisherOption {
	return func(c *publisherConfig) {
		if !d.valid() {
			c.errs = append(c.errs, fmt.Errorf("kvevents: unknown direction %d", int(d)))
		}
		c.dir = d
	}
}

// WithLinger sets how long Close waits for the subscribers' queues to be
// written and for replay clients to be answered (d >= 0): 0 closes at
// once, as vLLM does, and drops what is queued. What was not written
// counts as Unsent, or as a ReplayFailure, in [PublisherStats].
func WithLinger(d time.Duration) PublisherOption {
	return func(c *publisherConfig) {
		if d < 0 {
			c.errs = append(c.errs, fmt.Errorf("kvevents: linger %v, want >= 0", d))
		}
		c.linger = d
	}
}

// WithTopic sets the topic frame of every message (vLLM's default is empty;
// llm-d deployments use "kv@<pod>@<model>").
func WithTopic(topic string) PublisherOption {
	return func(c *publisherConfig) { c.topic = topic }
}

// WithReplay serves replay requests on a ROUTER socket bound to endpoint,
// keeping the latest n batches (n >= 1; [DefaultReplayBuffer] is vLLM's).
func WithReplay(endpoint string, n int) PublisherOption {
	return func(c *publisherConfig) {
		if n < 1 {
			c.errs = append(c.errs, fmt.Errorf("kvevents: replay buffer of %d batches, want at least 1", n))
		}
		c.replay, c.buffer = endpoint, n
	}
}

// WithHighWaterMark sets how many batches are queued for one subscriber
// before that subscriber's next ones are dropped (n >= 1). The default is
// [DefaultHighWaterMark].
func WithHighWaterMark(n int) PublisherOption {
	return func(c *publisherConfig) {
		if n < 1 {
			c.errs = append(c.errs, fmt.Errorf("kvevents: high-water mark %d, want at least 1", n))
		}
		c.hwm = n
	}
}

// WithQueueBytes sets how many bytes of batches are queued for one
// subscriber before that subscriber's next ones are dropped (n >= 1); a
// batch larger than n is queued alone. The default is
// [DefaultQueueBytes].
func WithQueueBytes(n int) PublisherOption {
	return func(c *publisherConfig) {
		if n < 1 {
			c.errs = append(c.errs, fmt.Errorf("kvevents: queue bytes %d, want at least 1", n))
		}
		c.queueBytes = n
	}
}

// WithReplayBytes sets how many payload bytes the replay buffer keeps at
// most (n >= 1), beside [WithReplay]'s count of batches: past it the
// oldest batches go, counted in PublisherStats.ReplayTrimmed. The default
// is the memory budget's share ([WithPublisherMemory]), [DefaultReplayBytes]
// under the default budget, and the share bounds it.
func WithReplayBytes(n int) PublisherOption {
	return func(c *publisherConfig) {
		if n < 1 {
			c.errs = append(c.errs, fmt.Errorf("kvevents: replay bytes %d, want at least 1", n))
		}
		c.replayBytes = n
	}
}

// WithMaxSubscribers sets how many subscribers, and apart from them how
// many replay clients, a publisher keeps connected at once (n >= 1); a
// further one is closed as soon as it is accepted (or when its handshake
// is done, if the others filled the room meanwhile), and counted in
// PublisherStats.RefusedSubscribers. The default is [DefaultMaxPeers].
func WithMaxSubscribers(n int) PublisherOption {
	return func(c *publisherConfig) {
		if n < 1 {
			c.errs = append(c.errs, fmt.Errorf("kvevents: max subscribers %d, want at least 1", n))
		}
		c.maxPeers = n
	}
}

// WithMaxSubscribersPerAddress sets how many of the subscribers, and apart
// from them of the replay clients, that [WithMaxSubscribers] bounds may
// come from one IP address (n >= 1); a further one is closed when its
// handshake is done, and counted in PublisherStats.RefusedSubscribers (or
// ReplayClientsDropped). Behind a proxy that makes every peer one
// address, raise it to WithMaxSubscribers'. The default is a sixteenth of
// the subscribers the socket holds: [DefaultMaxPeersPerAddress] at
// [DefaultMaxPeers].
func WithMaxSubscribersPerAddress(n int) PublisherOption {
	return func(c *publisherConfig) {
		if n < 1 {
			c.errs = append(c.errs, fmt.Errorf("kvevents: max subscribers per address %d, want at least 1", n))
		}
		c.perAddress = n
	}
}

// WithPublisherHeartbeat sets the ZMTP heartbeats on the subscribers'
// connections: a PING every interval, and a subscriber that answered
// PINGs and then sends nothing for timeout (interval < timeout) is
// dropped. An interval < 0 sends no PING. The defaults are
// [DefaultHeartbeatInterval] and [DefaultHeartbeatTimeout].
func WithPublisherHeartbeat(interval, timeout time.Duration) PublisherOption {
	return func(c *publisherConfig) {
		c.heartbeat, c.errs = heartbeat(interval, timeout, c.errs)
	}
}

// WithPublisherAllow accepts subscribers, and replay clients, only from
// source addresses within prefixes: a connection from any other is closed
// as it is accepted, before its greeting, and counted in
// PublisherStats.RefusedSubscribers (or ReplayClientsDropped). It applies
// to every socket the publisher binds, the PUB socket (unless it
// connects) and the replay socket; a publisher that binds neither refuses
// it. Peers over ipc:// and inproc:// have no address and are accepted.
// No prefixes, the default, accepts every address.
func WithPublisherAllow(prefixes ...netip.Prefix) PublisherOption {
	return func(c *publisherConfig) {
		c.allow, c.errs = allow(prefixes, c.errs)
	}
}

// WithPublisherCurve speaks CURVE on every socket of the publisher (see
// [Curve]): the PUB socket and the replay socket, as the server where
// they bind and the client where the PUB socket connects.
func WithPublisherCurve(c Curve) PublisherOption {
	return func(pc *publisherConfig) { pc.curve = &c }
}

// allow checks the prefixes of the allow options and returns them masked.
func allow(prefixes []netip.Prefix, errs []error) ([]netip.Prefix, []error) {
	out := make([]netip.Prefix, 0, len(prefixes))
	for _, p := range prefixes {
		if !p.IsValid() {
			errs = append(errs, fmt.Errorf("kvevents: allow %q: not a valid IP prefix", p))
			continue
		}
		out = append(out, p.Masked())
	}
	return out, errs
}

// heartbeat checks the arguments of the heartbeat options.
func heartbeat(interval, timeout time.Duration, errs []error) (zmtp.Heartbeat, []error) {
	if interval == 0 || (interval > 0 && timeout <= interval) {
		errs = append(errs, fmt.Errorf("kvevents: heartbeat every %v with a timeout of %v: want an interval < 0 (none), or 0 < interval < timeout", interval, timeout))
	}
	return zmtp.Heartbeat{Interval: interval, Timeout: timeout}, errs
}

// WithEncoding sets the payload encoding ([EncodingMixed] by default).
func WithEncoding(e Encoding) PublisherOption {
	return func(c *publisherConfig) {
		if !e.valid() {
			c.errs = append(c.errs, fmt.Errorf("kvevents: unknown encoding %d", e))
		}
		c.enc = e
	}
}

// WithDataParallelRank sets the data-parallel rank written on every batch
// whose DataParallelRank is nil (n >= 0; 0 by default), as vLLM's
// publisher does: llm-d refuses a batch without it.
func WithDataParallelRank(n int64) PublisherOption {
	return func(c *publisherConfig) {
		if n < 0 {
			c.errs = append(c.errs, fmt.Errorf("kvevents: data-parallel rank %d, want >= 0", n))
		}
		c.rank = n
	}
}

// WithPublisherLogger sets where the publisher logs what it cannot serve
// (slog.Default() otherwise): the first malformed replay request, the
// first replay client dropped, the first subscriber that broke the
// protocol, each once, so that a misbehaving client cannot flood the log.
func WithPublisherLogger(l *slog.Logger) PublisherOption {
	return func(c *publisherConfig) { c.log = l }
}

// NewPublisher opens a PUB socket on endpoint, binding or connecting as
// [WithPublisherDirection] says, and the replay socket if [WithReplay]
// asks for one. A socket that connects does so in the background and
// again whenever its subscriber goes away; [Publisher.DialError] tells
// why it is not connected. The sockets live until Close, which ctx's end
// calls.
func NewPublisher(ctx context.Context, endpoint string, opts ...PublisherOption) (*Publisher, error) {
	c := publisherConfig{memory: DefaultMemory, log: slog.Default(), linger: DefaultLinger, hwm: DefaultHighWaterMark,
		queueBytes: DefaultQueueBytes, replayBytes: math.MaxInt, maxPeers: DefaultMaxPeers}
	for _, o := range opts {
		o(&c)
	}
	if err := errors.Join(c.errs...); err != nil {
		return nil, err
	}
	mem := publisherShares(c.memory, c.replay != "")
	c.replayBytes = int(min(int64(c.replayBytes), mem.replay))
	p := &Publisher{
		topic:    []byte(c.topic),
		enc:      c.enc,
		rank:     c.rank,
		once:     onceLog{log: c.log},
		bufCap:   c.buffer,
		bufBytes: int64(c.replayBytes),
		linger:   c.linger,
	}
	bind, err := binds(endpoint, c.dir, Binds)
	if err != nil {
		return nil, fmt.Errorf("kvevents: PUB socket on %s: %w", endpoint, err)
	}
	if !bind && c.replay == "" && len(c.allow) > 0 {
		return nil, errors.New("kvevents: WithPublisherAllow applies to the sockets a publisher binds, and this one binds none (its PUB socket connects, and it has no replay socket)")
	}
	curve, err := c.curve.sockets("WithPublisherCurve", bind || c.replay != "", !bind)
	if err != nil {
		return nil, err
	}
	// A subscriber sends subscriptions only: one frame, a flag byte and a
	// topic prefix.
	p.pub = zmtp.NewPub(zmtp.PubOptions{
		Limits: connections(mem.connections, c.maxPeers, zmtp.Limits{Frames: []int{1 + DefaultMaxTopicLength}, MaxFrames: 1,
			Queue: c.hwm, QueueBytes: int(min(int64(c.queueBytes), mem.queues)), SharedQueueBytes: int(mem.queues),
			MaxPeersPerSource: c.perAddress, SubscriptionBytes: int(mem.subscriptions), ReadBytes: int(mem.reading), Allow: c.allow}),
		OnViolation: func(err error) {
			p.mu.Lock()
			p.stats.RefusedSubscribers++
			p.mu.Unlock()
			kind, msg := "subscriber", "kvevents: dropping a subscriber that broke the protocol or a limit"
			switch {
			case errors.Is(err, zmtp.ErrTooManyPeers):
				kind, msg = "subscriber refused", "kvevents: refusing a subscriber past a connection limit"
			case errors.Is(err, zmtp.ErrNotAllowed):
				kind, msg = "subscriber not allowed", "kvevents: refusing a subscriber from an address, or with a CURVE key, outside the allowed ones"
			case errors.Is(err, zmtp.ErrTimeout):
				kind, msg = "subscriber timed out", "kvevents: dropping a subscriber gone silent"
			}
			p.once.warn(kind, msg+"; later ones are only counted", err)
		},
		OnDrop: func(peer string) {
			p.once.warn("queue full", "kvevents: a subscriber's queue is full: its batches are dropped; later ones are only counted",
				fmt.Errorf("kvevents: subscriber %s", peer))
		},
		Heartbeat: c.heartbeat,
		Curve:     curve,
	})
	if bind {
		err = p.pub.Listen(endpoint)
	} else {
		err = p.pub.Dial(endpoint)
	}
	if err != nil {
		_ = p.pub.Close(0)
		return nil, fmt.Errorf("kvevents: PUB socket on %s: %w", endpoint, err)
	}
	if c.replay != "" {
		p.replay = zmtp.NewServer(zmtp.ServerOptions{
			// A client that neither asks nor reads its answer within the
			// replay deadline is closed.
			Limits: connections(mem.connections, c.maxPeers, zmtp.Limits{Frames: []int{0, 8}, MaxFrames: 2,
				MaxPeersPerSource: c.perAddress, ReadBytes: int(mem.reading), IdleTimeout: DefaultReplayDeadline, Allow: c.allow}),
			OnViolation: p.replayViolation,
			Curve:       curve,
		}, p.serveReplay)
		if err := p.replay.Listen(c.replay); err != nil {
			_ = p.pub.Close(0)
			return nil, fmt.Errorf("kvevents: replay socket on %s: %w", c.replay, err)
		}
	}
	context.AfterFunc(ctx, func() { _ = p.Close() })
	return p, nil
}

// Addr returns the address the PUB socket listens on, or nil if it
// connected.
func (p *Publisher) Addr() net.Addr { return p.pub.Addr() }

// ReplayAddr returns the address of the replay socket, or nil without one.
func (p *Publisher) ReplayAddr() net.Addr {
	if p.replay == nil {
		return nil
	}
	return p.replay.Addr()
}

// Publish encodes b, numbers it and queues it for every subscriber and for
// replay, and returns its number. It sets b.DataParallelRank to the
// publisher's rank ([WithDataParallelRank]) when nil. It never waits for a
// subscriber. ZeroMQ drops the messages of a subscriber that has not
// finished connecting: that is what replay is for. After Close it returns
// [ErrClosed].
func (p *Publisher) Publish(b *EventBatch) (seq int64, err error) {
	if b.DataParallelRank == nil {
		rank := p.rank
		b.DataParallelRank = &rank
	}
	payload, err := Encode(b, p.enc)
	if err != nil {
		return 0, err
	}
	if cap(payload)-len(payload) > len(payload)/8 {
		// The encoder's buffer grows by doubling: kept as it is, the
		// replay buffer and the queues would hold up to twice the bytes
		// they count.
		payload = slices.Clip(append([]byte(nil), payload...))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, ErrClosed
	}
	seq = p.seq
	if err := p.pub.Send([][]byte{p.topic, seqBytes(seq), payload}); err != nil {
		return 0, fmt.Errorf("kvevents: publish %d: %w", seq, err)
	}
	p.seq++
	if p.bufCap > 0 {
		p.keep(buffered{seq, payload})
	}
	return seq, nil
}

// keep adds b to the replay buffer and lets the oldest batches go past
// its count or its bytes; a batch larger than the bytes is kept alone.
// p.mu is held.
func (p *Publisher) keep(b buffered) {
	p.buf = append(p.buf, b)
	p.stats.ReplayBytes += int64(len(b.payload))
	for n := len(p.buf) - p.head; n > p.bufCap || (n > 1 && p.stats.ReplayBytes > p.bufBytes); n-- {
		if n <= p.bufCap {
			p.stats.ReplayTrimmed++
			p.once.warn("replay bytes", "kvevents: the replay buffer is at its byte budget: it lets the oldest batches go, keeping fewer than asked; later trims are only counted (PublisherStats.ReplayTrimmed)",
				fmt.Errorf("kvevents: %d bytes in %d batches", p.stats.ReplayBytes, n))
		}
		p.stats.ReplayBytes -= int64(len(p.buf[p.head].payload))
		p.buf[p.head] = buffered{}
		p.head++
	}
	if p.head >= 64 && p.head > len(p.buf)/2 { // the slice's front is mostly gone: move the rest down
		n := copy(p.buf, p.buf[p.head:])
		clear(p.buf[n:])
		p.buf, p.head = p.buf[:n], 0
	}
}

// DialError returns, for a PUB socket that connects, why its last attempt
// to reach the subscriber failed (nothing binds the endpoint, a host that
// does not resolve, a peer that speaks another security mechanism...), or
// nil if none failed since the last connection succeeded. A socket that
// binds returns nil.
func (p *Publisher) DialError() error { return p.pub.DialError() }

// Published returns how many batches Publish has numbered.
func (p *Publisher) Published() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seq
}

// Stats returns the counts so far; after Close, the final ones.
func (p *Publisher) Stats() PublisherStats {
	ps := p.pub.Stats()
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	st.Published = p.seq
	st.Sent, st.Dropped, st.Unsent, st.QueuedBytes = ps.Sent, ps.Dropped, ps.Unsent, ps.QueuedBytes
	st.Connected, st.Reached, st.Lossy = ps.Connected, ps.Reached, ps.Lossy
	st.Subscribers = make([]SubscriberStats, len(ps.Peers))
	for i, peer := range ps.Peers {
		st.Subscribers[i] = SubscriberStats{Peer: peer.Peer, Sent: peer.Sent, Dropped: peer.Dropped, Unsent: peer.Unsent}
	}
	return st
}

// replayGrace is how long a closing Publisher goes on answering replay
// requests after the last replay client went away, for one that connects
// again at once. A [Subscriber] catching up keeps its connection from one
// request to the next, however long it takes to handle an answer, so its
// catch-up does not hang on this time.
const replayGrace = 500 * time.Millisecond

// Close stops Publish and, for up to the linger time ([WithLinger]),
// writes the subscribers' queues and goes on answering replay requests,
// new ones included, while a replay client is connected and until none
// has been for half a second: a subscriber that joined late and is
// catching up by replay gets what was published, whole. Then it closes
// the sockets. What was not written by
// then is counted as Unsent, or as a ReplayFailure, in [Publisher.Stats].
// Closing again does nothing.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	deadline := time.Now().Add(p.linger)
	err := p.pub.Close(p.linger)
	if p.replay != nil {
		for {
			p.mu.Lock()
			now := time.Now()
			idle := p.clients == 0 && now.Sub(p.left) >= replayGrace
			if idle || !now.Before(deadline) {
				p.replayClosed = true
				p.mu.Unlock()
				break
			}
			p.mu.Unlock()
			time.Sleep(min(10*time.Millisecond, time.Until(deadline)))
		}
		err = errors.Join(err, p.replay.Close())
	}
	return err
}

// mayAnswer reports whether a replay request may still be answered.
func (p *Publisher) mayAnswer() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.replayClosed
}

// connected counts a replay client as connected until it goes away, as
// Close waits for.
func (p *Publisher) connected() (gone func()) {
	p.mu.Lock()
	p.clients++
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.clients--
		p.left = time.Now()
		p.mu.Unlock()
	}
}

// serveReplay answers one replay client's requests until it goes away. A
// request is the frames (empty, start); the answer is one (empty, topic,
// seq, payload) message per buffered batch from start on, then (empty,
// topic, -1, empty), as current vLLM answers. Each message must be taken
// within DefaultReplayDeadline, or the client is dropped: one that asks
// and never reads holds up no one else. A request read once Close has
// stopped answering closes the connection unanswered.
func (p *Publisher) serveReplay(c *zmtp.Conn) {
	defer p.connected()()
	reached := false
	for {
		c.SetDeadline(time.Time{})
		f, err := c.ReadMsg()
		if err != nil {
			return // gone, or broke a limit (counted by OnViolation)
		}
		start, ok := parseReplayRequest(f)
		if !ok {
			p.replayFailed("malformed", fmt.Errorf("%w: a replay request of %d frames", ErrMalformed, len(f)))
			continue
		}
		if !p.mayAnswer() {
			p.replayFailed("closed", fmt.Errorf("kvevents: a replay request from %d after the publisher closed", start))
			return
		}
		written, err := p.answer(c, start)
		if err != nil {
			p.replayFailed("unanswered", fmt.Errorf("kvevents: could not answer a replay request from %d: %w", start, err))
			return
		}
		p.mu.Lock()
		p.stats.ReplayRequests++
		if written > 0 && !reached {
			reached = true
			p.stats.ReplayReached++
		}
		p.mu.Unlock()
	}
}

// parseReplayRequest reads a replay request, the frames (empty, start),
// and returns start.
func parseReplayRequest(f [][]byte) (start int64, ok bool) {
	if len(f) != 2 || len(f[0]) != 0 || len(f[1]) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(f[1])), true
}

// answer writes the buffered batches from start on, up to the last one
// published when it was asked, and the end marker, and returns how many
// batches it wrote. Each batch is taken
// from the buffer as it is written, so an answer holds one batch, not the
// buffer as it was when asked, however slowly it is read: a batch the
// buffer lets go meanwhile is passed over, and the client counts it
// missed.
func (p *Publisher) answer(c *zmtp.Conn, start int64) (written int, err error) {
	end := p.Published()
	for next := start; ; {
		b, ok := p.buffered(next, end)
		if !ok {
			break
		}
		c.SetDeadline(time.Now().Add(DefaultReplayDeadline))
		if err := c.WriteMsg([][]byte{nil, p.topic, seqBytes(b.seq), b.payload}); err != nil {
			return written, err
		}
		written++
		next = b.seq + 1
	}
	c.SetDeadline(time.Now().Add(DefaultReplayDeadline))
	return written, c.WriteMsg([][]byte{nil, p.topic, seqBytes(endSeq), nil})
}

// replayViolation counts a replay connection the transport closed: for
// a limit on connections or for silence, a client dropped; for breaking
// the protocol, a failed request.
func (p *Publisher) replayViolation(err error) {
	if !errors.Is(err, zmtp.ErrTooManyPeers) && !errors.Is(err, zmtp.ErrTimeout) && !errors.Is(err, zmtp.ErrNotAllowed) {
		p.replayFailed("malformed", err)
		return
	}
	p.mu.Lock()
	p.stats.ReplayClientsDropped++
	p.mu.Unlock()
	p.once.warn("replay client dropped", "kvevents: closing a replay client past a connection limit, from an address or with a CURVE key outside the allowed ones, or silent past the replay deadline; later ones are only counted", err)
}

// replayFailed counts a replay request that was not answered and logs the
// first of each kind.
func (p *Publisher) replayFailed(kind string, err error) {
	p.mu.Lock()
	p.stats.ReplayFailures++
	p.mu.Unlock()
	p.once.warn("replay "+kind, "kvevents: a replay request was not answered; later ones are only counted", err)
}

// buffered returns the batch numbered next, or the oldest after it that
// the buffer holds, if it is numbered below end. O(1): the buffer holds
// consecutive numbers. The payload is shared, never written.
func (p *Publisher) buffered(next, end int64) (buffered, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	held := p.buf[p.head:]
	if len(held) == 0 {
		return buffered{}, false
	}
	i := max(next-held[0].seq, 0)
	if i >= int64(len(held)) || held[i].seq >= end {
		return buffered{}, false
	}
	return held[i], true
}
