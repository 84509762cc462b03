package kvevents

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
)

// Subscriber defaults.
const (
	// DefaultMaxPayload is the longest payload a [Subscriber] decodes unless
	// told otherwise: far above a real batch, low enough that one hostile
	// message cannot take a mirror's memory.
	DefaultMaxPayload = 16 << 20
	// DefaultReplayTimeout bounds one replay request, from dial to the end
	// marker.
	DefaultReplayTimeout = 2 * time.Second
)

// Message is one decoded batch as a [Subscriber] delivers it.
type Message struct {
	Topic string     // the topic frame
	Seq   int64      // the sequence number
	Batch EventBatch // the events that decoded; see Stats for those skipped
	// Missed counts the sequence numbers just before Seq that were never
	// delivered: lost in transit and not recovered by replay. A consumer
	// mirroring state is out of date by that many batches.
	Missed int64
	// Restart is set when the sequence went back to 0: the publisher
	// restarted, and what it published before is gone.
	Restart bool
	// Replayed is set when the batch came from the replay socket.
	Replayed bool
}

// Stats counts what a [Subscriber] received.
type Stats struct {
	Delivered int64 // batches passed to the handler, replayed ones included
	Replayed  int64 // of Delivered, those that came through replay
	Missed    int64 // sequence numbers never delivered (see Message.Missed)
	Stale     int64 // messages at or below a sequence already seen, dropped
	// Bad input, each skipped (see the errors of the same names).
	Malformed    int64 // whole messages
	Oversized    int64 // whole messages
	UnknownEvent int64 // single events
	FieldType    int64 // single events, or whole batches for a batch field
	Gaps         int64 // runs of missed sequence numbers
}

// Subscriber receives event batches on a SUB socket, checks each topic's
// sequence numbers, and on a gap asks the publisher's replay socket, if it
// has one, for the missing batches. Bad input is counted ([Stats]), logged
// once per kind and skipped; it never stops the subscriber.
type Subscriber struct {
	sub        zmq4.Socket
	replay     string
	replayWait time.Duration
	maxPayload int
	log        *slog.Logger

	next map[string]int64 // per topic, the sequence number expected next; Run's goroutine only

	mu     sync.Mutex
	stats  Stats
	logged map[error]bool
}

// SubscriberOption configures a [Subscriber] made by [NewSubscriber].
type SubscriberOption func(*subscriberConfig)

type subscriberConfig struct {
	topics     []string
	replay     string
	replayWait time.Duration
	maxPayload int
	listen     bool
	log        *slog.Logger
	errs       []error
}

// WithSubscription receives only the topics that start with prefix; give it
// once per prefix. Without it a subscriber receives every topic.
func WithSubscription(prefix string) SubscriberOption {
	return func(c *subscriberConfig) { c.topics = append(c.topics, prefix) }
}

// WithReplayEndpoint asks the publisher's ROUTER socket at endpoint for
// missed batches, waiting at most timeout per request (timeout > 0;
// [DefaultReplayTimeout] is a fair choice). The endpoint serves one
// publisher: with several topics from several publishers, replay fills
// the gaps of the topic whose publisher it is.
func WithReplayEndpoint(endpoint string, timeout time.Duration) SubscriberOption {
	return func(c *subscriberConfig) {
		if timeout <= 0 {
			c.errs = append(c.errs, fmt.Errorf("kvevents: replay timeout %v, want > 0", timeout))
		}
		c.replay, c.replayWait = endpoint, timeout
	}
}

// WithMaxPayload sets the longest payload decoded (n >= 1); longer ones
// count as [ErrOversized]. The default is [DefaultMaxPayload].
func WithMaxPayload(n int) SubscriberOption {
	return func(c *subscriberConfig) {
		if n < 1 {
			c.errs = append(c.errs, fmt.Errorf("kvevents: max payload %d, want at least 1", n))
		}
		c.maxPayload = n
	}
}

// WithListen makes the subscriber bind its endpoint even when it is not a
// wildcard, such as 127.0.0.1:0, for publishers that connect to it.
func WithListen() SubscriberOption {
	return func(c *subscriberConfig) { c.listen = true }
}

// WithSubscriberLogger sets where the subscriber logs the first
// occurrence of each kind of bad input (slog.Default() otherwise).
func WithSubscriberLogger(l *slog.Logger) SubscriberOption {
	return func(c *subscriberConfig) { c.log = l }
}

// NewSubscriber opens a SUB socket on endpoint. It binds when the address
// is a wildcard ("*" or "::"), where publishers that connect (by [Binds])
// find it, or with [WithListen]; otherwise it connects, including to the
// ipc:// and inproc:// endpoints a publisher binds. A socket that connects
// fails if no publisher answers within 2.5 s, and once connected it
// reconnects whenever the publisher goes away and comes back, however long
// it was gone. Call Run to receive.
func NewSubscriber(ctx context.Context, endpoint string, opts ...SubscriberOption) (*Subscriber, error) {
	c := subscriberConfig{maxPayload: DefaultMaxPayload, log: slog.Default()}
	for _, o := range opts {
		o(&c)
	}
	if err := errors.Join(c.errs...); err != nil {
		return nil, err
	}
	connect := !c.listen && !wildcard(endpoint)
	s := &Subscriber{
		// A connecting socket redials without end when its publisher goes
		// away: an engine that restarts is often down for longer than any
		// fixed number of retries would wait.
		sub:        zmq4.NewSub(ctx, zmq4.WithAutomaticReconnect(connect), zmq4.WithDialerMaxRetries(-1)),
		replay:     c.replay,
		replayWait: c.replayWait,
		maxPayload: c.maxPayload,
		log:        c.log,
		next:       make(map[string]int64),
		logged:     make(map[error]bool),
	}
	var err error
	if connect {
		err = s.dialFirst(endpoint)
	} else {
		err = s.sub.Listen(endpoint)
	}
	if err != nil {
		err = fmt.Errorf("kvevents: SUB socket on %s: %w", endpoint, err)
		s.sub.Close()
		return nil, err
	}
	if len(c.topics) == 0 {
		c.topics = []string{""}
	}
	for _, t := range c.topics {
		if err := s.sub.SetOption(zmq4.OptionSubscribe, t); err != nil {
			s.sub.Close()
			return nil, fmt.Errorf("kvevents: subscribe to %q: %w", t, err)
		}
	}
	return s, nil
}

// firstDialWait is how long NewSubscriber waits for a publisher to answer
// on an endpoint it connects to: a wrong endpoint fails at once rather than
// in silence, while a publisher that goes away later is waited for without
// end.
const firstDialWait = 2500 * time.Millisecond

// dialFirst connects the socket to endpoint, failing if no publisher
// answers within firstDialWait. The socket redials without end, so the
// dial runs apart and closing the socket on failure ends it.
func (s *Subscriber) dialFirst(endpoint string) error {
	done := make(chan error, 1)
	go func() { done <- s.sub.Dial(endpoint) }()
	select {
	case err := <-done:
		return err
	case <-time.After(firstDialWait):
		return fmt.Errorf("no publisher answered within %v", firstDialWait)
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
// topic, until ctx is done (it then closes the socket), the socket's
// context (NewSubscriber's) ends or Close is called. A publisher that
// disconnects does not end it. fn is called from Run's goroutine, one call
// at a time. Call Run once.
func (s *Subscriber) Run(ctx context.Context, fn func(Message)) {
	stop := context.AfterFunc(ctx, func() { s.sub.Close() })
	defer stop()
	for {
		msg, err := s.sub.Recv()
		switch {
		case err == nil:
		case ctx.Err() != nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return // ctx or the socket's context ended, or Close was called
		default:
			continue // one peer's connection ended; the socket lives on
		}
		s.handle(ctx, msg.Frames, fn)
	}
}

// handle checks one message's frames and sequence, fills a gap by replay,
// and delivers.
func (s *Subscriber) handle(ctx context.Context, frames [][]byte, fn func(Message)) {
	if len(frames) != 3 || len(frames[1]) != 8 {
		s.bad(fmt.Errorf("%w: %d frames, want topic, 8-byte sequence, payload", ErrMalformed, len(frames)))
		return
	}
	topic := string(frames[0])
	seq := int64(binary.BigEndian.Uint64(frames[1]))
	next, seen := s.next[topic]
	m := Message{Topic: topic, Seq: seq}
	switch {
	case seq < 0:
		s.bad(fmt.Errorf("%w: sequence %d", ErrMalformed, seq))
		return
	case seen && seq == 0 && next > 0:
		m.Restart = true
	case seq < next:
		s.count(func(st *Stats) { st.Stale++ })
		return
	case seq > next:
		m.Missed = s.fill(ctx, topic, next, seq, fn)
	}
	s.next[topic] = seq + 1
	s.deliver(m, frames[2], fn)
}

// fill asks for the batches numbered from to before (excluded) and
// delivers those that come, in order, each with the count of lost ones
// just before it; it returns the count lost just before before.
func (s *Subscriber) fill(ctx context.Context, topic string, from, before int64, fn func(Message)) int64 {
	expect := from
	if s.replay != "" {
		for _, r := range s.requestReplay(ctx, from) {
			if r.seq < expect || r.seq >= before {
				continue // delivered already, or past the gap: the live stream has those
			}
			m := Message{Topic: topic, Seq: r.seq, Replayed: true, Missed: s.lost(topic, expect, r.seq)}
			s.deliver(m, r.payload, fn)
			expect = r.seq + 1
		}
	}
	return s.lost(topic, expect, before)
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

// requestReplay asks the replay socket for every buffered batch from start
// on and returns what arrives before the end marker or the timeout.
func (s *Subscriber) requestReplay(ctx context.Context, start int64) []buffered {
	ctx, cancel := context.WithTimeout(ctx, s.replayWait)
	defer cancel()
	id := make([]byte, 8)
	_, _ = rand.Read(id) // a unique identity, so the ROUTER answers this socket only
	d := zmq4.NewDealer(ctx, zmq4.WithID(id), zmq4.WithDialerMaxRetries(1))
	defer d.Close()
	fail := func(err error) []buffered {
		s.logOnce(errReplay, fmt.Errorf("kvevents: replay from %s: %w", s.replay, err))
		return nil
	}
	if err := d.Dial(s.replay); err != nil {
		return fail(err)
	}
	if err := d.SendMulti(zmq4.NewMsgFrom(nil, seqBytes(start))); err != nil {
		return fail(err)
	}
	var out []buffered
	for {
		msg, err := d.Recv()
		if err != nil {
			return append(out, fail(err)...)
		}
		f := msg.Frames
		if len(f) == 3 && len(f[0]) == 0 {
			f = f[1:] // the ROUTER's empty delimiter
		}
		if len(f) != 2 || len(f[0]) != 8 {
			return append(out, fail(fmt.Errorf("%w: replay answer of %d frames", ErrMalformed, len(msg.Frames)))...)
		}
		seq := int64(binary.BigEndian.Uint64(f[0]))
		if seq == endSeq {
			return out
		}
		out = append(out, buffered{seq, f[1]})
	}
}

// errReplay keys the one log line of failed replay requests.
var errReplay = errors.New("kvevents: replay failed")

// deliver decodes payload into m and calls fn, counting what was skipped.
func (s *Subscriber) deliver(m Message, payload []byte, fn func(Message)) {
	if len(payload) > s.maxPayload {
		s.bad(fmt.Errorf("%w: %d bytes, limit %d", ErrOversized, len(payload), s.maxPayload))
		return
	}
	b, skipped, err := Decode(payload)
	if err != nil {
		s.bad(err)
		return
	}
	for _, e := range skipped {
		s.bad(e)
	}
	m.Batch = b
	s.count(func(st *Stats) {
		st.Delivered++
		if m.Replayed {
			st.Replayed++
		}
	})
	fn(m)
}

// bad counts err under its kind and logs the kind's first occurrence.
func (s *Subscriber) bad(err error) {
	var kind error
	for _, k := range []error{ErrOversized, ErrUnknownEventType, ErrFieldType, ErrMalformed} {
		if errors.Is(err, k) {
			kind = k
			break
		}
	}
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
	if kind == nil {
		kind = ErrMalformed
	}
	s.logOnce(kind, err)
}

func (s *Subscriber) count(f func(*Stats)) {
	s.mu.Lock()
	f(&s.stats)
	s.mu.Unlock()
}

// logOnce logs err the first time its kind occurs; the counts in Stats
// tell how often it did since.
func (s *Subscriber) logOnce(kind, err error) {
	s.mu.Lock()
	first := !s.logged[kind]
	s.logged[kind] = true
	s.mu.Unlock()
	if first {
		s.log.Warn("kvevents: skipping bad input; later occurrences are only counted", "err", err)
	}
}
