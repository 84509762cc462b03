package kvevents

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sagellm/kvevict/kvevents/internal/zmtp"
)

// soak is how long TestSoak feeds its mirror; CI runs it for 60 s.
var soak = flag.Duration("soak", 3*time.Second, "how long TestSoak publishes flat out")

// stuckAndHealthy connects to p at addr a subscriber that never reads
// and a healthy one, returned with the collector of its messages, and
// waits until p has both.
func stuckAndHealthy(ctx context.Context, t *testing.T, p *Publisher, addr string) (*Subscriber, *collector) {
	t.Helper()
	stuckSubscriber(ctx, t, addr)
	s, err := NewSubscriber(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	c := runSubscriber(ctx, t, s, nil)
	if err := p.pub.WaitSubscribers(ctx, 2); err != nil {
		t.Fatal(err)
	}
	return s, c
}

// stuckSubscriber connects to a publisher at addr as a SUB, subscribes to
// every topic and never reads again: a router that hangs. It returns the
// connection, closed when the test ends.
func stuckSubscriber(ctx context.Context, t *testing.T, addr string) *zmtp.Conn {
	t.Helper()
	c, err := zmtp.Dial(ctx, addr, "SUB", nil, zmtp.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.WriteMsg([][]byte{{1}}); err != nil {
		t.Fatal(err)
	}
	return c
}

// publishToOne waits for p's first subscriber and publishes one
// AllBlocksCleared to it.
func publishToOne(ctx context.Context, t *testing.T, p *Publisher) {
	t.Helper()
	if err := p.pub.WaitSubscribers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Publish(&EventBatch{Events: []Event{&AllBlocksCleared{}}}); err != nil {
		t.Fatal(err)
	}
}

// writeFirstBatch writes batch 0 of topic kv, one AllBlocksCleared, on
// c, a hostile publisher's connection.
func writeFirstBatch(t *testing.T, c *zmtp.Conn) {
	t.Helper()
	payload, err := Encode(&EventBatch{Events: []Event{&AllBlocksCleared{}}}, EncodingMixed)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteMsg([][]byte{[]byte("kv"), seqBytes(0), payload}); err != nil {
		t.Fatal(err)
	}
}

// hostilePub connects to a subscriber at addr as a PUB and returns the
// connection under it, handshake done, for bytes no publisher sends.
func hostilePub(ctx context.Context, t *testing.T, addr string) *zmtp.Conn {
	t.Helper()
	c, err := zmtp.Dial(ctx, addr, "PUB", nil, zmtp.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.ReadMsg(); err != nil { // the subscription
		t.Fatal(err)
	}
	return c
}

// TestSlowSubscriberDropped publishes beside a subscriber that never reads,
// at the pace of a healthy one (in steps of half its high-water mark): the
// healthy subscriber receives every batch, in order, Publish never waits,
// the stuck one's losses are counted as dropped or unsent, and the counts
// add up per subscriber to what was published.
func TestSlowSubscriberDropped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*testTimeout)
	defer cancel()
	addr := "ipc://" + filepath.Join(t.TempDir(), "kv.ipc") // a publisher binds it, by vLLM's rule
	p, err := NewPublisher(ctx, addr, WithLinger(200*time.Millisecond), WithHighWaterMark(1000))
	if err != nil {
		t.Fatal(err)
	}
	s, c := stuckAndHealthy(ctx, t, p, addr)
	const n = 20_000
	tokens := make([]int64, 256) // a batch of about 1 KiB
	start := time.Now()
	var publishing time.Duration
	for i := range n {
		b := EventBatch{TS: float64(i), Events: []Event{&BlockStored{BlockHashes: []Hash{IntHash(uint64(i))}, TokenIDs: tokens, BlockSize: 256}}}
		if _, err := p.Publish(&b); err != nil {
			t.Fatal(err)
		}
		if (i+1)%500 == 0 {
			publishing += time.Since(start)
			c.wait(ctx, t, i+1)
			start = time.Now()
		}
	}
	msgs := c.wait(ctx, t, n)
	for i, m := range msgs {
		if m.Seq != int64(i) || m.Missed != 0 {
			t.Fatalf("message %d: seq %d, missed %d", i, m.Seq, m.Missed)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if len(st.Subscribers) != 2 {
		t.Fatalf("stats of %d subscribers, want 2: %+v", len(st.Subscribers), st)
	}
	var healthy, stuck int
	for _, sub := range st.Subscribers {
		if sub.Sent+sub.Dropped+sub.Unsent != n {
			t.Errorf("subscriber %s: %d sent + %d dropped + %d unsent, want %d", sub.Peer, sub.Sent, sub.Dropped, sub.Unsent, n)
		}
		if sub.Sent == n {
			healthy++
		} else if sub.Dropped > 0 {
			stuck++
		}
	}
	if healthy != 1 || stuck != 1 {
		t.Errorf("subscribers %+v: want one sent everything, one dropped", st.Subscribers)
	}
	if sst := s.Stats(); sst.Delivered != n || sst.Missed != 0 {
		t.Errorf("healthy subscriber: %+v", sst)
	}
	t.Logf("%d batches published in %v beside a stuck subscriber", n, publishing)
}

// TestReplayClientThatNeverReads: one replay client asks for everything
// and never reads; another, asking after it, is answered in full.
func TestReplayClientThatNeverReads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	p := sinkPublisher(ctx, t, WithReplay("tcp://127.0.0.1:0", 2000))
	tokens := make([]int64, 4096) // 2,000 batches of 8 KiB or more: more than socket buffers hold
	for i := range 2000 {
		if _, err := p.Publish(&EventBatch{Events: []Event{&BlockStored{BlockHashes: []Hash{IntHash(uint64(i))}, TokenIDs: tokens}}}); err != nil {
			t.Fatal(err)
		}
	}
	stuck := dialReplay(ctx, t, p)
	if err := stuck.WriteMsg([][]byte{nil, seqBytes(0)}); err != nil {
		t.Fatal(err)
	}
	d := dialReplay(ctx, t, p)
	if err := d.WriteMsg([][]byte{nil, seqBytes(0)}); err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if seq, _ := replayAnswer(t, d, ""); seq != int64(i) {
			t.Fatalf("answer %d has seq %d", i, seq)
		}
	}
	if seq, _ := replayAnswer(t, d, ""); seq != -1 {
		t.Fatalf("no end marker: seq %d", seq)
	}
}

// TestSubscriberUnderAttack sends a listening subscriber, from hostile
// publishers, each attack a production router must survive, then a healthy
// stream: every attack is counted and logged once per kind, the healthy
// stream arrives whole, and nothing large was allocated.
func TestSubscriberUnderAttack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{&logs, &logMu}, nil))
	s, c, addr := listeningSubscriber(ctx, t, WithSubscriberLogger(logger), WithMaxTopics(4))
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	// A frame header announcing 2^48 bytes.
	huge := hostilePub(ctx, t, addr)
	header := binary.BigEndian.AppendUint64([]byte{0x02}, 1<<48)
	if _, err := huge.NetConn().Write(header); err != nil {
		t.Fatal(err)
	}
	// A topic frame of 100 MB, announced.
	topic := hostilePub(ctx, t, addr)
	if _, err := topic.NetConn().Write(binary.BigEndian.AppendUint64([]byte{0x03}, 100<<20)); err != nil {
		t.Fatal(err)
	}
	// Topics past the limit, each taking the place of the one heard from
	// least recently, then t0 again, and a poisoned sequence number.
	flood := hostilePub(ctx, t, addr)
	empty, err := Encode(&EventBatch{}, EncodingMixed)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		topics int
		seq    int64
	}{{1000, 0}, {1, 0}, {1, 1 << 40}, {1, 1}} {
		for i := range m.topics {
			if err := flood.WriteMsg([][]byte{[]byte(fmt.Sprint("t", i)), seqBytes(m.seq), empty}); err != nil {
				t.Fatal(err)
			}
		}
	}

	// 1,000 topics delivered at seq 0, 996 released; t0, released, starts
	// again at 0 (releasing another), then its seq 1 after the poisoned
	// one: 1,999 messages.
	msgs := c.wait(ctx, t, 1999)
	released := 0
	for _, m := range msgs {
		if m.Released {
			released++
		}
	}
	if last := msgs[1998]; released != 997 || last.Topic != "t0" || last.Seq != 1 || last.Missed != 0 || last.Restart {
		t.Errorf("%d released; after the poisoned sequence: %+v", released, last)
	}
	want := Stats{Delivered: 1002, Malformed: 0, Oversized: 2, Released: 997, Refused: 1}
	st := s.Stats()
	for deadline := time.Now().Add(testTimeout); st != want && time.Now().Before(deadline); st = s.Stats() {
		time.Sleep(10 * time.Millisecond)
	}
	if st != want {
		t.Errorf("stats\n got %+v\nwant %+v", st, want)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Errorf("the attacks made the subscriber allocate %d bytes", grew)
	}
	logMu.Lock()
	got := logs.String()
	logMu.Unlock()
	if n := strings.Count(got, "level=WARN"); n != 3 { // oversized, released topic, refused jump
		t.Errorf("%d warnings, want one per kind (3):\n%s", n, got)
	}
}

// TestSoak publishes flat out for -soak (3 s by default, 60 s in CI) to a
// mirror, beside a subscriber that never reads: the heap stays flat, and
// every batch the publisher did not deliver to the mirror is one the
// mirror reports missed, or one after the last it received.
func TestSoak(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), *soak+4*testTimeout)
	defer cancel()
	addr := "ipc://" + filepath.Join(t.TempDir(), "kv.ipc")
	p, err := NewPublisher(ctx, addr, WithLinger(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	stuckSubscriber(ctx, t, addr)
	m, err := NewMirror(10_000)
	if err != nil {
		t.Fatal(err)
	}
	// The mirror falls far behind and loses long runs: any length of gap
	// is taken at once, so that the last batch it hears is delivered, not
	// held for a successor that never comes.
	s, err := NewSubscriber(ctx, addr, WithSubscriberLogger(slog.New(slog.DiscardHandler)), WithMaxGap(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	var last atomic.Int64
	last.Store(-1)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		s.Run(runCtx, func(msg Message) { m.Handle(msg); last.Store(msg.Seq) })
		close(done)
	}()
	defer func() { stop(); <-done }()
	if err := p.pub.WaitSubscribers(ctx, 2); err != nil {
		t.Fatal(err)
	}
	gpu := MediumGPU
	tokens := make([]int64, 16*16)
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	var warm uint64
	start := time.Now()
	for i := 0; time.Since(start) < *soak; i++ {
		hashes := make([]Hash, 16)
		for j := range hashes {
			hashes[j] = IntHash(uint64(i*16 + j))
		}
		b := EventBatch{TS: float64(i), Events: []Event{
			&BlockStored{BlockHashes: hashes, TokenIDs: tokens, BlockSize: 16, Medium: &gpu},
		}}
		if _, err := p.Publish(&b); err != nil {
			t.Fatal(err)
		}
		if warm == 0 && time.Since(start) > *soak/3 {
			warm = heap()
		}
	}
	end := heap()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	var toMirror SubscriberStats
	for _, sub := range st.Subscribers {
		if sub.Sent+sub.Dropped+sub.Unsent != st.Published {
			t.Errorf("subscriber %+v: the counts do not add up to %d published", sub, st.Published)
		}
		if sub.Sent > toMirror.Sent {
			toMirror = sub
		}
	}
	for deadline := time.Now().Add(testTimeout); s.Stats().Delivered < toMirror.Sent && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	sst := s.Stats()
	t.Logf("%v: %d published; to the mirror %d sent, %d dropped, %d unsent; it reports %d missed; heap %d MB after a third, %d MB at the end",
		*soak, st.Published, toMirror.Sent, toMirror.Dropped, toMirror.Unsent, sst.Missed, warm>>20, end>>20)
	if sst.Delivered != toMirror.Sent {
		t.Errorf("the mirror got %d batches, the publisher sent it %d", sst.Delivered, toMirror.Sent)
	}
	tail := st.Published - 1 - last.Load() // lost after the last batch delivered: no later batch reveals them
	if sst.Missed+tail != toMirror.Dropped+toMirror.Unsent {
		t.Errorf("the mirror reports %d missed and %d after its last batch; the publisher dropped %d and did not send %d",
			sst.Missed, tail, toMirror.Dropped, toMirror.Unsent)
	}
	if m.Topics()[0].MissedBatches != sst.Missed {
		t.Errorf("the mirror's topic counts %d missed, its subscriber %d", m.Topics()[0].MissedBatches, sst.Missed)
	}
	if end > 2*warm+32<<20 {
		t.Errorf("heap grew from %d MB to %d MB", warm>>20, end>>20)
	}
}

// TestPublisherUnderAttack: a subscriber that sends a frame header
// announcing 2^48 bytes, and one that sends more subscriptions than a peer
// may hold, each lose their connection; the publisher lives and a healthy
// subscriber receives every batch.
func TestPublisherUnderAttack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	var logs bytes.Buffer
	var logMu sync.Mutex
	addr := "ipc://" + filepath.Join(t.TempDir(), "kv.ipc")
	p, err := NewPublisher(ctx, addr, WithLinger(time.Second), WithPublisherLogger(slog.New(slog.NewTextHandler(&lockedWriter{&logs, &logMu}, nil))))
	if err != nil {
		t.Fatal(err)
	}
	huge, err := zmtp.Dial(ctx, addr, "SUB", nil, zmtp.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer huge.Close()
	if _, err := huge.NetConn().Write(binary.BigEndian.AppendUint64([]byte{0x02}, 1<<48)); err != nil {
		t.Fatal(err)
	}
	many, err := zmtp.Dial(ctx, addr, "SUB", nil, zmtp.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer many.Close()
	for i := range 5000 {
		if err := many.WriteMsg([][]byte{append([]byte{1}, fmt.Sprint("topic-", i)...)}); err != nil {
			break // closed by the publisher
		}
	}
	s, err := NewSubscriber(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	c := runSubscriber(ctx, t, s, nil)
	// The hostile peer's subscriptions may still be there: wait for the
	// healthy one's, to every topic.
	for !slices.Contains(p.pub.Subscriptions(), "") {
		select {
		case <-ctx.Done():
			t.Fatal("the healthy subscription never reached the publisher")
		case <-time.After(5 * time.Millisecond):
		}
	}
	for range 100 {
		if _, err := p.Publish(&EventBatch{Events: []Event{&AllBlocksCleared{}}}); err != nil {
			t.Fatal(err)
		}
	}
	c.wait(ctx, t, 100)
	// A refused peer is counted as it is closed, and leaves the
	// subscribers once its connection is gone: both before Close, which
	// lists those still connected.
	waitStats(ctx, p.Stats, func(st PublisherStats) bool { return st.RefusedSubscribers >= 2 && len(st.Subscribers) <= 1 })
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if len(st.Subscribers) != 1 || st.Sent != 100 || st.RefusedSubscribers != 2 {
		t.Errorf("stats %+v, want the one healthy subscriber sent all 100, two refused", st)
	}
	logMu.Lock()
	got := logs.String()
	logMu.Unlock()
	if n := strings.Count(got, "level=WARN"); n != 1 || !strings.Contains(got, "frame too long") {
		t.Errorf("log %q, want one warning, of the frame too long", got)
	}
}

// TestStuckSubscriberBytes publishes batches of 400 blocks with their
// token ids beside a subscriber that never reads: the bytes queued for
// the subscribers stay within each one's budget, the replay buffer within
// its own, each drop is counted and logged once, and the healthy
// subscriber receives every batch.
func TestStuckSubscriberBytes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*testTimeout)
	defer cancel()
	var logs bytes.Buffer
	var logMu sync.Mutex
	const queueBytes, replayBytes = 1 << 20, 2 << 20
	addr := "ipc://" + filepath.Join(t.TempDir(), "kv.ipc")
	p, err := NewPublisher(ctx, addr, WithLinger(200*time.Millisecond), WithQueueBytes(queueBytes),
		WithReplay("tcp://127.0.0.1:0", DefaultReplayBuffer), WithReplayBytes(replayBytes),
		WithPublisherLogger(slog.New(slog.NewTextHandler(&lockedWriter{&logs, &logMu}, nil))))
	if err != nil {
		t.Fatal(err)
	}
	_, c := stuckAndHealthy(ctx, t, p, addr)
	const n, blocks, blockSize = 200, 400, 16
	tokens := make([]int64, blocks*blockSize)
	for i := range tokens {
		tokens[i] = 100_000 + int64(i) // as a large vocabulary's ids: 5 bytes each
	}
	hashes := make([]Hash, blocks)
	var most, size int64
	for i := range n {
		for j := range hashes {
			hashes[j] = IntHash(uint64(i*blocks + j))
		}
		b := EventBatch{TS: float64(i), Events: []Event{&BlockStored{BlockHashes: hashes, TokenIDs: tokens, BlockSize: blockSize}}}
		if _, err := p.Publish(&b); err != nil {
			t.Fatal(err)
		}
		st := p.Stats()
		most = max(most, st.QueuedBytes)
		if st.ReplayBytes > replayBytes {
			t.Fatalf("after batch %d the replay buffer holds %d bytes, budget %d", i, st.ReplayBytes, replayBytes)
		}
		if size == 0 {
			size = st.ReplayBytes
		}
		// At the healthy subscriber's pace: ten batches at a time, so that
		// its queue stays under half the budget even while the publisher
		// still counts the ten it has written but not yet accounted for.
		if (i+1)%10 == 0 {
			c.wait(ctx, t, i+1)
		}
	}
	msgs := c.wait(ctx, t, n)
	for i, m := range msgs {
		if m.Seq != int64(i) || m.Missed != 0 {
			t.Fatalf("message %d: seq %d, missed %d", i, m.Seq, m.Missed)
		}
	}
	st := p.Stats()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d batches of %d bytes: at most %d bytes queued; replay holds %d bytes, %d trimmed; %d dropped",
		n, size, most, st.ReplayBytes, st.ReplayTrimmed, st.Dropped)
	if most > 2*queueBytes { // two subscribers, each within its budget
		t.Errorf("%d bytes queued, budget %d per subscriber", most, queueBytes)
	}
	if st.Dropped == 0 || st.ReplayTrimmed == 0 || n*size <= 2*replayBytes {
		t.Errorf("nothing was dropped or trimmed, or the batches (%d bytes) were too few to tell: %+v", size, st)
	}
	logMu.Lock()
	got := logs.String()
	logMu.Unlock()
	if strings.Count(got, "level=WARN") != 2 || !strings.Contains(got, "queue is full") || !strings.Contains(got, "byte budget") {
		t.Errorf("log %q, want one warning of the full queue and one of the replay buffer's budget", got)
	}
}

// wirePing is a ZMTP 3.1 PING command with a TTL of a second, as a peer
// that speaks heartbeats sends it.
var wirePing = append([]byte{0x04, 7, 4}, "PING\x00\x0a"...)

// frozenPublisher listens on loopback as a PUB that, on its first
// connection, sends its handshake and a heartbeat PING and then neither
// reads nor writes, as a SIGSTOPped engine; on later ones it sends batch
// 0 of topic "kv". It returns the endpoint and a channel of accepted
// connections.
func frozenPublisher(t *testing.T) (string, <-chan int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	greeting := append([]byte{0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 3, 1}, "NULL"...)
	greeting = append(greeting, make([]byte, 64-len(greeting))...)
	ready := append([]byte{0x04, 0x19, 5}, "READY\x0bSocket-Type\x00\x00\x00\x03PUB"...)
	payload, err := Encode(&EventBatch{Events: []Event{&AllBlocksCleared{}}}, EncodingMixed)
	if err != nil {
		t.Fatal(err)
	}
	batch := slices.Concat([]byte{1, 2}, []byte("kv"), []byte{1, 8}, seqBytes(0), []byte{0, byte(len(payload))}, payload)
	accepted := make(chan int, 8)
	go func() {
		for i := 0; ; i++ {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { nc.Close() })
			out := slices.Concat(greeting, ready, wirePing)
			if i > 0 {
				out = slices.Concat(greeting, ready, batch)
			}
			nc.Write(out)
			accepted <- i
		}
	}()
	return "tcp://" + l.Addr().String(), accepted
}

// TestFrozenPublisher: a subscriber drops a publisher that sent a
// heartbeat and then went silent, within its heartbeat timeout, counts
// and logs it once, and connects again.
func TestFrozenPublisher(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	var logs bytes.Buffer
	var logMu sync.Mutex
	endpoint, accepted := frozenPublisher(t)
	const timeout = 300 * time.Millisecond
	s, err := NewSubscriber(ctx, endpoint, WithSubscriberHeartbeat(50*time.Millisecond, timeout),
		WithSubscriberLogger(slog.New(slog.NewTextHandler(&lockedWriter{&logs, &logMu}, nil))))
	if err != nil {
		t.Fatal(err)
	}
	c := runSubscriber(ctx, t, s, nil)
	<-accepted
	start := time.Now()
	select {
	case <-accepted:
	case <-ctx.Done():
		t.Fatal("the subscriber did not connect again")
	}
	if d := time.Since(start); d < timeout/2 {
		t.Errorf("dropped after %v, timeout %v", d, timeout)
	}
	c.wait(ctx, t, 1)
	if st := s.Stats(); st.TimedOut != 1 || st.Delivered != 1 {
		t.Errorf("stats %+v, want one timed out, one delivered", st)
	}
	logMu.Lock()
	got := logs.String()
	logMu.Unlock()
	if strings.Count(got, "level=WARN") != 1 || !strings.Contains(got, "gone silent") {
		t.Errorf("log %q, want one warning of the silent publisher", got)
	}
}

// TestNewEngineNotLockedOut: a hostile publisher fills a listening
// mirror's topics, past its limit, with one tiny message each; then an
// engine publishes. Its topic takes the place of the one heard from least
// recently, so the mirror holds its blocks, and the mirror holds no more
// topics than the subscriber follows: released topics take their state
// with them.
func TestNewEngineNotLockedOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	const topics, flooded, batches = 16, 20, 5
	m, err := NewMirror(1000)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSubscriber(ctx, "tcp://127.0.0.1:0", WithListen(), WithMaxTopics(topics), WithSubscriberLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	runSubscriber(ctx, t, s, m.Handle)
	addr := "tcp://" + s.Addr().String()
	flood := hostilePub(ctx, t, addr)
	for i := range flooded {
		payload, err := Encode(&EventBatch{Events: []Event{stored(nil, uint64(i+1))}}, EncodingMixed)
		if err != nil {
			t.Fatal(err)
		}
		if err := flood.WriteMsg([][]byte{[]byte(fmt.Sprint("flood-", i)), seqBytes(0), payload}); err != nil {
			t.Fatal(err)
		}
	}
	// The flood handled before the engine speaks: the subscriber reads
	// its connections in turn, so the flood's later topics could
	// otherwise come after the engine's and release it in their turn.
	waitStats(ctx, s.Stats, func(st Stats) bool { return st.Delivered >= flooded })
	p, err := NewPublisher(ctx, addr, WithTopic("kv@engine"), WithPublisherDirection(Connect), WithLinger(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	waitSubscribed(ctx, t, p.pub)
	for i := range batches {
		if _, err := p.Publish(&EventBatch{Events: []Event{stored(nil, uint64(100+i))}}); err != nil {
			t.Fatal(err)
		}
	}
	st := waitStats(ctx, s.Stats, func(st Stats) bool { return st.Delivered >= flooded+batches })
	if st.Released < flooded-topics || st.Refused != 0 {
		t.Errorf("stats %+v: want at least %d topics released, none refused", st, flooded-topics)
	}
	// A message is counted delivered before the mirror handles it.
	var engine *TopicStats
	held := waitStats(ctx, m.Topics, func(held []TopicStats) bool {
		engine = nil
		for i := range held {
			if held[i].Topic == "kv@engine" {
				engine = &held[i]
			}
		}
		return engine != nil && engine.Batches == batches
	})
	if engine == nil || engine.Batches != batches || engine.ResidentBlocks != batches {
		t.Fatalf("the engine's topic: %+v, want its %d batches and blocks", engine, batches)
	}
	if len(held) > topics {
		t.Errorf("the mirror holds %d topics, the subscriber follows %d", len(held), topics)
	}
}

// replayPublisher returns a publisher with a replay buffer of buffer
// batches, and a func that publishes n batches of size bytes and a little
// more each: a bytes hash of size bytes, quick to encode. Every replay
// client may come from 127.0.0.1: as many as the socket holds (the default
// per address is a sixteenth of them). The tests that use it move tens of
// MiB through replay answers, which the race detector slows past the
// replay deadline: they skip under it.
func replayPublisher(ctx context.Context, t *testing.T, buffer, size int) (*Publisher, func(n int)) {
	t.Helper()
	if raceEnabled {
		t.Skip("moves tens of MiB through replay answers, which the race detector slows past the replay deadline")
	}
	p := sinkPublisher(ctx, t, WithReplay("tcp://127.0.0.1:0", buffer), WithMaxSubscribersPerAddress(DefaultMaxPeers),
		WithPublisherLogger(slog.New(slog.DiscardHandler)))
	hash := []Hash{BytesHash(make([]byte, size))}
	return p, func(n int) {
		for range n {
			if _, err := p.Publish(&EventBatch{Events: []Event{&BlockStored{BlockHashes: hash}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestSlowReplayReaders: replay clients that ask for the whole buffer and
// then stop reading hold what their answer is writing, not the buffer as
// it was when they asked: while the buffer turns over three times under
// them, the live heap stays within the buffer plus a batch a client,
// where answers that kept the buffer of their request would hold one more
// buffer at least, and payloads kept with the encoder's spare room up to
// twice their bytes. Read on, each answer passes over the batches the
// buffer let go, and ends.
func TestSlowReplayReaders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*testTimeout)
	defer cancel()
	const clients, buffer, size = 16, 64, 256 << 10
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	p, publish := replayPublisher(ctx, t, buffer, size)
	publish(buffer)
	var ds []*zmtp.Conn
	for range clients {
		d := dialReplay(ctx, t, p)
		d.NetConn().(*net.TCPConn).SetReadBuffer(64 << 10)
		if err := d.WriteMsg([][]byte{nil, seqBytes(0)}); err != nil {
			t.Fatal(err)
		}
		if seq, _ := replayAnswer(t, d, ""); seq != 0 {
			t.Fatalf("the answer starts at %d", seq)
		}
		ds = append(ds, d)
	}
	publish(3 * buffer)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	grew := int64(ms.HeapAlloc - before)
	t.Logf("the live heap grew by %d bytes with %d slow replay clients", grew, clients)
	// The buffer, whose payloads take the bytes they count, a batch a
	// client in flight, and room for the connections' buffers and the
	// test's own.
	if limit := int64((buffer+clients)*size + 8<<20); grew > limit {
		t.Errorf("the live heap grew by %d bytes with %d slow replay clients, want at most %d", grew, clients, limit)
	}
	for i, d := range ds {
		d.SetDeadline(time.Now().Add(testTimeout)) // for the rest of its answer
		n := 1
		for {
			seq, _ := replayAnswer(t, d, "")
			if seq == endSeq {
				break
			}
			n++
		}
		if n >= buffer {
			t.Errorf("client %d: %d batches of an answer whose buffer was let go", i, n)
		}
	}
}

// TestFastReplayReaders: replay clients that ask for the whole buffer
// again and again and read each answer at once, while the buffer turns
// over three times: the heap grows by a batch a client in flight and
// room for the connections and the collector, where answers that kept the
// buffer of their request would each pin the generation the buffer let go
// while they were read.
func TestFastReplayReaders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*testTimeout)
	defer cancel()
	const clients, buffer, size = 8, 64, 256 << 10
	// Garbage kept within a fifth of the live heap, so that the peak
	// sampled is the live heap's, whatever the collector's pace.
	defer debug.SetGCPercent(debug.SetGCPercent(20))
	p, publish := replayPublisher(ctx, t, buffer, size)
	publish(buffer)
	var ds []*zmtp.Conn
	for range clients {
		ds = append(ds, dialReplay(ctx, t, p))
	}
	var answers atomic.Int64
	errs := make(chan error, clients)
	peak := heapPeak(func() {
		done := make(chan struct{})
		var wg sync.WaitGroup
		for _, d := range ds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-done:
						errs <- nil
						return
					default:
					}
					d.SetDeadline(time.Now().Add(testTimeout)) // for this answer
					if err := d.WriteMsg([][]byte{nil, seqBytes(0)}); err != nil {
						errs <- err
						return
					}
					for {
						f, err := d.ReadMsg()
						if err != nil {
							errs <- err
							return
						}
						if len(f) == 4 && int64(binary.BigEndian.Uint64(f[2])) == endSeq {
							break
						}
					}
					answers.Add(1)
				}
			}()
		}
		publish(3 * buffer)
		close(done)
		wg.Wait()
	})
	for range clients {
		if err := <-errs; err != nil {
			t.Fatalf("%v after %d answers; %+v", err, answers.Load(), p.Stats())
		}
	}
	t.Logf("the heap held at most %d bytes more over %d answers to %d fast replay clients", peak, answers.Load(), clients)
	if answers.Load() < clients {
		t.Errorf("%d answers to %d clients", answers.Load(), clients)
	}
	// Above the buffer, held before: a batch a client at each end, sent
	// and received, twice over for what the collector has yet to free,
	// and room for the connections' buffers and the test's own.
	if limit := int64(4*clients*size + 12<<20); peak > limit {
		t.Errorf("the heap grew by %d bytes with %d fast replay clients, want at most %d", peak, clients, limit)
	}
}
