// Package kvevents speaks vLLM's KV cache events
// (vllm/distributed/kv_events.py), the wire protocol through which the
// engines of a serving cluster tell a KV-aware router (llm-d's KV-cache
// indexer, aibrix, kthena) which blocks they cache and evict.
//
// The protocol: a ZeroMQ PUB socket sends messages of three frames, a topic
// (empty by default; llm-d uses "kv@<pod>@<model>"), an 8-byte big-endian
// sequence number that starts at 0 and grows by one per message, and a
// msgpack [EventBatch] of [BlockStored], [BlockRemoved] and
// [AllBlocksCleared] events. An optional ROUTER socket replays buffered
// batches from a sequence number on, ending with sequence -1 and an empty
// payload.
//
// The pieces:
//   - [Encode] and [Decode]: the payload in vLLM's two encodings
//     ([EncodingMap], the current one, and [EncodingArray], msgspec's
//     array_like, which vLLM used first); Decode reads both and any mix.
//   - [Publisher]: the PUB socket, sequence numbers and the replay socket.
//   - [Subscriber]: the SUB socket, gap detection and catch-up by replay;
//     bad input is counted, logged once per kind and skipped.
//   - [FromPrefix]: a [prefix.Tree]'s events as vLLM events, so a
//     kvevict-managed pool can feed a router.
//   - [Mirror]: one engine's blocks per topic, bounded, answering the
//     longest resident prefix of a request, which is what a router scores.
//
// docs/kvevents.md has the protocol notes and the byte layouts.
package kvevents
