package zmtp

// ZMTP 3's frames (RFC 23): flags, sizes and bodies, each size checked
// against its limit before its body is allocated.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// Frame flags.
const (
	flagMore    = 1
	flagLong    = 2
	flagCommand = 4
)

// recv is next that closes the connection on error, and hands the
// message on: its bytes leave the read budget.
func (c *Conn) recv() (msg [][]byte, cmd string, data []byte, err error) {
	msg, cmd, data, err = c.next()
	c.partial = false
	c.handOn()
	if err != nil {
		c.fail(err)
	}
	return msg, cmd, data, err
}

// next reads one message, or one command (cmd is its name). Every size is
// checked against its limit before the body is read.
func (c *Conn) next() (msg [][]byte, cmd string, data []byte, err error) {
	if c.cs != nil {
		return c.nextCurve()
	}
	for {
		flags, size, err := c.header()
		if err != nil {
			return nil, "", nil, err
		}
		if flags&flagCommand != 0 {
			if len(msg) > 0 || flags&flagMore != 0 {
				return nil, "", nil, fmt.Errorf("zmtp: %s: a command inside a message: %w", c.label, ErrProtocol)
			}
			if size > maxCommand {
				return nil, "", nil, fmt.Errorf("zmtp: %s: a command of %d bytes, limit %d: %w", c.label, size, maxCommand, ErrFrameTooLong)
			}
			body, err := c.body(size, false)
			if err != nil {
				return nil, "", nil, err
			}
			name, data, err := c.splitCommand(body)
			return nil, name, data, err
		}
		i := len(msg)
		if i >= c.lim.MaxFrames {
			return nil, "", nil, fmt.Errorf("zmtp: %s: a message of more than %d frames: %w", c.label, c.lim.MaxFrames, ErrTooManyFrames)
		}
		if limit := c.lim.frame(i); size > limit {
			return nil, "", nil, fmt.Errorf("zmtp: %s: frame %d of %d bytes, limit %d: %w", c.label, i, size, limit, ErrFrameTooLong)
		}
		body, err := c.body(size, true)
		if err != nil {
			return nil, "", nil, err
		}
		msg = append(msg, body)
		if flags&flagMore == 0 {
			return msg, "", nil, nil
		}
	}
}

// header reads a frame's flags and size.
func (c *Conn) header() (flags byte, size uint64, err error) {
	if flags, err = c.r.ReadByte(); err != nil {
		return 0, 0, err
	}
	c.partial = true
	if flags&^(flagMore|flagLong|flagCommand) != 0 {
		return 0, 0, fmt.Errorf("zmtp: %s: frame flags %#x: %w", c.label, flags, ErrProtocol)
	}
	if flags&flagLong == 0 {
		b, err := c.r.ReadByte()
		return flags, uint64(b), err
	}
	if _, err := io.ReadFull(c.r, c.hdr[:]); err != nil {
		return 0, 0, err
	}
	return flags, binary.BigEndian.Uint64(c.hdr[:]), nil
}

// body reads a frame body of n bytes, n already within a limit; a
// counted body's bytes are reserved from the budget first. A long body
// grows with what arrives, so a peer that announces the limit and sends
// nothing costs little.
func (c *Conn) body(n uint64, counted bool) ([]byte, error) {
	if n <= bufSize {
		if counted {
			if err := c.reserve(int64(n)); err != nil {
				return nil, err
			}
		}
		b := make([]byte, n)
		_, err := io.ReadFull(c.r, b)
		return b, err
	}
	var b []byte
	for uint64(len(b)) < n {
		k := int(min(n-uint64(len(b)), uint64(max(len(b), bufSize))))
		if counted {
			if err := c.reserve(int64(k)); err != nil {
				return nil, err
			}
		}
		b = append(make([]byte, 0, len(b)+k), b...)
		m, err := io.ReadFull(c.r, b[len(b):len(b)+k])
		b = b[:len(b)+m]
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (c *Conn) splitCommand(body []byte) (name string, data []byte, err error) {
	if len(body) == 0 || body[0] == 0 || int(body[0]) > len(body)-1 {
		return "", nil, fmt.Errorf("zmtp: %s: a malformed command: %w", c.label, ErrProtocol)
	}
	n := int(body[0])
	return string(body[1 : 1+n]), body[1+n:], nil
}

// command returns the frame of a command.
func command(name string, data []byte) []byte {
	body := append([]byte{byte(len(name))}, name...)
	body = append(body, data...)
	h := []byte{flagCommand, byte(len(body))}
	if len(body) > 255 {
		h = binary.BigEndian.AppendUint64([]byte{flagCommand | flagLong}, uint64(len(body)))
	}
	return append(h, body...)
}

// writeMsg writes the frames of one message to w; errors stay in w until
// its Flush.
// writeMsg writes the frames of one message to w and returns the bytes w
// took: all of them, but after a write error.
func writeMsg(w *bufio.Writer, frames [][]byte) int {
	var h [9]byte
	took := 0
	for i, f := range frames {
		h[0] = 0
		if i < len(frames)-1 {
			h[0] = flagMore
		}
		n := frameHeader(len(f))
		if n == 9 {
			h[0] |= flagLong
			binary.BigEndian.PutUint64(h[1:], uint64(len(f)))
		} else {
			h[1] = byte(len(f))
		}
		k, _ := w.Write(h[:n])
		m, _ := w.Write(f)
		took += k + m
	}
	return took
}

// wireSize is the length of a message on the wire, as writeMsg writes it.
func wireSize(frames [][]byte) int {
	n := 0
	for _, f := range frames {
		n += frameHeader(len(f)) + len(f)
	}
	return n
}

// frameHeader is the length of a frame's flags and size: a short frame's
// size takes one byte, a long one's eight.
func frameHeader(size int) int {
	if size > 255 {
		return 9
	}
	return 2
}
