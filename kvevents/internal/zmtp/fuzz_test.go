package zmtp

import (
	"bytes"
	"runtime"
	"testing"
	"time"
)

// FuzzReadMsg feeds arbitrary bytes to a SUB connection's reader, after a
// valid greeting and READY or in their place: it must never panic, and
// never return or allocate more than the limits allow.
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
		c := newConn(&fakeConn{r: bytes.NewReader(in)}, lim, nil, "fuzz")
		if c.handshake("SUB", nil, time.Time{}) != nil {
			return
		}
		for {
			m, err := c.ReadMsg()
			if err != nil {
				break
			}
			if len(m) == 0 || len(m) > lim.MaxFrames {
				t.Fatalf("a message of %d frames", len(m))
			}
			for i, fr := range m {
				if uint64(len(fr)) > lim.frame(i) {
					t.Fatalf("frame %d of %d bytes", i, len(fr))
				}
			}
		}
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20+4*uint64(len(in)) {
			t.Fatalf("%d bytes allocated for %d bytes of input", grew, len(in))
		}
	})
}
