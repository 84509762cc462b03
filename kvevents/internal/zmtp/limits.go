package zmtp

import (
	"errors"
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
	// ErrTooManyPeers: a listening socket already kept Limits.MaxPeers
	// connections and closed a new one.
	ErrTooManyPeers = errors.New("zmtp: too many peers")
	// ErrClosed is returned by a socket's methods after Close.
	ErrClosed = errors.New("zmtp: socket closed")
)

// Defaults of the zero fields of Limits and of the options.
const (
	DefaultMaxFrame         = 1 << 20 // bytes of any frame when Limits.Frames is empty
	DefaultMaxFrames        = 16
	DefaultQueue            = 10000 // ten times libzmq's default high-water mark: an engine's events come in bursts
	DefaultQueueBytes       = 64 << 20
	DefaultMaxPeers         = 1024
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultDialWait         = 2500 * time.Millisecond
)

// maxCommand bounds a command frame's body (READY, PING, SUBSCRIBE...):
// none that this package reads needs more.
const maxCommand = 4096

// maxSubscriptions bounds the distinct subscriptions one peer of a Pub may
// hold, as each costs memory and time on every Send.
const maxSubscriptions = 1024

// Limits bound what a peer can make a socket allocate; zero fields take the defaults.
// An entry of 0 in Frames accepts empty frames only.
type Limits struct {
	Frames     []int // Frames[i] is the longest body accepted for frame i of a message; the last entry applies to every later frame
	MaxFrames  int   // most frames in one message
	Queue      int   // messages queued per peer (send side high-water mark) or in total (receive side)
	QueueBytes int   // receive side: bytes of messages received but not yet taken by Recv, in total over peers; readers wait when it is full
	MaxPeers   int   // connections a listening socket keeps at once; more are closed at once and counted
}

// withDefaults returns l with its zero fields set to the defaults.
func (l Limits) withDefaults() Limits {
	if len(l.Frames) == 0 {
		l.Frames = []int{DefaultMaxFrame}
	}
	if l.MaxFrames <= 0 {
		l.MaxFrames = DefaultMaxFrames
	}
	if l.Queue <= 0 {
		l.Queue = DefaultQueue
	}
	if l.QueueBytes <= 0 {
		l.QueueBytes = DefaultQueueBytes
	}
	if l.MaxPeers <= 0 {
		l.MaxPeers = DefaultMaxPeers
	}
	return l
}

// frame returns the longest body accepted for frame i of a message.
func (l *Limits) frame(i int) uint64 {
	n := l.Frames[min(i, len(l.Frames)-1)]
	return uint64(max(n, 0))
}

// violation reports whether err is one of the kinds OnViolation hears of.
func violation(err error) bool {
	return errors.Is(err, ErrFrameTooLong) || errors.Is(err, ErrTooManyFrames) ||
		errors.Is(err, ErrProtocol) || errors.Is(err, ErrTooManyPeers)
}
