package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// The tests speak ZeroMQ to the command as a peer written from ZMTP 3.0
// (RFC 23, NULL mechanism) alone would, with nothing of kvevict's: what
// they check on the wire is then what any ZeroMQ peer would see.

// handshake is what a ZeroMQ socket of type typ says first: the greeting
// with the NULL mechanism, then a READY command naming its type.
func handshake(typ string) []byte {
	g := make([]byte, 64)
	g[0], g[9], g[10] = 0xff, 0x7f, 3
	copy(g[12:], "NULL")
	ready := append([]byte{5}, "READY"...)
	ready = append(ready, 11)
	ready = append(ready, "Socket-Type"...)
	ready = binary.BigEndian.AppendUint32(ready, uint32(len(typ)))
	ready = append(ready, typ...)
	return append(append(g, 0x04, byte(len(ready))), ready...)
}

// frames encodes a message as ZMTP frames.
func frames(parts ...[]byte) []byte {
	var out []byte
	for i, p := range parts {
		flags := byte(0)
		if i < len(parts)-1 {
			flags = 1
		}
		out = binary.BigEndian.AppendUint64(append(out, flags|2), uint64(len(p)))
		out = append(out, p...)
	}
	return out
}

func seqFrame(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// readGreeting reads a peer's 64-byte greeting and checks that it is ZMTP 3
// with the NULL mechanism.
func readGreeting(r io.Reader) error {
	g := make([]byte, 64)
	if _, err := io.ReadFull(r, g); err != nil {
		return err
	}
	if g[0] != 0xff || g[9]&1 != 1 || g[10] != 3 || string(g[12:16]) != "NULL" {
		return fmt.Errorf("greeting % x: not ZMTP 3 with the NULL mechanism", g)
	}
	return nil
}

// maxTestFrame bounds the frames readMsg takes: far above what the
// command sends in a test.
const maxTestFrame = 1 << 24

// readMsg returns the frames of the next message from r, after the
// greeting, skipping commands (the peer's READY).
func readMsg(r *bufio.Reader) ([][]byte, error) {
	var msg [][]byte
	for {
		flags, err := r.ReadByte()
		if err != nil {
			return nil, err
		}
		var size uint64
		if flags&2 != 0 {
			var b [8]byte
			if _, err := io.ReadFull(r, b[:]); err != nil {
				return nil, err
			}
			size = binary.BigEndian.Uint64(b[:])
		} else {
			b, err := r.ReadByte()
			if err != nil {
				return nil, err
			}
			size = uint64(b)
		}
		if size > maxTestFrame {
			return nil, fmt.Errorf("a frame of %d bytes", size)
		}
		body := make([]byte, size)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, err
		}
		if flags&4 != 0 {
			continue
		}
		msg = append(msg, body)
		if flags&1 == 0 {
			return msg, nil
		}
	}
}
