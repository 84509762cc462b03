// Package zmtp is a small implementation of ZMTP 3.1 (RFC 37: RFC 23's
// ZMTP 3.0 with subscription commands and PING/PONG heartbeats; it speaks
// 3.0 to a peer that announces 3.0) and its NULL and CURVE security
// mechanisms (CURVE is CurveZMQ, RFC 26, as libzmq speaks it: see
// [Curve]), for the four socket roles package kvevents needs: PUB, SUB, a
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
// Here a listening socket closes a connection from a source address
// outside Limits.Allow as it accepts it; every frame's announced size is
// checked against [Limits] before anything is allocated, and the bytes of the messages being read are
// reserved from one budget per socket; a handshake, and a message that
// stops arriving midway, have deadlines; under CURVE each boxed frame's
// size is checked against the limit of the frame it carries, and its
// nonce against the last one heard, before its box is opened, and a box
// that does not open closes the connection; a listening socket bounds its
// connections in their handshake (in all, and per source address) apart
// from its peers (in all, and per source address), and holds a connection
// whose greeting has not started on probation, where it takes no
// handshake's slot, so that slow handshakes yield to a prompt newcomer;
// heartbeats drop a peer of ZMTP 3.1 that went silent, and an idle time a
// peer that speaks none and is of no use silent; and a PUB
// socket matches subscriptions in a trie and gives each subscriber its own
// queue, bounded in messages and bytes, and writer goroutine, dropping
// (and counting) what a slow subscriber cannot take. A peer that breaks
// the protocol or a limit loses its connection alone; the socket counts it
// ([Refusals]) and reports it to its OnViolation function with an error
// that wraps [ErrFrameTooLong], [ErrTooManyFrames], [ErrProtocol],
// [ErrTooManyPeers], [ErrTimeout] or [ErrNotAllowed].
//
// Endpoints are "tcp://host:port" (host "*" listens on all interfaces,
// port 0 or "*" picks a free one), "ipc:///path" (a unix socket) and
// "inproc://name" (in the same process); see [Transports].
package zmtp
