package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
)

// DefaultReplayBuffer is how many batches a [Publisher] keeps for replay
// unless told otherwise: vLLM's buffer_steps.
const DefaultReplayBuffer = 10_000

// endSeq is the sequence number that ends a replay: -1, as 8 signed bytes.
const endSeq = -1

// Publisher sends event batches as vLLM's ZmqEventPublisher does: on a PUB
// socket, each message the three frames topic, sequence number (8 bytes,
// big-endian, from 0, one more per message) and msgpack payload. With a
// replay endpoint it also serves a ROUTER socket from which a subscriber
// asks for the buffered batches from a sequence number on.
//
// A Publisher is safe for concurrent use; batches are numbered in the
// order Publish is called.
type Publisher struct {
	pub    zmq4.Socket
	replay zmq4.Socket // nil without a replay endpoint
	topic  []byte
	enc    Encoding
	log    *slog.Logger
	linger time.Duration

	mu     sync.Mutex
	seq    int64
	buf    []buffered // ring of the latest batches, for replay
	head   int        // index of the oldest entry of buf once it is full
	bufCap int

	done chan struct{} // closed when the replay goroutine returns
}

// buffered is one published batch kept for replay.
type buffered struct {
	seq     int64
	payload []byte
}

// PublisherOption configures a [Publisher] made by [NewPublisher].
type PublisherOption func(*publisherConfig)

type publisherConfig struct {
	topic  string
	replay string
	buffer int
	enc    Encoding
	log    *slog.Logger
	linger time.Duration
	errs   []error
}

// DefaultLinger is how long Close waits, unless told otherwise, for the
// messages still queued to reach the subscribers.
const DefaultLinger = time.Second

// WithLinger sets how long Close waits for queued messages to be written
// (d >= 0). The ZeroMQ library queues every message and writes it out in
// the background without telling when it is done, so Close cannot wait
// for exactly that; 0 closes at once, as vLLM does, and may drop the tail.
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

// WithEncoding sets the payload encoding ([EncodingMap] by default).
func WithEncoding(e Encoding) PublisherOption {
	return func(c *publisherConfig) {
		if e != EncodingMap && e != EncodingArray {
			c.errs = append(c.errs, fmt.Errorf("kvevents: unknown encoding %d", e))
		}
		c.enc = e
	}
}

// WithPublisherLogger sets where the publisher logs replay requests it
// cannot serve (slog.Default() otherwise): the first malformed request, once,
// so that a misbehaving client cannot flood the log, and every answer it
// could not send.
func WithPublisherLogger(l *slog.Logger) PublisherOption {
	return func(c *publisherConfig) { c.log = l }
}

// NewPublisher opens a PUB socket on endpoint, binding or connecting as
// [Binds] says, and the replay socket if [WithReplay] asks for one. The
// sockets live until Close or until ctx is done.
func NewPublisher(ctx context.Context, endpoint string, opts ...PublisherOption) (*Publisher, error) {
	c := publisherConfig{log: slog.Default(), linger: DefaultLinger}
	for _, o := range opts {
		o(&c)
	}
	if err := errors.Join(c.errs...); err != nil {
		return nil, err
	}
	p := &Publisher{
		pub:    zmq4.NewPub(ctx),
		topic:  []byte(c.topic),
		enc:    c.enc,
		log:    c.log,
		bufCap: c.buffer,
		linger: c.linger,
		done:   make(chan struct{}),
	}
	if err := open(p.pub, endpoint); err != nil {
		p.pub.Close()
		return nil, err
	}
	if c.replay == "" {
		close(p.done)
		return p, nil
	}
	p.replay = zmq4.NewRouter(ctx)
	if err := p.replay.Listen(c.replay); err != nil {
		p.pub.Close()
		p.replay.Close()
		return nil, fmt.Errorf("kvevents: replay socket on %s: %w", c.replay, err)
	}
	go p.serveReplay()
	return p, nil
}

// open binds or connects s to endpoint by vLLM's rule.
func open(s zmq4.Socket, endpoint string) error {
	var err error
	if Binds(endpoint) {
		err = s.Listen(endpoint)
	} else {
		err = s.Dial(endpoint)
	}
	if err != nil {
		return fmt.Errorf("kvevents: %s socket on %s: %w", s.Type(), endpoint, err)
	}
	return nil
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

// Publish encodes b, sends it with the next sequence number and keeps it
// for replay, and returns that number. ZeroMQ drops the messages of a
// subscriber that has not finished connecting: that is what replay is for.
func (p *Publisher) Publish(b *EventBatch) (seq int64, err error) {
	payload, err := Encode(b, p.enc)
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	seq = p.seq
	if err := p.pub.SendMulti(zmq4.NewMsgFrom(p.topic, seqBytes(seq), payload)); err != nil {
		return 0, fmt.Errorf("kvevents: publish %d: %w", seq, err)
	}
	p.seq++
	if p.bufCap > 0 {
		if len(p.buf) < p.bufCap {
			p.buf = append(p.buf, buffered{seq, payload})
		} else {
			p.buf[p.head] = buffered{seq, payload}
			p.head = (p.head + 1) % p.bufCap
		}
	}
	return seq, nil
}

// Published returns how many batches Publish has sent.
func (p *Publisher) Published() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seq
}

// Close waits for the linger time ([WithLinger]) and closes the sockets.
// Messages not written to a peer by then are lost.
func (p *Publisher) Close() error {
	if p.linger > 0 && p.Published() > 0 {
		time.Sleep(p.linger)
	}
	err := p.pub.Close()
	if p.replay != nil {
		err = errors.Join(err, p.replay.Close())
	}
	<-p.done
	return err
}

// serveReplay answers replay requests until the socket closes. A request is
// the frames (identity, empty, start); the answer is one (identity, empty,
// seq, payload) message per buffered batch from start on, then (identity,
// empty, -1, empty).
func (p *Publisher) serveReplay() {
	defer close(p.done)
	warned := false
	for {
		msg, err := p.replay.Recv()
		if err != nil {
			return // closed
		}
		f := msg.Frames
		if len(f) != 3 || len(f[1]) != 0 || len(f[2]) != 8 {
			if !warned {
				p.log.Warn("kvevents: ignoring malformed replay requests", "frames", len(f))
				warned = true
			}
			continue
		}
		id := f[0]
		start := int64(binary.BigEndian.Uint64(f[2]))
		for _, b := range p.since(start) {
			if err = p.replay.SendMulti(zmq4.NewMsgFrom(id, nil, seqBytes(b.seq), b.payload)); err != nil {
				break
			}
		}
		if err == nil {
			err = p.replay.SendMulti(zmq4.NewMsgFrom(id, nil, seqBytes(endSeq), nil))
		}
		if err != nil {
			p.log.Warn("kvevents: could not answer a replay request", "start", start, "err", err)
		}
	}
}

// since returns the buffered batches numbered start or later, oldest first.
func (p *Publisher) since(start int64) []buffered {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []buffered
	for i := range p.buf {
		b := p.buf[(p.head+i)%len(p.buf)]
		if b.seq >= start {
			out = append(out, b)
		}
	}
	return out
}
