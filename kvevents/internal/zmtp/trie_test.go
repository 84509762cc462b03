package zmtp

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// matched returns the peers the trie finds for topic, sorted by label.
func (t *trie) matched(topic string) []string {
	var out []string
	t.match([]byte(topic), func(pp *pubPeer) { out = append(out, pp.c.label) })
	slices.Sort(out)
	return out
}

// want returns the peers of subs holding a prefix of topic, by brute
// force, sorted by label.
func want(subs map[*pubPeer]map[string]bool, topic string) []string {
	var out []string
	for pp, ss := range subs {
		for s := range ss {
			if strings.HasPrefix(topic, s) {
				out = append(out, pp.c.label)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// empty reports whether the trie holds nothing: every node pruned.
func (t *trie) empty() bool { return len(t.root.kids) == 0 && len(t.root.peers) == 0 }

// Random subscriptions and cancellations over a small alphabet, so that
// prefixes share edges, split and merge: the trie matches what a scan of
// every peer's prefixes matches, each peer once, and is empty when they
// are all cancelled.
func TestTrie(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		b := make([]byte, r.IntN(6))
		for i := range b {
			b[i] = "ab\x00\xff"[r.IntN(4)]
		}
		return string(b)
	}
	var tr trie
	subs := make(map[*pubPeer]map[string]bool)
	var peers []*pubPeer
	for i := range 8 {
		pp := newPubPeer(&Conn{label: fmt.Sprint("peer", i)})
		peers = append(peers, pp)
		subs[pp] = make(map[string]bool)
	}
	for step := range 20000 {
		pp, w := peers[r.IntN(len(peers))], word()
		switch {
		case subs[pp][w]:
			tr.remove(w, pp)
			delete(subs[pp], w)
		default:
			tr.add(w, pp)
			subs[pp][w] = true
		}
		topic := word() + word()
		if got, want := tr.matched(topic), want(subs, topic); !slices.Equal(got, want) {
			t.Fatalf("step %d: topic %q matched %v, want %v", step, topic, got, want)
		}
	}
	for pp, ss := range subs {
		for s := range ss {
			tr.remove(s, pp)
		}
	}
	if !tr.empty() {
		t.Errorf("after every cancel the trie keeps %d children and %d peers at its root", len(tr.root.kids), len(tr.root.peers))
	}
}

// FuzzSubscriptions feeds arbitrary bytes, after a SUB's handshake, to
// the PUB's subscription reader: it never panics, a peer holds at most
// maxSubscriptions, the trie matches exactly the peer's prefixes, and
// once the peer is gone the trie is empty.
func FuzzSubscriptions(f *testing.F) {
	hello := append(rawGreeting(1), rawReady("SUB")...)
	f.Add(rawMsg([]byte("\x01kv@a")))
	f.Add(slices.Concat(rawMsg([]byte("\x01kv@a")), rawMsg([]byte("\x01kv@")), rawMsg([]byte("\x00kv@a"))))
	f.Add(slices.Concat(command("SUBSCRIBE", []byte("kv@b")), command("SUBSCRIBE", nil), command("CANCEL", nil)))
	f.Add(slices.Concat(rawMsg([]byte{1}), command("PING", []byte{0, 10, 'c'}), rawMsg([]byte("x"), []byte("y"))))
	f.Add([]byte{0x04, 0x05, 0x04, 'P', 'I', 'N', 'G'})
	f.Fuzz(func(t *testing.T, data []byte) {
		p := NewPub(PubOptions{Limits: Limits{Frames: []int{64}, MaxFrames: 1}})
		defer p.Close(0)
		c := p.s.newConn(&fakeConn{r: bytes.NewReader(append(hello[:len(hello):len(hello)], data...))}, endpoint{raw: "fuzz"}, true)
		if err := c.handshake("PUB", nil, time.Time{}, nil); err != nil {
			t.Fatal(err)
		}
		pp := newPubPeer(c)
		p.read(pp)
		if n := p.ReadBytes(); n != 0 {
			t.Fatalf("%d bytes of the read budget still held", n)
		}
		if len(pp.subs) > maxSubscriptions {
			t.Fatalf("%d subscriptions", len(pp.subs))
		}
		subs := map[*pubPeer]map[string]bool{pp: {}}
		for s := range pp.subs {
			subs[pp][s] = true
		}
		for s := range pp.subs {
			for _, topic := range []string{s, s + "x", s[:len(s)/2]} {
				if got, want := p.subs.matched(topic), want(subs, topic); !slices.Equal(got, want) {
					t.Fatalf("topic %q matched %v, want %v", topic, got, want)
				}
			}
		}
		for s := range pp.subs {
			p.subs.remove(s, pp)
		}
		if !p.subs.empty() {
			t.Fatal("the trie keeps nodes after the peer's prefixes are gone")
		}
	})
}

// benchPub returns a Pub with one subscriber to topic and others more
// subscribers each holding prefixes prefixes that do not match it; each
// subscriber's connection takes and discards what is written.
func benchPub(b *testing.B, topic string, others, prefixes int) *Pub {
	p := NewPub(PubOptions{Limits: Limits{Queue: 1 << 30, QueueBytes: 1 << 40}})
	b.Cleanup(func() { p.Close(0) })
	peer := func(i int, subs ...string) {
		c := newConn(&fakeConn{r: blocked{}}, p.s.lim, nil, fmt.Sprint("peer", i))
		pp := newPubPeer(c)
		for _, s := range subs {
			if err := p.subscribe(pp, []byte(s), true); err != nil {
				b.Fatal(err)
			}
		}
		p.mu.Lock()
		p.peers[pp] = struct{}{}
		p.mu.Unlock()
		go p.write(pp)
		b.Cleanup(func() { pp.shut(); <-pp.done })
	}
	peer(0, topic)
	for i := range others {
		subs := make([]string, prefixes)
		for j := range subs {
			subs[j] = fmt.Sprintf("kv@pod-%d-%d@model", i, j) // as engines' topics are, none a prefix of the topic
		}
		peer(i+1, subs...)
	}
	return p
}

// blocked is a reader that never returns, as a subscriber that sends no
// more.
type blocked struct{}

func (blocked) Read([]byte) (int, error) { select {} }

// BenchmarkSend measures Send to one matching subscriber, alone and
// beside 1,000 subscribers each holding 1,024 prefixes that do not
// match: the trie makes the two cost about the same.
func BenchmarkSend(b *testing.B) {
	const topic = "kv@pod-engine@Qwen/Qwen3-0.6B"
	for _, bc := range []struct {
		name             string
		others, prefixes int
	}{
		{"one", 0, 0},
		{"beside1000x1024", 1000, 1024},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := benchPub(b, topic, bc.others, bc.prefixes)
			msg := [][]byte{[]byte(topic), seq(1), make([]byte, 100)}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := p.Send(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
