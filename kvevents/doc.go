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
//   - [Encode] and [Decode]: the payload in every encoding vLLM has used
//     ([EncodingMixed], what current vLLM sends and llm-d reads, the
//     default; [EncodingMap]; [EncodingArray], msgspec's array_like, which
//     vLLM used first); Decode reads all of them and any mix, within an
//     allocation bound.
//   - [Publisher]: the PUB socket, sequence numbers, a bounded queue per
//     subscriber that drops for a slow one alone, and the replay socket.
//   - [Subscriber]: the SUB socket, gaps, late joins and publisher
//     restarts caught up by replay; bad input is counted, logged once per
//     kind and skipped, and every limit holds before what it bounds is
//     allocated.
//   - [FromPrefix]: a [prefix.Tree]'s events as vLLM events, so a
//     kvevict-managed pool can feed a router; [FromTier] likewise for a
//     [tier.Hierarchy]'s, each with its tier's medium.
//   - [Mirror]: one engine's blocks per topic, KV cache group and medium,
//     bounded, answering the longest resident prefix of a request, which
//     is what a router scores, and where each block has a copy
//     ([Mirror.ResidentOn]).
//
// The sockets speak ZMTP 3.0 in plain Go, with no cgo and no system
// library, and interoperate with libzmq (vLLM's pyzmq) and go-zeromq/zmq4
// (llm-d's indexer). docs/kvevents.md has the protocol notes, which peer
// reads which form, every limit and the byte layouts.
package kvevents
