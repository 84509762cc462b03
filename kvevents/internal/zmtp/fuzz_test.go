package zmtp

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"
)

// FuzzReadMsg feeds arbitrary bytes to a SUB connection's reader, after a
// valid greeting and READY or in their place: it must never panic, never
// return or allocate more than the limits allow, and read the same
// whatever pieces the bytes arrive in.
func FuzzReadMsg(f *testing.F) {
	hello := append(rawGreeting(0), rawReady("PUB")...)
	f.Add(true, rawMsg([]byte("kv@a"), seq(1), []byte("payload")))
	f.Add(true, []byte{0x02, 0, 1, 0, 0, 0, 0, 0, 0})                         // 2^48 bytes announced
	f.Add(true, []byte{0x02, 0, 0, 0, 0, 0, 0x10, 0, 0, 'x'})                 // the largest frame announced, one byte sent
	f.Add(true, []byte{0x06, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // a command as long as can be
	f.Add(true, []byte{0x04, 7, 4, 'P', 'I', 'N', 'G', 0, 1})
	f.Add(true, []byte{0x04, 6, 5, 'E', 'R', 'R', 'O', 'R'})
	f.Add(true, []byte{0x01, 0, 0x01, 0, 0x01, 0, 0x01, 0, 0x00, 0})
	f.Add(true, []byte{0x08, 1, 'x'})
	f.Add(false, append(hello, rawMsg([]byte("t"), nil, bytes.Repeat([]byte("p"), 300))...))
	f.Add(false, append(rawGreeting(1), rawReady("XPUB")...))
	f.Add(false, append(rawGreeting(0), 0x04, 0x30, 5, 'R', 'E', 'A', 'D', 'Y', 0x0b, 'S', 'o', 'c', 'k', 'e', 't', '-', 'T', 'y', 'p', 'e', 0xff, 0, 0, 0))
	lim := Limits{Frames: []int{64, 8, 1 << 20}, MaxFrames: 4}.withDefaults()
	f.Fuzz(func(t *testing.T, withHello bool, data []byte) {
		in := data
		if withHello {
			in = append(hello[:len(hello):len(hello)], data...)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		whole, wholeErr := readMsgs(t, in, lim, nil)
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20+4*uint64(len(in)) {
			t.Fatalf("%d bytes allocated for %d bytes of input", grew, len(in))
		}
		// A socket may hand over a frame in any pieces (byte by byte, or
		// in sizes that cut headers and bodies anywhere): the reader must
		// see the same messages and stop at the same error.
		for _, chunks := range [][]int{{1}, {2, 7, 1, 3, 9, 4}} {
			msgs, err := readMsgs(t, in, lim, chunks)
			if fmt.Sprint(err) != fmt.Sprint(wholeErr) {
				t.Fatalf("reads of %v: error %v, whole: %v", chunks, err, wholeErr)
			}
			if !reflect.DeepEqual(msgs, whole) {
				t.Fatalf("reads of %v: %d messages %q, whole: %d %q", chunks, len(msgs), msgs, len(whole), whole)
			}
		}
	})
}

// readMsgs hands in to a SUB connection's reader in reads of at most the
// sizes in chunks, in turn (nil: as much as each read asks), and returns
// the messages it reads, each checked against lim, and the error that
// ended the handshake or the reading.
func readMsgs(t *testing.T, in []byte, lim Limits, chunks []int) ([][][]byte, error) {
	t.Helper()
	var r io.Reader = bytes.NewReader(in)
	if chunks != nil {
		r = &pieces{r: r, sizes: chunks}
	}
	c := newConn(&fakeConn{r: r}, lim, nil, "fuzz")
	if err := c.handshake("SUB", nil, time.Time{}, nil); err != nil {
		return nil, err
	}
	var msgs [][][]byte
	for {
		m, err := c.ReadMsg()
		if err != nil {
			return msgs, err
		}
		if len(m) == 0 || len(m) > lim.MaxFrames {
			t.Fatalf("a message of %d frames", len(m))
		}
		for i, fr := range m {
			if uint64(len(fr)) > lim.frame(i) {
				t.Fatalf("frame %d of %d bytes", i, len(fr))
			}
		}
		own := make([][]byte, len(m)) // the frames may share the reader's buffer
		for i, fr := range m {
			own[i] = slices.Clone(fr)
		}
		msgs = append(msgs, own)
	}
}

// pieces reads from r at most sizes[i] bytes at the i-th read, cycling
// through sizes, as a socket delivers a stream in segments.
type pieces struct {
	r     io.Reader
	sizes []int
	next  int
}

func (p *pieces) Read(b []byte) (int, error) {
	n := min(len(b), p.sizes[p.next%len(p.sizes)])
	p.next++
	return p.r.Read(b[:n])
}
