package kvevents

import (
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sagellm/kvevict/kvevents/internal/zmtp"
)

// wireHello is what a DEALER with no identity says first: the ZMTP 3.0
// greeting of the NULL mechanism and a READY command, written from RFC 23.
func wireHello(mechanism string) []byte {
	g := make([]byte, 64)
	g[0], g[9], g[10] = 0xff, 0x7f, 3
	copy(g[12:32], mechanism)
	ready := append([]byte{5}, "READY"...)
	ready = append(ready, 11)
	ready = append(ready, "Socket-Type"...)
	ready = binary.BigEndian.AppendUint32(ready, 6)
	ready = append(ready, "DEALER"...)
	return append(append(g, 0x04, byte(len(ready))), ready...)
}

// wireMsg encodes frames as one ZMTP message of short frames.
func wireMsg(frames ...[]byte) []byte {
	var out []byte
	for i, f := range frames {
		flags := byte(0)
		if i < len(frames)-1 {
			flags = 1
		}
		out = append(out, flags, byte(len(f)))
		out = append(out, f...)
	}
	return out
}

// FuzzReplayServer feeds arbitrary bytes to a publisher's replay socket,
// after a DEALER's greeting and READY or in their place, over a unix
// socket: the handshake and the request reader must never panic nor hold
// the server, and a well-formed request made afterwards is answered whole.
func FuzzReplayServer(f *testing.F) {
	hello := wireHello("NULL")
	f.Add(true, wireMsg(nil, seqBytes(0)))
	f.Add(true, wireMsg(nil, seqBytes(1<<63-1)))
	f.Add(true, wireMsg(nil, seqBytes(-1<<62))) // before the buffer: the whole of it
	f.Add(true, wireMsg(nil, []byte{0, 0, 0, 1}))
	f.Add(true, wireMsg([]byte{1}, seqBytes(0)))
	f.Add(true, wireMsg(nil, seqBytes(0), nil))
	f.Add(true, []byte{0x02, 0, 1, 0, 0, 0, 0, 0, 0}) // 2^48 bytes announced
	f.Add(true, []byte{0x04, 7, 4, 'P', 'I', 'N', 'G', 0, 1})
	f.Add(false, wireHello("PLAIN"))
	f.Add(false, hello[:11])
	f.Add(false, []byte("GET / HTTP/1.1\r\n\r\n"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "kvevents-fuzz")
	if err != nil {
		f.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "replay.ipc")
	sink := zmtp.NewSub(zmtp.SubOptions{})
	defer sink.Close()
	if err := sink.Listen("ipc://" + filepath.Join(dir, "sink.ipc")); err != nil {
		f.Fatal(err)
	}
	p, err := NewPublisher(ctx, "ipc://"+filepath.Join(dir, "sink.ipc"), WithPublisherDirection(Connect),
		WithReplay("ipc://"+path, 4), WithLinger(0), WithPublisherLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		f.Fatal(err)
	}
	defer p.Close()
	for range 6 {
		if _, err := p.Publish(&EventBatch{Events: []Event{&AllBlocksCleared{}}}); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, withHello bool, data []byte) {
		in := data
		if withHello {
			in = append(hello[:len(hello):len(hello)], data...)
		}
		nc, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(testTimeout))
		nc.Write(in)
		nc.(*net.UnixConn).CloseWrite()
		buf := make([]byte, 4096)
		for { // until the server closes: it must, once our side ended
			if _, err := nc.Read(buf); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatalf("the replay server held a connection whose client ended, after %q", in)
				}
				break
			}
		}
		nc.Close()
		dctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		d, err := zmtp.Dial(dctx, "ipc://"+path, zmtp.Dealer, nil, zmtp.Limits{}, nil)
		if err != nil {
			t.Fatalf("after %q: %v", in, err)
		}
		defer d.Close()
		d.SetDeadline(time.Now().Add(testTimeout))
		if err := d.WriteMsg([][]byte{nil, seqBytes(0)}); err != nil {
			t.Fatal(err)
		}
		for want := int64(2); ; want++ { // the buffer holds 2..5
			seq, _ := replayAnswer(t, d, "")
			if seq == -1 && want == 6 {
				break
			}
			if seq != want {
				t.Fatalf("after %q: the answer holds %d, want %d", in, seq, want)
			}
		}
	})
}
