package kvevents_test

import (
	"fmt"

	"github.com/sagellm/kvevict/kvevents"
)

// A router mirrors an engine's events and scores a request by the prefix
// that engine holds.
func ExampleMirror() {
	m, err := kvevents.NewMirror(1000)
	if err != nil {
		panic(err)
	}
	parent := kvevents.IntHash(2)
	m.Apply("kv@pod-0@m", &kvevents.EventBatch{Events: []kvevents.Event{
		&kvevents.BlockStored{BlockHashes: kvevents.IntHashes([]uint64{1, 2}), BlockSize: 16},
		&kvevents.BlockStored{BlockHashes: kvevents.IntHashes([]uint64{3}), ParentBlockHash: &parent, BlockSize: 16},
		&kvevents.BlockRemoved{BlockHashes: kvevents.IntHashes([]uint64{3})},
	}})
	request := kvevents.IntHashes([]uint64{1, 2, 3, 4})
	fmt.Println("pod-0 holds", m.Match("kv@pod-0@m", request), "blocks of the request")
	fmt.Println("pod-1 holds", m.Match("kv@pod-1@m", request))
	// Output:
	// pod-0 holds 2 blocks of the request
	// pod-1 holds 0
}

// Decode reads either encoding; here a batch from an engine that used
// msgspec's array_like structs.
func ExampleDecode() {
	payload := []byte{
		0x92, 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, // [1.5,
		0x91, 0x93, 0xac, 'B', 'l', 'o', 'c', 'k', 'R', 'e', 'm', 'o', 'v', 'e', 'd', //  [["BlockRemoved",
		0x92, 0x01, 0x02, 0xa3, 'G', 'P', 'U', //    [1, 2], "GPU"]]]
	}
	b, skipped, err := kvevents.Decode(payload)
	if err != nil {
		panic(err)
	}
	r := b.Events[0].(*kvevents.BlockRemoved)
	fmt.Println(b.TS, r.Type(), r.BlockHashes, *r.Medium, skipped.Total())
	// Output: 1.5 BlockRemoved [1 2] GPU 0
}

// A consumer of a stream of batches decodes each into the memory of the
// one before with a Decoder, and lets go of the batch before the next
// call: here each batch goes to a Mirror, which keeps nothing of it.
func ExampleDecoder() {
	m, err := kvevents.NewMirror(1000)
	if err != nil {
		panic(err)
	}
	var dec kvevents.Decoder
	for _, hashes := range [][]uint64{{1, 2}, {3}} {
		payload, err := kvevents.Encode(&kvevents.EventBatch{Events: []kvevents.Event{
			&kvevents.BlockStored{BlockHashes: kvevents.IntHashes(hashes), BlockSize: 16},
		}}, kvevents.EncodingMixed)
		if err != nil {
			panic(err)
		}
		b, _, err := dec.Decode(payload) // valid until the next call
		if err != nil {
			panic(err)
		}
		m.Apply("kv@pod-0@m", &b)
	}
	fmt.Println("pod-0 holds", m.Topics()[0].ResidentBlocks, "blocks")
	// Output: pod-0 holds 3 blocks
}

// A hybrid model keeps a KV cache group per attention type: a block its
// sliding-window group drops is still resident in its full-attention
// group, and a router that needs the full-attention prefix whole asks for
// that group alone.
func ExampleMirror_MatchGroup() {
	m, err := kvevents.NewMirror(1000)
	if err != nil {
		panic(err)
	}
	full, window := int64(0), int64(1)
	hashes := kvevents.IntHashes([]uint64{1, 2, 3})
	m.Apply("kv@pod-0@m", &kvevents.EventBatch{Events: []kvevents.Event{
		&kvevents.BlockStored{BlockHashes: hashes, GroupIdx: &full, BlockSize: 16},
		&kvevents.BlockStored{BlockHashes: hashes, GroupIdx: &window, BlockSize: 16},
		&kvevents.BlockRemoved{BlockHashes: hashes[:1], GroupIdx: &window}, // slid out of the window
		&kvevents.BlockRemoved{BlockHashes: hashes[2:], GroupIdx: &full},
	}})
	fmt.Println("any group:", m.Match("kv@pod-0@m", hashes))
	fmt.Println("full attention:", m.MatchGroup("kv@pod-0@m", full, hashes))
	fmt.Println("sliding window:", m.MatchGroup("kv@pod-0@m", window, hashes))
	fmt.Println("resident on the GPU:", m.Topics()[0].ResidentBlocks)
	// Output:
	// any group: 3
	// full attention: 2
	// sliding window: 0
	// resident on the GPU: 3
}
