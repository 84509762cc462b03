// Package zmtp is a small implementation of ZMTP 3.0 (RFC 23, with the
// subscription commands of RFC 37/ZMTP 3.1 accepted) and its NULL security
// mechanism, for the four socket roles package kvevents needs: PUB, SUB, a
// ROUTER-like replay server ([Server]) and a DEALER replay client ([Dial]).
// It interoperates with libzmq (pyzmq, as vLLM's publisher uses) and with
// github.com/go-zeromq/zmq4.
//
// It exists because go-zeromq/zmq4 is unsafe on a network one does not
// control: its reader allocates whatever size a frame header announces, so
// a few bytes from any peer can make the process run out of memory; and its
// PUB socket writes to every subscriber in turn from one goroutine with a
// blocking write and an unbounded queue, so one subscriber that stops
// reading stalls all the others and makes memory grow without bound.
//
// Here every frame's announced size is checked against [Limits] before
// anything is allocated, a handshake has a deadline, a listening socket
// keeps a bounded number of connections, and a PUB socket gives each
// subscriber its own bounded queue and writer goroutine, dropping (and
// counting) what a slow subscriber cannot take. A peer that breaks the
// protocol or a limit loses its connection alone; the socket reports it to
// its OnViolation function with an error that wraps [ErrFrameTooLong],
// [ErrTooManyFrames], [ErrProtocol] or [ErrTooManyPeers].
//
// Endpoints are "tcp://host:port" (host "*" listens on all interfaces,
// port 0 or "*" picks a free one), "ipc:///path" (a unix socket) and
// "inproc://name" (in the same process); see [Transports].
package zmtp
