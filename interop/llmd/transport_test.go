package llmd

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/sagellm/kvevict/kvevents"
)

// BenchmarkStuckSubscriber measures what docs/kvevents.md's choice of
// transport rests on: 5,000 batches of about 1 KiB published beside a
// subscriber that connects, subscribes and never reads, to one healthy
// subscriber, with go-zeromq/zmq4's PUB socket (what kvevents used, and
// what llm-d's subscriber runs on) and with kvevents' Publisher. It
// reports the share of batches the healthy subscriber received within 2 s
// of the last Publish, and how long publishing took.
//
//	cd interop/llmd && go test -run '^$' -bench StuckSubscriber -benchtime 1x
func BenchmarkStuckSubscriber(b *testing.B) {
	const n = 5000
	payload := make([]byte, 1024)
	for _, name := range []string{"zmq4", "kvevents"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				addr := "ipc://" + filepath.Join(b.TempDir(), "kv.ipc")
				var publish func(i int) error
				var closePub func()
				var received func() int
				switch name {
				case "zmq4":
					pub := zmq4.NewPub(ctx)
					if err := pub.Listen(addr); err != nil {
						b.Fatal(err)
					}
					closePub = func() { pub.Close() }
					publish = func(i int) error {
						return pub.Send(zmq4.NewMsgFrom([]byte("t"), []byte(fmt.Sprint(i)), payload))
					}
					sub := zmq4.NewSub(ctx)
					if err := sub.Dial(addr); err != nil {
						b.Fatal(err)
					}
					if err := sub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
						b.Fatal(err)
					}
					got := make(chan struct{}, n)
					go func() {
						for {
							if _, err := sub.Recv(); err != nil {
								return
							}
							got <- struct{}{}
						}
					}()
					received = func() int { return len(got) }
					for len(pub.(zmq4.Topics).Topics()) == 0 {
						time.Sleep(5 * time.Millisecond)
					}
				case "kvevents":
					pub, err := kvevents.NewPublisher(ctx, addr, kvevents.WithLinger(0))
					if err != nil {
						b.Fatal(err)
					}
					closePub = func() { pub.Close() }
					batch := kvevents.EventBatch{Events: []kvevents.Event{&kvevents.BlockStored{
						BlockHashes: []kvevents.Hash{kvevents.IntHash(1)}, TokenIDs: make([]int64, 1000)}}}
					publish = func(int) error { _, err := pub.Publish(&batch); return err }
					sub, err := kvevents.NewSubscriber(ctx, addr)
					if err != nil {
						b.Fatal(err)
					}
					got := make(chan struct{}, n)
					go sub.Run(ctx, func(kvevents.Message) { got <- struct{}{} })
					received = func() int { return len(got) }
				}
				// zmq4's SUB reads into a queue of ten messages that Recv
				// would empty; with no Recv it stops reading once that is
				// full.
				stuck := zmq4.NewSub(ctx)
				if err := stuck.Dial(addr); err != nil {
					b.Fatal(err)
				}
				if err := stuck.SetOption(zmq4.OptionSubscribe, ""); err != nil {
					b.Fatal(err)
				}
				time.Sleep(200 * time.Millisecond) // both subscriptions in
				start := time.Now()
				for i := range n {
					if err := publish(i); err != nil {
						b.Fatal(err)
					}
				}
				took := time.Since(start)
				deadline := time.Now().Add(2 * time.Second)
				for received() < n && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				b.ReportMetric(float64(received())/n, "healthy_received")
				b.ReportMetric(took.Seconds(), "publish_s")
				stuck.Close()
				closePub()
				cancel()
			}
		})
	}
}
