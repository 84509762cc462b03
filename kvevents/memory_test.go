package kvevents

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sagellm/kvevict/kvevents/internal/zmtp"
)

// liveHeap returns the heap's live bytes, after a collection.
func liveHeap() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// heapPeak samples the heap while fn runs and returns the most it held
// above what it held before, collected or not: a bound on it is a bound
// on the live heap too.
func heapPeak(fn func()) int64 {
	before := liveHeap()
	var peak int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, int64(ms.HeapAlloc)-before)
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	fn()
	close(done)
	wg.Wait()
	return peak
}

// TestSubscriptionFlood: peers that each send 1,024 subscriptions of 1,000
// bytes, scaled down from thousands of peers to 40 under a budget of 64
// MiB, whose share for subscriptions is 2 MiB and for connections 43
// peers. Together they would hold about 49 MB; each peer that takes the
// subscriptions past their share is closed and counted, the heap stays
// within half the budget, and a subscriber that comes after still subscribes
// and gets its batch.
func TestSubscriptionFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("floods a publisher with 40 connections")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*testTimeout)
	defer cancel()
	const budget, peers, subs = 64 << 20, 40, 1024
	share := publisherShares(budget, false).subscriptions
	// Every peer comes from 127.0.0.1: as many as the socket holds may
	// (the default per address is a sixteenth of them).
	p, err := NewPublisher(ctx, "tcp://127.0.0.1:0", WithPublisherDirection(Bind), WithPublisherMemory(budget),
		WithMaxSubscribersPerAddress(DefaultMaxPeers), WithPublisherLogger(slog.New(slog.DiscardHandler)), WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	addr := "tcp://" + p.Addr().String()
	prefix := []byte(strings.Repeat("x", 1000))
	// One at a time: the budget leaves four connections in their
	// handshake at once, and a fifth would take the place of one.
	conns := make([]*zmtp.Conn, peers)
	for i := range conns {
		c, err := zmtp.Dial(ctx, addr, "SUB", nil, zmtp.Limits{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	// The share holds less than two peers' floods: the first may keep
	// all of its subscriptions, and every other is closed.
	flood := int64(subs * (len(prefix) + zmtp.SubscriptionOverhead))
	var held, refused int64
	grew := heapPeak(func() {
		for i, c := range conns {
			go func() {
				for j := range subs {
					sub := append([]byte{1}, prefix...)
					copy(sub[1:], fmt.Sprintf("%d.%d.", i, j))
					if c.WriteMsg([][]byte{sub}) != nil {
						return // closed: the publisher refused it
					}
				}
			}()
		}
		waitStats(ctx, p.pub.Stats, func(st zmtp.PubStats) bool {
			held = max(held, st.SubscriptionBytes)
			refused = p.pub.Refusals().Subscriptions
			return st.Disconnected == refused && st.SubscriptionBytes == (peers-refused)*flood
		})
	})
	t.Logf("the heap grew by at most %d bytes; the subscriptions held at most %d bytes; %d peers refused", grew, held, refused)
	if limit := share + peers*(subscriptionFloorBytes+1100+zmtp.SubscriptionOverhead); held > limit {
		t.Errorf("the subscriptions held %d bytes, want at most %d", held, limit)
	}
	// The flood reaches the shares of the connections, the subscriptions
	// and the bytes being read, 3/16 of the budget, beside the garbage of
	// what it sent: half the budget is ample, and far less than the same
	// flood grows the heap by without its share (docs/kvevents.md).
	if grew > budget/2 {
		t.Errorf("the heap grew by %d bytes under the flood, want at most half the budget, %d", grew, budget/2)
	}
	if refused < peers-1 {
		t.Errorf("%d subscribers refused for their subscriptions, want %d or %d", refused, peers-1, peers)
	}
	if st := p.Stats(); st.RefusedSubscribers != refused {
		t.Errorf("%d subscribers counted refused, the transport refused %d", st.RefusedSubscribers, refused)
	}
	s, err := NewSubscriber(ctx, addr, WithSubscriberLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	c := runSubscriber(ctx, t, s, nil)
	if err := p.pub.WaitSubscribers(ctx, int(peers-refused)+1); err != nil { // the flooding peer kept, if one was, and s
		t.Fatal(err)
	}
	if _, err := p.Publish(&EventBatch{Events: []Event{&AllBlocksCleared{}}}); err != nil {
		t.Fatal(err)
	}
	c.wait(ctx, t, 1)
}

// TestQueuesShareTheirBudget: eight subscribers that never read, beside a
// healthy one, at a publisher of a 32 MiB budget, whose queues share 4
// MiB: each stuck one alone could queue all of it, and eight would hold
// eight times that. The queues together stay within about twice their
// share, and the healthy subscriber, whose queue stays within its share
// (the publisher's bursts are smaller than that), receives every batch.
func TestQueuesShareTheirBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("publishes 16 MB beside eight stuck subscribers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*testTimeout)
	defer cancel()
	const budget, stuck, n = 32 << 20, 8, 2000
	share := publisherShares(budget, false).queues
	addr := "ipc://" + filepath.Join(t.TempDir(), "kv.ipc")
	p, err := NewPublisher(ctx, addr, WithPublisherMemory(budget), WithLinger(0), WithPublisherLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	for range stuck {
		stuckSubscriber(ctx, t, addr)
	}
	s, err := NewSubscriber(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	c := runSubscriber(ctx, t, s, nil)
	if err := p.pub.WaitSubscribers(ctx, stuck+1); err != nil {
		t.Fatal(err)
	}
	tokens := make([]int64, 8<<10) // a batch of about 8 KiB
	var most int64
	for i := range n {
		b := EventBatch{Events: []Event{&BlockStored{BlockHashes: []Hash{IntHash(uint64(i))}, TokenIDs: tokens}}}
		if _, err := p.Publish(&b); err != nil {
			t.Fatal(err)
		}
		most = max(most, p.Stats().QueuedBytes)
		if (i+1)%25 == 0 { // a burst within the healthy subscriber's share
			c.wait(ctx, t, i+1)
		}
	}
	msgs := c.wait(ctx, t, n)
	for i, m := range msgs {
		if m.Seq != int64(i) || m.Missed != 0 {
			t.Fatalf("message %d: seq %d, missed %d", i, m.Seq, m.Missed)
		}
	}
	t.Logf("the queues held at most %d bytes, their share %d", most, share)
	if limit := 2*share + (stuck+1)*16<<10; most > limit {
		t.Errorf("the queues held %d bytes, want at most %d", most, limit)
	}
	if st := p.Stats(); st.Dropped == 0 {
		t.Errorf("nothing dropped for the stuck subscribers: %+v", st)
	}
}

// subscriptionFloorBytes is zmtp's floor of each subscriber's
// subscriptions, as the flood test bounds what they hold.
const subscriptionFloorBytes = 4 << 10

// TestMirrorMemoryFlood feeds mirrors of a 32 MiB budget what took an
// unbounded mirror to gigabytes, scaled down: 20 topics of 200,000
// integer hashes each, and 20 topics of 20,000 bytes hashes of 256 bytes
// (MaxHashBytes) each. The mirror's count stays within its budget
// throughout, the live heap within the budget and slack, and a topic
// that comes last is stored whole, taking its room from the others.
func TestMirrorMemoryFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("feeds a mirror hundreds of megabytes of hashes")
	}
	const budget = 32 << 20
	for _, tc := range []struct {
		name          string
		topics, count int
		hash          func(topic, i int) Hash
	}{
		{"ints", 20, 200_000, func(topic, i int) Hash { return IntHash(uint64(topic)<<32 | uint64(i)) }},
		{"bytes", 20, 20_000, func(topic, i int) Hash {
			b := make([]byte, MaxHashBytes)
			copy(b, fmt.Sprintf("%d.%d.", topic, i))
			return BytesHash(b)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := liveHeap()
			m, err := NewMirror(MaxMirrorCapacity, WithMirrorMemory(budget))
			if err != nil {
				t.Fatal(err)
			}
			const batch = 1000
			for topic := range tc.topics {
				name := fmt.Sprint("kv@pod-", topic)
				for i := 0; i < tc.count; i += batch {
					hashes := make([]Hash, batch)
					for j := range hashes {
						hashes[j] = tc.hash(topic, i+j)
					}
					m.Apply(name, &EventBatch{Events: []Event{&BlockStored{BlockHashes: hashes}}})
					if st := m.Stats(); st.Bytes > budget {
						t.Fatalf("topic %d, block %d: the mirror counts %d bytes, budget %d", topic, i, st.Bytes, budget)
					}
				}
			}
			checkMirror(t, m)
			last := make([]Hash, batch)
			for j := range last {
				last[j] = tc.hash(tc.topics, j)
			}
			m.Apply("kv@new", &EventBatch{Events: []Event{&BlockStored{BlockHashes: last}}})
			if got := m.Match("kv@new", last); got != batch {
				t.Errorf("the topic that came last holds %d of its %d blocks", got, batch)
			}
			checkMirror(t, m)
			grew := liveHeap() - before
			var blocks int
			for _, ts := range m.Topics() {
				blocks += ts.ResidentBlocks
			}
			st := m.Stats()
			t.Logf("%d topics hold %d blocks in %d bytes counted, the live heap grew by %d", len(m.Topics()), blocks, st.Bytes, grew)
			if grew > budget+budget/4 {
				t.Errorf("the live heap grew by %d bytes, budget %d", grew, budget)
			}
			runtime.KeepAlive(m)
		})
	}
}
