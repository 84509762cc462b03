package kvevents

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/sagellm/kvevict/kvevents/internal/zmtp"
)

// Subscriber defaults.
const (
	// DefaultMaxPayload is the longest payload frame a [Subscriber] reads
	// unless told otherwise: far above a real batch, low enough that one
	// hostile message cannot take a mirror's memory. A longer frame is
	// refused as its header arrives, before it is read.
	DefaultMaxPayload = 16 << 20
	// DefaultMaxTopicLength is the longest topic frame a [Subscriber]
	// reads: llm-d's kv@<pod>@<model> topics are far shorter.
	DefaultMaxTopicLength = 1024
	// DefaultMaxTopics is how many topics (engines) a [Subscriber]
	// follows at once; a further one takes the place of the one heard
	// from least recently.
	DefaultMaxTopics = 1024
	// DefaultMaxGap is the longest forward jump of a topic's sequence
	// taken on one message's word: vLLM's replay buffer, the most that
	// replay could recover. A longer jump is held until the next message
	// confirms it.
	DefaultMaxGap = DefaultReplayBuffer
	// DefaultReplayTimeout bounds the wait for each message of a replay
	// answer, from the dial on; a whole answer may take 30 times as long.
	DefaultReplayTimeout = 2 * time.Second
)

// Message is one decoded batch as a [Subscriber] delivers it.
type Message struct {
	Topic string // the topic frame
	Seq   int64  // the sequence number
	// Batch holds the events that decoded; see Stats for those skipped.
	// With WithBatchReuse it is valid only until the handler returns.
	Batch EventBatch
	// Missed counts the sequence numbers just before Seq that were never
	// delivered: lost in transit and not recovered by replay. A consumer
	// mirroring state is out of date by that many batches.
	Missed int64
	// Restart is set on the first message from a new publisher of the
	// topic (its sequence went below one already delivered): what the
	// topic's earlier publisher sent is gone, and a mirror starts over.
	Restart bool
	// Replayed is set when the batch came from the replay socket.
	Replayed bool
	// Released is set on a message that carries no batch and no sequence
	// number: the subscriber no longer follows the topic, the one heard
	// from least recently, to follow a new one past WithMaxTopics. A
	// mirror lets the topic's state go; a later message of the topic
	// starts it again, as a join.
	Released bool
}

// Stats counts what a [Subscriber] received. The counts never go down.
type Stats struct {
	Delivered int64 // batches passed to the handler, replayed ones included
	Replayed  int64 // of Delivered, those that came through replay
	Missed    int64 // sequence numbers never delivered (see Message.Missed)
	Stale     int64 // duplicates of the message delivered last, dropped
	Gaps      int64 // runs of missed sequence numbers
	Restarts  int64 // topics whose publisher started over (see Message.Restart)
	// ReplayFailures counts replay requests for a gap or a restart's
	// check that failed: no answer in time, an answer that breaks the
	// protocol, or another topic's. The requests at start and in CatchUp,
	// which ask for nothing known to be missing, are not counted.
	ReplayFailures int64
	// Bad input, each skipped (see the errors of the same names).
	Malformed    int64 // whole messages, or connections that broke the protocol
	Oversized    int64 // whole messages: a frame over its limit, or a payload too costly to decode
	UnknownEvent int64 // single events
	FieldType    int64 // single events, or whole batches for a batch field
	// Unhandled counts the messages received but not yet handled when the
	// subscriber closed, dropped then: it was that far behind at least
	// (more may have been on the way). Set when Run returns.
	Unhandled int64
	// Refused counts messages dropped by a limit: a forward jump past
	// WithMaxGap that the next message did not confirm, and publishers'
	// connections refused by a connection limit of a listening subscriber
	// (WithMaxPublishers, handshakes) or from an address outside
	// WithSubscriberAllow.
	Refused int64
	// Released counts the topics let go to follow new ones past
	// WithMaxTopics (see Message.Released).
	Released int64
	// TimedOut counts publishers' connections closed for silence: a
	// message that stopped arriving midway, or a publisher that answered
	// heartbeats and then said nothing for the heartbeat timeout (a frozen
	// process). A subscriber that connected connects again.
	TimedOut int64
}

// Subscriber receives event batches on a SUB socket, checks each topic's
// sequence numbers, and on a gap asks the publisher's replay socket, if it
// has one, for the missing batches. Bad input is counted ([Stats]), logged
// once per kind and skipped; it never stops the subscriber, and every
// limit (see the With options) is checked before what it bounds is
// allocated.
type Subscriber struct {
	sub        *zmtp.Sub
	replay     string
	replayWait time.Duration
	limits     zmtp.Limits // of the replay connection's frames
	curve      *zmtp.Curve // of the replay connection, nil without CURVE
	maxTopics  int
	maxGap     int64
	once       onceLog
	dec        *Decoder // with WithBatchReuse: Run's goroutine's, for every message it delivers
	// decodeLimit bounds what decoding a payload allocates: the budget's
	// share, below Decode's own bound of 16 times the payload's length.
	decodeLimit int

	topics      []string           // the subscriptions
	streams     map[string]*stream // per topic; Run's goroutine only, as are the two below
	newest      *stream            // the stream heard from last, first of the list by message heard
	oldest      *stream            // the stream heard from least recently, released first
	heldBytes   int                // of the streams' held payloads, bounded by heldBudget
	heldBudget  int                // bytes of held payloads over all topics, so that forged jumps on many topics cannot pin a payload each
	replayTopic *string            // the topic the replay socket answered for, once it did; Run's goroutine only

	mu    sync.Mutex
	stats Stats
}

// stream is what a Subscriber knows of one topic's sequence.
type stream struct {
	topic        string
	newer, older *stream // in the list of streams by the last message heard

	next int64  // the sequence number expected next
	last uint64 // the checksum of the payload numbered next-1, to tell a duplicate from a restart
	conn uint64 // the connection the last message came on
	// held is the number of a jump past maxGap, waiting for the next
	// message to confirm it, or -1; heldPayload is its payload while the
	// subscriber's budget for held payloads has room, else nil, and replay
	// brings the batch back once the jump is confirmed.
	held        int64
	heldPayload []byte
}

// SubscriberOption configures a [Subscriber] made by [NewSubscriber].
type SubscriberOption func(*subscriberConfig)

type subscriberConfig struct {
	memory     int64
	topics     []string
	replay     string
	replayWait time.Duration
	maxPayload int
	maxTopic   int
	maxTopics  int
	maxGap     int64
	maxPeers   int
	perAddress int
	heartbeat  zmtp.Heartbeat
	allow      []netip.Prefix
	curve      *Curve
	dir        Direction
	log        *slog.Logger
	reuse      bool
	errs       []error
}

// WithBatchReuse decodes every message into the memory of the one before
// (see [Decoder]): the handler given to Run must not keep a Message's
// Batch, or anything it points to, once it returns. A handler that applies
// each batch and lets go of it, as [Mirror.Handle] does, then costs no
// allocation per batch.
func WithBatchReuse() SubscriberOption {
	return func(c *subscriberConfig) { c.reuse = true }
}

// WithSubscription receives only the topics that start with prefix; give it
// once per prefix. Without it a subscriber receives every topic.
func WithSubscription(prefix string) SubscriberOption {
	return func(c *subscriberConfig) { c.topics = append(c.topics, prefix) }
}

// WithReplayEndpoint asks the publisher's ROUTER socket at endpoint for
// missed batches, waiting at most timeout for each message of the answer,
// and 30 times as long for the whole answer, which may hold thousands of
// batches (timeout > 0; [DefaultReplayTimeout] is a fair choice). The endpoint serves one
// publisher: with several topics from several publishers, replay fills
// the gaps of the topic whose publisher it is, and a request for another
// topic counts as a failure.
func WithReplayEndpoint(endpoint string, timeout time.Duration) SubscriberOption {
	return func(c *subscriberConfig) {
		if timeout <= 0 {
			c.errs = append(c.errs, fmt.Errorf("kvevents: replay timeout %v, want > 0", timeout))
		}
		c.replay, c.replayWait = endpoint, timeout
	}
}

// WithMaxPayload sets the longest payload frame read (n >= 1); a longer
// one closes its publisher's connection as its header arrives and counts
// as [ErrOversized]. The default is [DefaultMaxPayload].
func WithMaxPayload(n int) SubscriberOption {
	return func(c *subscriberConfig) {
		if n < 1 {
			c.errs = append(c.errs, fmt.Errorf("kvevents: max payload %d, want at least 1", n))
		}
		c.maxPayload = n
	}
}

// WithMaxTopicLength sets the longest topic frame read (n >= 0), as
// WithMaxPayload does for the payload. The default is
// [DefaultMaxTopicLength].
func WithMaxTopicLength(n int) SubscriberOption {
	return func(c *subscriberConfig) {
		if n < 0 {
			c.errs = append(c.errs, fmt.Errorf("kvevents: max topic length %d, want >= 0", n))
		}
		c.maxTopic = n
	}
}

// WithMaxTopics sets how many topics the subscriber follows (n >= 1); a
// further topic takes the place of the one heard from least recently,
// which is released (Message.Released, Stats.Released). The default is
// [DefaultMaxTopics].
func WithMaxTopics(n int) SubscriberOption {
	return func(c *subscriberConfig) {
		if n < 1 {
			c.errs = append(c.errs, fmt.Errorf("kvevents: max topics %d, want at least 1", n))
		}
		c.maxTopics = n
	}
}

// WithMaxGap sets the longest forward jump of a topic's sequence taken at
// once (n >= 1); a longer one is held until the topic's next message
// follows it, and dropped if that message continues the old sequence
// instead, so that one forged sequence number cannot make the real
// publisher's batches look stale. Held payloads take at most their share
// of the memory budget over all topics ([WithSubscriberMemory]: 16 MiB by
// default); past that only the number is held, and the batch comes back
// by replay once confirmed, or counts as missed.
// The default is [DefaultMaxGap].
func WithMaxGap(n int64) SubscriberOption {
	return func(c *subscriberConfig) {
		if n < 1 {
			c.errs = append(c.errs, fmt.Errorf("kvevents: max gap %d, want at least 1", n))
		}
		c.maxGap = n
	}
}

// WithMaxPublishers sets how many publishers a listening subscriber keeps
// connected at once (n >= 1); a further one is closed as soon as it is
// accepted (or when its handshake is done, if the others filled the room
// meanwhile), and counted as Refused. The default is [DefaultMaxPeers].
func WithMaxPublishers(n int) SubscriberOption {
	return func(c *subscriberConfig) {
		if n < 1 {
			c.errs = append(c.errs, fmt.Errorf("kvevents: max publishers %d, want at least 1", n))
		}
		c.maxPeers = n
	}
}

// WithMaxPublishersPerAddress sets how many of the publishers that
// [WithMaxPublishers] bounds may come from one IP address (n >= 1); a
// further one is closed when its handshake is done, and counted as
// Refused. Behind a proxy that makes every peer one address, raise it to
// WithMaxPublishers'. The default is a sixteenth of the publishers the
// socket holds: [DefaultMaxPeersPerAddress] at [DefaultMaxPeers].
func WithMaxPublishersPerAddress(n int) SubscriberOption {
	return func(c *subscriberConfig) {
		if n < 1 {
			c.errs = append(c.errs, fmt.Errorf("kvevents: max publishers per address %d, want at least 1", n))
		}
		c.perAddress = n
	}
}

// WithSubscriberHeartbeat sets the ZMTP heartbeats on the publishers'
// connections: a PING every interval, and a publisher that answered PINGs
// and then sends nothing for timeout (interval < timeout) is dropped,
// counted as TimedOut, and connected to again. An interval < 0 sends no
// PING. The defaults are [DefaultHeartbeatInterval] and
// [DefaultHeartbeatTimeout].
func WithSubscriberHeartbeat(interval, timeout time.Duration) SubscriberOption {
	return func(c *subscriberConfig) {
		c.heartbeat, c.errs = heartbeat(interval, timeout, c.errs)
	}
}

// WithSubscriberAllow accepts publishers only from source addresses
// within prefixes: a connection from any other is closed as it is
// accepted, before its greeting, and counted as Refused. It applies to a
// subscriber that binds its endpoint; one that connects refuses it.
// Publishers over ipc:// and inproc:// have no address and are accepted.
// No prefixes, the default, accepts every address.
func WithSubscriberAllow(prefixes ...netip.Prefix) SubscriberOption {
	return func(c *subscriberConfig) {
		c.allow, c.errs = allow(prefixes, c.errs)
	}
}

// WithSubscriberCurve speaks CURVE on every socket of the subscriber (see
// [Curve]): the SUB socket, as the server where it binds and the client
// where it connects, and the connection to the replay socket, as its
// client.
func WithSubscriberCurve(c Curve) SubscriberOption {
	return func(sc *subscriberConfig) { sc.curve = &c }
}

// WithSubscriberMemory sets the subscriber's memory budget in bytes (n >=
// [MinMemory]; [DefaultSubscriberMemory] by default), which bounds every
// kind of memory its publishers can make it hold, each to a share: the
// connections 3/8, at about 160 KiB each, which bounds the publishers of
// a subscriber that binds ([WithMaxPublishers] within it); the messages
// received and not yet handled 1/8; the bytes being read 1/8, which
// bounds the payload frame too ([WithMaxPayload] within it); the payloads
// of held jumps ([WithMaxGap]) 1/16; and what decoding a payload
// allocates 1/4, past which the payload is skipped as [ErrOversized]
// (beside Decode's own bound of 16 times its length and 1 MiB). The
// topics it follows ([WithMaxTopics]) and the decoder's kept memory take
// the last 1/16. A [Mirror] it feeds has a budget of its own
// ([WithMirrorMemory]).
func WithSubscriberMemory(n int64) SubscriberOption {
	return func(c *subscriberConfig) {
		c.memory, c.errs = memory("subscriber", n, c.errs)
	}
}

// WithSubscriberDirection sets whether the SUB socket binds its endpoint,
// for publishers that connect to it, or connects to a publisher that
// binds it. The default, [ByRule], binds a wildcard address ([Wildcard])
// and connects to any other. The replay endpoint
// ([WithReplayEndpoint]) is always connected to.
func WithSubscriberDirection(d Direction) SubscriberOption {
	return func(c *subscriberConfig) {
		if !d.valid() {
			c.errs = append(c.errs, fmt.Errorf("kvevents: unknown direction %d", int(d)))
		}
		c.dir = d
	}
}

// WithListen is WithSubscriberDirection([Bind]).
func WithListen() SubscriberOption { return WithSubscriberDirection(Bind) }

// WithSubscriberLogger sets where the subscriber logs the first
// occurrence of each kind of bad input (slog.Default() otherwise).
func WithSubscriberLogger(l *slog.Logger) SubscriberOption {
	return func(c *subscriberConfig) { c.log = l }
}

// NewSubscriber opens a SUB socket on endpoint, binding or connecting as
// [WithSubscriberDirection] says: by default it binds a wildcard address
// ([Wildcard]), where publishers that connect find it, and connects to
// any other, including the ipc:// and inproc:// endpoints a publisher
// binds. A socket that connects fails if no publisher answers within
// 2.5 s, with an error that says why (nothing binds the endpoint, another
// security mechanism...), and once connected it reconnects whenever the
// publisher goes away and comes back, however long it was gone. Call Run
// to receive.
func NewSubscriber(ctx context.Context, endpoint string, opts ...SubscriberOption) (*Subscriber, error) {
	c := subscriberConfig{
		memory: DefaultSubscriberMemory, maxPayload: DefaultMaxPayload, maxTopic: DefaultMaxTopicLength, maxTopics: DefaultMaxTopics,
		maxGap: DefaultMaxGap, maxPeers: DefaultMaxPeers, log: slog.Default(),
	}
	for _, o := range opts {
		o(&c)
	}
	if err := errors.Join(c.errs...); err != nil {
		return nil, err
	}
	mem := subscriberShares(c.memory)
	c.maxPayload = int(min(int64(c.maxPayload), mem.reading))
	bind, err := binds(endpoint, c.dir, Wildcard)
	if err != nil {
		return nil, fmt.Errorf("kvevents: SUB socket on %s: %w", endpoint, err)
	}
	if !bind && len(c.allow) > 0 {
		return nil, errors.New("kvevents: WithSubscriberAllow applies to a subscriber that binds, and this one connects")
	}
	curve, err := c.curve.sockets("WithSubscriberCurve", bind, !bind || c.replay != "")
	if err != nil {
		return nil, err
	}
	s := &Subscriber{
		replay:     c.replay,
		replayWait: c.replayWait,
		// A replay answer is [empty, topic, seq, payload], or without the
		// topic as vLLM first sent it: past the delimiter, no frame is
		// longer than a payload.
		limits:     zmtp.Limits{Frames: []int{0, c.maxPayload}, MaxFrames: 4},
		curve:      curve,
		maxTopics:  c.maxTopics,
		maxGap:     c.maxGap,
		once:       onceLog{log: c.log},
		streams:    make(map[string]*stream),
		heldBudget: int(mem.held),
	}
	s.decodeLimit = int(mem.decoding)
	if c.reuse {
		s.dec = &Decoder{limit: s.decodeLimit}
	}
	s.sub = zmtp.NewSub(zmtp.SubOptions{
		Limits: connections(mem.connections, c.maxPeers, zmtp.Limits{
			Frames:            []int{c.maxTopic, 8, c.maxPayload},
			MaxFrames:         3,
			QueueBytes:        int(mem.queue),
			ReadBytes:         int(mem.reading),
			MaxPeersPerSource: c.perAddress,
			Allow:             c.allow,
		}),
		OnViolation: s.violation,
		Heartbeat:   c.heartbeat,
		DialWait:    firstDialWait,
		Curve:       curve,
	})
	if bind {
		err = s.sub.Listen(endpoint)
	} else if err = s.sub.Dial(endpoint); err != nil && NothingBinds(err) {
		err = fmt.Errorf("%w (a subscriber that connects needs a publisher that binds %s; or bind it here and let the publishers connect)", err, endpoint)
	}
	if err != nil {
		s.sub.Close()
		return nil, fmt.Errorf("kvevents: SUB socket on %s: %w", endpoint, err)
	}
	if len(c.topics) == 0 {
		c.topics = []string{""}
	}
	s.topics = c.topics
	if s.replay == "" {
		s.subscribe()
	}
	context.AfterFunc(ctx, func() { _ = s.sub.Close() })
	return s, nil
}

// subscribe sends the subscriptions; from then on the publishers send.
func (s *Subscriber) subscribe() {
	for _, t := range s.topics {
		s.sub.Subscribe(t)
	}
}

// firstDialWait is how long NewSubscriber waits for a publisher to answer
// on an endpoint it connects to: a wrong endpoint fails at once rather than
// in silence, while a publisher that goes away later is waited for without
// end.
const firstDialWait = 2500 * time.Millisecond

// violation counts a connection the transport closed for breaking the
// protocol or a limit.
func (s *Subscriber) violation(err error) {
	switch {
	case errors.Is(err, zmtp.ErrFrameTooLong):
		s.bad(fmt.Errorf("%w: %v", ErrOversized, err))
	case errors.Is(err, zmtp.ErrTooManyPeers), errors.Is(err, zmtp.ErrNotAllowed):
		s.refuse(err)
	case errors.Is(err, zmtp.ErrTimeout):
		s.count(func(st *Stats) { st.TimedOut++ })
		s.logOnce(zmtp.ErrTimeout, err)
	default:
		s.bad(fmt.Errorf("%w: %v", ErrMalformed, err))
	}
}

// Addr returns the address the SUB socket listens on, or nil if it
// connected.
func (s *Subscriber) Addr() net.Addr { return s.sub.Addr() }

// Stats returns the counts so far. Safe to call while Run runs.
func (s *Subscriber) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Close closes the socket, which ends Run.
func (s *Subscriber) Close() error { return s.sub.Close() }

// Run receives messages and calls fn with each batch, in sequence order per
// topic, until ctx is done (it then closes the socket) or Close is called.
// A publisher that disconnects does not end it. fn is called from Run's
// goroutine, one call at a time. Call Run once.
func (s *Subscriber) Run(ctx context.Context, fn func(Message)) {
	defer func() {
		s.sub.Close()
		s.count(func(st *Stats) { st.Unhandled += int64(s.sub.Unread()) })
	}()
	if s.replay != "" {
		s.bootstrap(ctx, fn)
		s.subscribe()
	}
	for {
		frames, conn, err := s.sub.RecvFrom(ctx)
		if err != nil {
			return // ctx ended, or Close was called
		}
		if ctx.Err() != nil { // the queue is drained no further once ctx ends
			s.count(func(st *Stats) { st.Unhandled++ })
			return
		}
		s.handle(ctx, frames, conn, fn)
	}
}

// bootstrap delivers what the replay socket holds before the subscriber
// subscribes, so that a mirror that joins an engine catches up even if the
// engine sends nothing more. While an answer brings batches, it asks again
// from the one after the last (at most maxCatchUp times): the engine may
// have published more, or ended, meanwhile. The live stream starts after
// that, so it holds only later batches; what was published in between is
// a gap, filled by replay as any other. An answer without the topic frame
// (vLLM's first layout) cannot be told apart by topic and is passed over;
// the first live message then catches up as a join.
func (s *Subscriber) bootstrap(ctx context.Context, fn func(Message)) {
	// One connection for every request: a publisher that is closing
	// answers while its replay clients stay connected, however long each
	// answer takes to handle.
	var conn *zmtp.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	start := int64(0)
	for range maxCatchUp {
		next := start
		err := s.ask(ctx, &conn, start, func(topic []byte, seq int64, payload []byte) error {
			if topic == nil || !s.wants(topic) {
				return nil
			}
			next = max(next, seq+1)
			s.handle(ctx, [][]byte{topic, seqBytes(seq), payload}, 0, func(m Message) {
				if !m.Replayed { // a join's own catch-up is counted already
					m.Replayed = true
					s.count(func(st *Stats) { st.Replayed++ })
				}
				fn(m)
			})
			return nil
		})
		if err != nil {
			// Not a failure: nothing was asked for a gap. A publisher not
			// up yet sends from 0, and the stream shows any gap a failed
			// or cut answer leaves, for replay to fill then.
			s.logOnce(errStartReplay, fmt.Errorf("kvevents: replay from %s at start: %w", s.replay, err))
			return
		}
		if next == start || ctx.Err() != nil {
			return
		}
		start = next
	}
}

// errStartReplay keys the one log line of start-up replays that failed.
var errStartReplay = errors.New("kvevents: no replay at start")

// CatchUp, called once Run has returned, asks the replay socket for what
// was published after the last batch Run delivered of the replay's topic,
// and delivers it to fn as Run does, marked Replayed: the stream's last
// batches may have been on their way when Run ended, or dropped by a
// publisher whose queue for this subscriber was full, and no later
// message would have told. What the buffer no longer holds is counted
// missed, on the batch that follows it. CatchUp reports whether the
// replay socket answered: a publisher that has gone away cannot say what
// the stream missed at its end, and a request that fails is not counted
// as a failure. An answer without the topic frame (vLLM's first layout)
// is passed over. The wait is a replay request's, within ctx. Without a
// replay endpoint CatchUp does nothing and returns false.
func (s *Subscriber) CatchUp(ctx context.Context, fn func(Message)) (answered bool) {
	if s.replay == "" {
		return false
	}
	// From where the replay's topic stopped, once an answer named it;
	// before that, the whole buffer, past what each topic holds.
	start := int64(0)
	if s.replayTopic != nil {
		if st := s.streams[*s.replayTopic]; st != nil {
			start = st.next
		}
	}
	var conn *zmtp.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	err := s.ask(ctx, &conn, start, func(topic []byte, seq int64, payload []byte) error {
		if topic == nil || !s.wants(topic) {
			return nil
		}
		st, _ := s.follow(string(topic), fn)
		if seq < st.next {
			return nil // delivered already
		}
		s.release(st) // the publisher's own buffer settles a held jump
		m := Message{Topic: string(topic), Seq: seq, Replayed: true, Missed: s.lost(string(topic), st.next, seq)}
		st.next, st.last = seq+1, checksum(payload)
		s.deliver(m, payload, fn)
		return nil
	})
	return err == nil
}

// maxCatchUp bounds the replay requests of a bootstrap, for an engine that
// publishes faster than the subscriber takes its answers.
const maxCatchUp = 16

// wants reports whether topic matches a subscription.
func (s *Subscriber) wants(topic []byte) bool {
	for _, t := range s.topics {
		if strings.HasPrefix(string(topic), t) {
			return true
		}
	}
	return false
}

// handle checks one message's frames and sequence, fills a gap by replay,
// and delivers. conn numbers the connection the message came on.
func (s *Subscriber) handle(ctx context.Context, frames [][]byte, conn uint64, fn func(Message)) {
	if len(frames) != 3 || len(frames[1]) != 8 {
		s.bad(fmt.Errorf("%w: %d frames, want topic, 8-byte sequence, payload", ErrMalformed, len(frames)))
		return
	}
	topic, payload := string(frames[0]), frames[2]
	seq := int64(binary.BigEndian.Uint64(frames[1]))
	if seq < 0 || seq == math.MaxInt64 {
		// No publisher sends a negative number, nor gets to the last
		// one, after which the next would overflow.
		s.bad(fmt.Errorf("%w: sequence %d", ErrMalformed, seq))
		return
	}
	st, seen := s.follow(topic, fn)
	m := Message{Topic: topic, Seq: seq}
	sum := checksum(payload)
	switch {
	case seen && seq == st.next && conn != st.conn && s.replaced(ctx, topic, st):
		// On a new connection, the number that would follow came from a
		// publisher whose batch before it is not the one delivered: a new
		// publisher that happens to be where the old one stopped.
		s.dropHeld(st)
		s.count(func(st *Stats) { st.Restarts++ })
		m.Missed, m.Restart = s.catchUp(ctx, topic, 0, seq, true, fn)
	case seen && seq == st.next:
		s.dropHeld(st)
	case seen && seq == st.next-1 && sum == st.last:
		s.count(func(st *Stats) { st.Stale++ })
		return
	case seen && seq < st.next:
		// A new publisher: start the topic over from 0.
		s.dropHeld(st)
		s.count(func(st *Stats) { st.Restarts++ })
		m.Missed, m.Restart = s.catchUp(ctx, topic, 0, seq, true, fn)
	case seen && seq-st.next > s.maxGap:
		if st.held < 0 || seq != st.held+1 {
			s.dropHeld(st)
			st.held = seq
			if s.heldBytes+len(payload) <= s.heldBudget {
				st.heldPayload = payload
				s.heldBytes += len(payload)
			}
			return
		}
		// The held jump is confirmed: deliver it, then this message. A
		// held batch whose payload was not kept comes back by replay.
		held, heldPayload := st.held, st.heldPayload
		s.release(st)
		if heldPayload == nil {
			m.Missed, _ = s.catchUp(ctx, topic, st.next, seq, false, fn)
			break
		}
		missed, _ := s.catchUp(ctx, topic, st.next, held, false, fn)
		s.deliver(Message{Topic: topic, Seq: held, Missed: missed}, heldPayload, fn)
	default:
		// A first message (a join: what came before it is missed unless
		// replay has it) or a jump forward within maxGap: a gap.
		s.dropHeld(st)
		m.Missed, _ = s.catchUp(ctx, topic, st.next, seq, false, fn)
	}
	st.next, st.last, st.conn = seq+1, sum, conn
	s.deliver(m, payload, fn)
}

// follow returns topic's stream, and whether it was followed already, and
// makes it the one heard from last. A new topic past maxTopics releases
// the topic heard from least recently, telling fn (Message.Released): a
// new engine is never locked out, and one gone silent makes room. O(1).
func (s *Subscriber) follow(topic string, fn func(Message)) (st *stream, seen bool) {
	st, seen = s.streams[topic]
	if !seen {
		if len(s.streams) >= s.maxTopics {
			old := s.oldest
			s.unlink(old)
			delete(s.streams, old.topic)
			s.release(old)
			s.count(func(st *Stats) { st.Released++ })
			s.logOnce(errTopics, fmt.Errorf("kvevents: released topic %q, heard from least recently of the %d a subscriber follows, for %q", old.topic, s.maxTopics, topic))
			fn(Message{Topic: old.topic, Released: true})
		}
		st = &stream{topic: topic, held: -1}
		s.streams[topic] = st
	} else if st == s.newest {
		return st, true
	} else {
		s.unlink(st)
	}
	st.older, s.newest = s.newest, st
	if st.older != nil {
		st.older.newer = st
	} else {
		s.oldest = st
	}
	return st, seen
}

// unlink takes st out of the list of streams by the last message heard.
func (s *Subscriber) unlink(st *stream) {
	if st.newer != nil {
		st.newer.older = st.older
	} else {
		s.newest = st.older
	}
	if st.older != nil {
		st.older.newer = st.newer
	} else {
		s.oldest = st.newer
	}
	st.newer, st.older = nil, nil
}

// replaced reports whether the publisher now on topic's replay socket is
// not the one whose batches st follows: its batch numbered st.next-1 is
// not the one delivered. Without a replay endpoint, or an answer with that
// batch, it cannot tell, and says no.
func (s *Subscriber) replaced(ctx context.Context, topic string, st *stream) bool {
	if s.replay == "" {
		return false
	}
	want := st.next - 1
	found, differs := false, false
	s.requestReplay(ctx, topic, want, func(seq int64, payload []byte) {
		if seq == want {
			found, differs = true, checksum(payload) != st.last
		}
	})
	return found && differs
}

// checksum hashes payload: two payloads of one sequence number that
// differ are two publishers', not a duplicate. It runs on every message,
// so it is maphash's, which reads words rather than bytes.
func checksum(payload []byte) uint64 { return maphash.Bytes(payloadSeed, payload) }

// payloadSeed seeds checksum; checksums are compared within a process only.
var payloadSeed = maphash.MakeSeed()

// dropHeld drops st's held jump, if any, as refused: the topic's sequence
// went on without it.
func (s *Subscriber) dropHeld(st *stream) {
	if st.held >= 0 {
		s.release(st)
		s.refuse(errJump)
	}
}

// release forgets st's held jump and gives its payload's bytes back to the
// budget.
func (s *Subscriber) release(st *stream) {
	s.heldBytes -= len(st.heldPayload)
	st.held, st.heldPayload = -1, nil
}

// errJump keys the one log line of unconfirmed jumps.
var errJump = errors.New("kvevents: a sequence jump that the next message did not confirm")

// catchUp delivers, by replay, what it can of the batches numbered from to
// before (excluded), each with the count of lost ones just before it, and
// returns the count lost just before before. With restart set, the first
// batch delivered is marked Restart; if none is, restart is returned for
// the caller's message.
func (s *Subscriber) catchUp(ctx context.Context, topic string, from, before int64, restart bool, fn func(Message)) (missed int64, stillRestart bool) {
	expect := from
	if s.replay != "" && from < before {
		s.requestReplay(ctx, topic, from, func(seq int64, payload []byte) {
			if seq < expect || seq >= before {
				return // delivered already, or past the gap: the live stream has those
			}
			m := Message{Topic: topic, Seq: seq, Replayed: true, Missed: s.lost(topic, expect, seq), Restart: restart}
			restart = false
			s.deliver(m, payload, fn)
			expect = seq + 1
		})
	}
	return s.lost(topic, expect, before), restart
}

// lost counts and logs the sequence numbers from to before (excluded) as
// missed, and returns how many they are.
func (s *Subscriber) lost(topic string, from, before int64) int64 {
	n := before - from
	if n > 0 {
		s.count(func(st *Stats) { st.Gaps++; st.Missed += n })
		s.logOnce(ErrGap, fmt.Errorf("%w: topic %q lost %d batches before %d", ErrGap, topic, n, before))
	}
	return n
}

// requestReplay asks the replay socket for every buffered batch of topic
// from start on and calls each with those that arrive before the end
// marker or a timeout. An answer may carry the topic frame (as current
// vLLM sends it) or not (as vLLM first did); one for another topic means
// the endpoint replays another publisher, and fails the request.
func (s *Subscriber) requestReplay(ctx context.Context, topic string, start int64, each func(seq int64, payload []byte)) {
	var conn *zmtp.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	err := s.ask(ctx, &conn, start, func(got []byte, seq int64, payload []byte) error {
		if got != nil && string(got) != topic {
			return fmt.Errorf("an answer for topic %q, not %q: the endpoint replays another publisher", got, topic)
		}
		each(seq, payload)
		return nil
	})
	if err != nil {
		s.count(func(st *Stats) { st.ReplayFailures++ })
		s.logOnce(errReplay, fmt.Errorf("kvevents: replay from %s: %w", s.replay, err))
	}
}

// replayStretch is how many times the per-message timeout a whole replay
// answer may take: an answer that keeps coming is not cut short, nor can a
// trickle hold up the live stream for long.
const replayStretch = 30

// ask sends the replay socket a request from start, on the connection
// *conn or, if it is nil, on one it dials and leaves in *conn, and calls
// each with every batch of the answer, its topic nil when the answer has
// no topic frame, until the end marker, a timeout, or an error from each.
// The answer is read to its end, as the publisher expects, and the
// connection stays open for the next request; the caller closes it. A
// request that fails closes the connection and returns why; the caller
// says whether that is a failure to count.
func (s *Subscriber) ask(ctx context.Context, conn **zmtp.Conn, start int64, each func(topic []byte, seq int64, payload []byte) error) error {
	err := s.askOnce(ctx, conn, start, each)
	if err != nil && *conn != nil {
		(*conn).Close()
		*conn = nil
	}
	return err
}

func (s *Subscriber) askOnce(ctx context.Context, conn **zmtp.Conn, start int64, each func(topic []byte, seq int64, payload []byte) error) error {
	ctx, cancel := context.WithTimeout(ctx, replayStretch*s.replayWait)
	defer cancel()
	last, _ := ctx.Deadline()
	wait := func() time.Time {
		if next := time.Now().Add(s.replayWait); next.Before(last) {
			return next
		}
		return last
	}
	if *conn == nil {
		id := make([]byte, 8)
		_, _ = rand.Read(id) // a unique identity, so the ROUTER answers this socket only
		dialCtx, cancelDial := context.WithDeadline(ctx, wait())
		c, err := zmtp.Dial(dialCtx, s.replay, zmtp.Dealer, id, s.limits, s.curve)
		cancelDial()
		if err != nil {
			return err
		}
		*conn = c
	}
	c := *conn
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	c.SetDeadline(wait())
	if err := c.WriteMsg([][]byte{nil, seqBytes(start)}); err != nil {
		return err
	}
	for {
		f, err := c.ReadMsg()
		if err != nil {
			return err
		}
		topic, seq, payload, err := parseReplay(f)
		if err != nil {
			return err
		}
		if topic != nil && (s.replayTopic == nil || *s.replayTopic != string(topic)) {
			t := string(topic)
			s.replayTopic = &t
		}
		if seq == endSeq {
			return nil
		}
		if err := each(topic, seq, payload); err != nil {
			return err
		}
		c.SetDeadline(wait())
	}
}

// parseReplay reads one replay answer: [empty, topic, seq, payload] as
// current vLLM sends it, or [empty, seq, payload] as it first did; the
// empty delimiter may be missing too. topic is nil when the answer has
// none.
func parseReplay(f [][]byte) (topic []byte, seq int64, payload []byte, err error) {
	if len(f) > 0 && len(f[0]) == 0 && (len(f) == 4 || len(f) == 3 && len(f[1]) == 8) {
		f = f[1:] // the ROUTER's empty delimiter
	}
	if len(f) == 3 {
		topic, f = f[0], f[1:]
		if topic == nil {
			topic = []byte{}
		}
	}
	if len(f) != 2 || len(f[0]) != 8 {
		return nil, 0, nil, fmt.Errorf("%w: a replay answer of %d frames", ErrMalformed, len(f))
	}
	return topic, int64(binary.BigEndian.Uint64(f[0])), f[1], nil
}

// errReplay keys the one log line of failed replay requests.
var errReplay = errors.New("kvevents: replay failed")

// deliver decodes payload into m and calls fn, counting what was skipped.
func (s *Subscriber) deliver(m Message, payload []byte, fn func(Message)) {
	var b EventBatch
	var skipped Skipped
	var err error
	if s.dec != nil {
		b, skipped, err = s.dec.Decode(payload)
	} else {
		b, skipped, err = decode(payload, nil, s.decodeLimit)
	}
	if err != nil {
		s.bad(err)
		return
	}
	for _, e := range skipped.Errs {
		s.logOnce(kindOf(e), e)
	}
	m.Batch = b
	s.count(func(st *Stats) {
		st.UnknownEvent += int64(skipped.UnknownEvents)
		st.FieldType += int64(skipped.MistypedEvents)
		st.Delivered++
		if m.Replayed {
			st.Replayed++
		}
	})
	fn(m)
}

// kindOf returns the kind of bad input err is.
func kindOf(err error) error {
	for _, k := range []error{ErrOversized, ErrUnknownEventType, ErrFieldType, ErrMalformed} {
		if errors.Is(err, k) {
			return k
		}
	}
	return ErrMalformed
}

// bad counts err under its kind and logs the kind's first occurrence.
func (s *Subscriber) bad(err error) {
	kind := kindOf(err)
	s.count(func(st *Stats) {
		switch kind {
		case ErrOversized:
			st.Oversized++
		case ErrUnknownEventType:
			st.UnknownEvent++
		case ErrFieldType:
			st.FieldType++
		default:
			st.Malformed++
		}
	})
	s.logOnce(kind, err)
}

// refuse counts a message or connection dropped by a limit and logs the
// first of each kind.
func (s *Subscriber) refuse(err error) {
	s.count(func(st *Stats) { st.Refused++ })
	kind := errTopics
	for _, k := range []error{errJump, zmtp.ErrTooManyPeers, zmtp.ErrNotAllowed} {
		if errors.Is(err, k) {
			kind = k
		}
	}
	s.logOnce(kind, err)
}

// errTopics keys the one log line of released topics.
var errTopics = errors.New("kvevents: too many topics")

func (s *Subscriber) count(f func(*Stats)) {
	s.mu.Lock()
	f(&s.stats)
	s.mu.Unlock()
}

// logOnce logs err the first time its kind occurs; the counts in Stats
// tell how often it did since.
func (s *Subscriber) logOnce(kind, err error) {
	msg := "kvevents: skipping bad input; later occurrences are only counted"
	switch kind {
	case ErrGap:
		msg = "kvevents: batches lost; later losses are only counted"
	case errReplay:
		msg = "kvevents: a replay request failed; later failures are only counted"
	case errTopics:
		msg = "kvevents: a topic released to follow a new one past the topic limit; later ones are only counted"
	case errStartReplay:
		msg = "kvevents: no replay at start: the gaps the stream shows are asked for as they come"
	case zmtp.ErrTooManyPeers:
		msg = "kvevents: refusing a publisher's connection past a connection limit; later ones are only counted"
	case zmtp.ErrTimeout:
		msg = "kvevents: dropping a publisher's connection gone silent; later ones are only counted"
	case zmtp.ErrNotAllowed:
		msg = "kvevents: refusing a publisher's connection from an address outside the allowed ones; later ones are only counted"
	}
	s.once.warn(kind, msg, err)
}
