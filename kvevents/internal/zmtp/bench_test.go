package zmtp

import (
	"context"
	"testing"
	"time"
)

// BenchmarkPubSub measures small messages from a Pub to one Sub over
// loopback TCP, Send to Recv.
func BenchmarkPubSub(b *testing.B) {
	p := NewPub(PubOptions{Limits: Limits{Queue: b.N + 1}}) // so that nothing is dropped
	defer p.Close(0)
	if err := p.Listen("tcp://127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	s := NewSub(SubOptions{})
	defer s.Close()
	if err := s.Dial("tcp://" + p.Addr().String()); err != nil {
		b.Fatal(err)
	}
	s.Subscribe("")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.WaitSubscribers(ctx, 1); err != nil {
		b.Fatal(err)
	}
	msg := [][]byte{[]byte("kv@pod@model"), seq(1), make([]byte, 100)}
	b.ResetTimer()
	go func() {
		for range b.N {
			p.Send(msg)
		}
	}()
	for range b.N {
		if _, err := s.Recv(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
