package kvevents

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var pythonFlag = flag.String("python", "", "a python3 with python3-msgpack, which BenchmarkCodec times decoding the same bytes as Decode (default: python3 or /usr/bin/python3, the first that has it)")

var liveFlag = flag.Int("live-mb", 0, "MiB of pointer-free memory that BenchmarkCodec keeps live, as a router's mirror tables are, so that the collector runs as often per batch as in such a process (default: none, a bare test process)")

// live is what -live-mb keeps live; holdLive makes it once.
var (
	live     []byte
	holdLive = sync.OnceFunc(func() {
		if *liveFlag > 0 {
			live = make([]byte, *liveFlag<<20)
			for i := range live {
				live[i] = byte(i) // touched, as a live table's pages are
			}
		}
	})
)

// python returns the python3 that BenchmarkCodec runs, or "" if none
// imports msgpack's C extension.
var python = sync.OnceValue(func() string {
	candidates := []string{"python3", "/usr/bin/python3"}
	if *pythonFlag != "" {
		candidates = []string{*pythonFlag}
	}
	for _, py := range candidates {
		if exec.Command(py, "-c", "from msgpack import _cmsgpack").Run() == nil {
			return py
		}
	}
	return ""
})

// pythonDecode returns the nanoseconds python3-msgpack's C extension takes
// to decode payload (testdata/msgpack_decode.py), or 0 if there is no such
// python.
func pythonDecode(b *testing.B, payload []byte) float64 {
	py := python()
	if py == "" {
		return 0
	}
	file := filepath.Join(b.TempDir(), "batch.msgpack")
	if err := os.WriteFile(file, payload, 0o600); err != nil {
		b.Fatal(err)
	}
	out, err := exec.Command(py, filepath.Join("testdata", "msgpack_decode.py"), file).Output()
	if err != nil {
		b.Fatalf("%s testdata/msgpack_decode.py: %v", py, err)
	}
	ns, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		b.Fatalf("testdata/msgpack_decode.py printed %q", out)
	}
	return ns
}

// reportPython reports, beside a decode of payload, python3-msgpack's
// time to decode it, when a python3 has the C extension.
func reportPython(b *testing.B, payload []byte) {
	if ns := pythonDecode(b, payload); ns > 0 {
		b.ReportMetric(ns, "py-ns/op")
		b.ReportMetric(float64(len(payload))/ns*1e3, "py-MB/s")
	}
}

// benchBatch is a batch as an engine sends one per scheduler step: a
// request's new blocks stored under its resident prefix, and as many
// leaves removed to make room.
func benchBatch(blocks int) EventBatch {
	gpu := MediumGPU
	stored := make([]uint64, blocks)
	removed := make([]uint64, blocks)
	for i := range stored {
		stored[i] = uint64(i)*0x9e3779b97f4a7c15 | 1<<63
		removed[i] = uint64(i) * 0xbf58476d1ce4e5b9
	}
	return EventBatch{TS: 1.5, Events: []Event{
		&BlockStored{BlockHashes: IntHashes(stored), ParentBlockHash: ptr(IntHash(7)), TokenIDs: []int64{}, BlockSize: 16, Medium: &gpu},
		&BlockRemoved{BlockHashes: IntHashes(removed), Medium: &gpu},
	}}
}

// floorSink and floorMore keep what BenchmarkCodec's floor allocates, so that the
// compiler cannot leave the allocations out.
var (
	floorSink []Event
	floorMore *storedMore
)

// allocLike allocates the memory Decode gives a batch of the shape of
// got, of the same types: its events' slice, a box per event and its
// lists. The API's types fix most of these bytes, so a decoder whose batch
// a caller may keep allocates about as much at least.
func allocLike(got *EventBatch) []Event {
	evs := make([]Event, 0, len(got.Events))
	for _, ev := range got.Events {
		switch e := ev.(type) {
		case *BlockStored:
			s := new(storedBox)
			s.ev.BlockHashes = make([]Hash, len(e.BlockHashes))
			s.ev.TokenIDs = make([]int64, len(e.TokenIDs))
			if e.LoRAID != nil || e.GroupIdx != nil || e.KVCacheSpecSlidingWindow != nil || e.LoRAName != nil || e.KVCacheSpecKind != nil {
				floorMore = new(storedMore)
			}
			evs = append(evs, &s.ev)
		case *BlockRemoved:
			r := new(removedBox)
			r.ev.BlockHashes = make([]Hash, len(e.BlockHashes))
			evs = append(evs, &r.ev)
		}
	}
	return evs
}

// BenchmarkCodec encodes and decodes benchBatch in each encoding, with
// Decode ("decode") and with a Decoder reused across batches ("decoder").
// Beside each decode it reports python3-msgpack's C extension decoding the same
// bytes, as py-ns/op and py-MB/s, when a python3 has it (see -python).
// "floor" allocates what Decode's batch holds, and parses nothing: what
// Decode costs beyond the reused Decoder's parse is at least this.
// With -live-mb the process holds that much live memory, as a router
// does, and its collector runs less often per batch (docs/kvevents.md).
func BenchmarkCodec(b *testing.B) {
	if *liveFlag < 0 {
		b.Fatalf("-live-mb %d: want a size in MiB, 0 or more", *liveFlag)
	}
	holdLive()
	for _, blocks := range []int{16, 256} {
		batch := benchBatch(blocks)
		b.Run(fmt.Sprintf("floor/blocks=%d", blocks), func(b *testing.B) {
			payload, err := Encode(&batch, EncodingArray)
			if err != nil {
				b.Fatal(err)
			}
			got, _, err := Decode(payload)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				floorSink = allocLike(&got)
			}
		})
		for _, enc := range []Encoding{EncodingMixed, EncodingMap, EncodingArray} {
			payload, err := Encode(&batch, enc)
			if err != nil {
				b.Fatal(err)
			}
			name := fmt.Sprintf("blocks=%d/%s", blocks, enc)
			b.Run("encode/"+name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Encode(&batch, enc); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("decode/"+name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(payload)))
				for b.Loop() {
					if _, _, err := Decode(payload); err != nil {
						b.Fatal(err)
					}
				}
				reportPython(b, payload)
			})
			b.Run("decoder/"+name, func(b *testing.B) {
				var d Decoder
				b.ReportAllocs()
				b.SetBytes(int64(len(payload)))
				for b.Loop() {
					if _, _, err := d.Decode(payload); err != nil {
						b.Fatal(err)
					}
				}
				reportPython(b, payload)
			})
		}
	}
}

// BenchmarkMirrorApply applies batches that store 16 blocks each to a
// mirror of 10,000 blocks, and of 100,000 (a large engine's pool, whose
// index no longer fits a core's cache), in two shapes:
//   - evicting: the mirror is full, so every batch also evicts 16; ns/block
//     is the time per block stored (and one evicted);
//   - removed: the engine's own traffic to a mirror sized for it, which
//     never evicts: each batch removes the oldest 16 blocks (BlockRemoved,
//     deepest first) and stores 16; ns/block is per block of either
//     event, so a block's life costs two.
//
// Beside each, as a yardstick of the machine in the same run,
// map-ns/block is the time Go's own map of as many integer keys takes to
// insert a key and delete the oldest.
func BenchmarkMirrorApply(b *testing.B) {
	for _, shape := range []string{"evicting", "removed"} {
		for _, capacity := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/blocks=%d", shape, capacity), func(b *testing.B) {
				benchmarkMirrorApply(b, shape, capacity)
			})
		}
	}
}

func benchmarkMirrorApply(b *testing.B, shape string, capacity int) {
	m, err := NewMirror(capacity)
	if err != nil {
		b.Fatal(err)
	}
	stored := &BlockStored{BlockHashes: make([]Hash, 16)}
	removed := &BlockRemoved{BlockHashes: make([]Hash, 16)}
	batch := EventBatch{Events: []Event{stored}}
	var next, oldest uint64
	store := func() {
		for i := range stored.BlockHashes {
			stored.BlockHashes[i] = IntHash(next)
			next++
		}
	}
	if shape == "removed" {
		for range capacity / len(stored.BlockHashes) {
			store()
			m.Apply("e", &batch)
		}
		// The engine frees the blocks it reuses, then stores.
		batch.Events = []Event{removed, stored}
	}
	b.ReportAllocs()
	for b.Loop() {
		store()
		if shape == "removed" {
			for i := range removed.BlockHashes {
				removed.BlockHashes[len(removed.BlockHashes)-1-i] = IntHash(oldest)
				oldest++
			}
		}
		m.Apply("e", &batch)
	}
	blocks := len(stored.BlockHashes)
	if shape == "removed" {
		blocks += len(removed.BlockHashes)
		if got := m.Topics()[0].EvictedBlocks; got != 0 {
			b.Fatalf("a mirror sized for the engine evicted %d blocks", got)
		}
	}
	reportPerBlock(b, blocks)
	b.ReportMetric(mapChurn(capacity, min(b.N*len(stored.BlockHashes), 1<<20)), "map-ns/block")
}

// reportPerBlock reports ns/block: the benchmark's time over its b.N
// operations of blocks blocks each.
func reportPerBlock(b *testing.B, blocks int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*blocks), "ns/block")
}

// mapChurn returns the nanoseconds a Go map of capacity integer keys
// takes, on average over n keys, to insert a new key and delete the
// oldest.
func mapChurn(capacity, n int) float64 {
	m := make(map[uint64]int32, capacity)
	for k := range uint64(capacity) {
		m[k] = int32(k)
	}
	start := time.Now()
	for k := uint64(capacity); k < uint64(capacity+n); k++ {
		m[k] = int32(k)
		delete(m, k-uint64(capacity))
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n)
}

// BenchmarkMirrorMatch scores a request against one engine, as a router
// does for each engine at each request: Match over a 64-block prompt whose
// blocks the mirror holds, in a mirror full of such chains (10,000 and
// 100,000 blocks), a different chain each time, one request at a time
// and as many at once as GOMAXPROCS. ns/block is per block matched.
func BenchmarkMirrorMatch(b *testing.B) {
	const length = 64
	for _, capacity := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("blocks=%d", capacity), func(b *testing.B) {
			m, err := NewMirror(capacity)
			if err != nil {
				b.Fatal(err)
			}
			chains := make([][]Hash, capacity/length)
			for c := range chains {
				chains[c] = intChain(c, length)
				m.Apply("e", &EventBatch{Events: []Event{&BlockStored{BlockHashes: chains[c]}}})
			}
			// A stride coprime with the count visits every chain, in an
			// order that no cache line carries from one to the next.
			next := func(c int) int { return (c + 7919) % len(chains) }
			b.Run("serial", func(b *testing.B) {
				c := 0
				for b.Loop() {
					c = next(c)
					if got := m.Match("e", chains[c]); got != length {
						b.Fatalf("chain %d matches %d blocks, want %d", c, got, length)
					}
				}
				reportPerBlock(b, length)
			})
			// parallel: as many requests at once as GOMAXPROCS, as a
			// router's; ns/block is wall time over every block matched.
			b.Run("parallel", func(b *testing.B) {
				b.RunParallel(func(pb *testing.PB) {
					c := 0
					for pb.Next() {
						c = next(c)
						if got := m.Match("e", chains[c]); got != length {
							b.Errorf("chain %d matches %d blocks, want %d", c, got, length)
							return
						}
					}
				})
				reportPerBlock(b, length)
			})
		})
	}
}

// BenchmarkPublishSubscribe sends batches of 16 stored blocks (with their
// token ids, as an engine sends them) from a Publisher to a Subscriber over
// a unix socket and a loopback TCP connection, one round trip at a time
// through the whole stack: encode, the transport, decode, delivery.
func BenchmarkPublishSubscribe(b *testing.B) {
	for _, transport := range []string{"ipc", "tcp"} {
		b.Run(transport, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var p *Publisher
			var s *Subscriber
			var err error
			if transport == "ipc" {
				addr := "ipc://" + filepath.Join(b.TempDir(), "kv.ipc")
				if p, err = NewPublisher(ctx, addr, WithLinger(0)); err == nil {
					s, err = NewSubscriber(ctx, addr)
				}
			} else if s, err = NewSubscriber(ctx, "tcp://127.0.0.1:0", WithListen()); err == nil {
				p, err = NewPublisher(ctx, "tcp://"+s.Addr().String(), WithLinger(0))
			}
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			got := make(chan struct{}, 1)
			go s.Run(ctx, func(Message) { got <- struct{}{} })
			if err := p.pub.WaitSubscribers(ctx, 1); err != nil {
				b.Fatal(err)
			}
			batch := benchBatch(16)
			batch.Events[0].(*BlockStored).TokenIDs = make([]int64, 16*16)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Publish(&batch); err != nil {
					b.Fatal(err)
				}
				<-got
			}
		})
	}
}
