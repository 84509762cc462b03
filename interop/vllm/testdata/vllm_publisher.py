#!/usr/bin/env python3
"""A stand-in for a vLLM engine's KV events publisher, on pyzmq (libzmq).

It publishes as vLLM's ZmqEventPublisher (vllm/distributed/kv_events.py)
does, written from the wire format, not from vLLM's code:

  * a PUB socket with a high-water mark of 100000 that binds when the
    endpoint holds "*" or "::" or is ipc:// or inproc://, else connects;
  * an optional ROUTER socket that binds and serves replay requests;
  * each batch is one 3-frame message: the topic, the sequence number as
    8 bytes big-endian (0, 1, 2, ... per engine), and the msgpack payload
    [ts, [event, ...], data_parallel_rank], whose events are maps tagged
    by "type" (BlockStored, BlockRemoved, AllBlocksCleared);
  * a replay request [identity, b"", start] is answered with
    [identity, b"", topic, seq, payload] for every buffered batch numbered
    start or later (the buffer keeps the last buffer_steps batches), then
    [identity, b"", topic, -1 as 8 signed bytes, b""]; with
    --replay-no-topic the topic frame is left out, as vLLM first did.

A scenario (JSON, from a file or the command line) drives it:

  {
    "endpoint": "tcp://*:*",          # "*" as port: a free one, reported
    "replay_endpoint": "tcp://*:*",   # optional
    "topic": "kv@pod-0@model",
    "replay_no_topic": false,
    "buffer_steps": 10000,
    "hwm": 100000,
    "steps": [
      {"wait_peer": 10, "settle": 0.3},   # until a subscriber's handshake
      {"batches": [BATCH, ...], "interval": 0.0},
      {"pause": 0.5},
      {"mark": "name"},
      {"restart": 0.5}                    # close, wait, reopen, seq from 0
    ],
    "hold": 30                            # serve replay this long at the end
  }

  BATCH = {"ts": 1.5, "dp_rank": 0, "events": [EVENT, ...]}
  EVENT = {"type": "BlockStored", "block_hashes": [...],
           "parent_block_hash": null, "block_size": 16, "medium": "GPU",
           "token_ids": [...],            # default: block_size per hash
           "group_idx": 0, "kv_cache_spec_kind": "full_attention"}  # optional
        | {"type": "BlockRemoved", "block_hashes": [...], "medium": "GPU",
           "group_idx": 1}                # group_idx optional
        | {"type": "AllBlocksCleared"}

It reports what it does as JSON lines on stdout (bound endpoints, monitor
events of its sockets, replay requests served, marks) so that a test can
follow it, and exits after "hold" seconds, or when its standard input
closes if --exit-on-stdin-eof is given.
"""

import argparse
import json
import os
import sys
import time
from collections import deque

import msgpack
import zmq
from zmq.utils.monitor import recv_monitor_message

END_SEQ = (-1).to_bytes(8, "big", signed=True)

MONITOR_EVENTS = {}
for _name in dir(zmq.Event):
    if _name.isupper():
        MONITOR_EVENTS[int(getattr(zmq.Event, _name))] = _name


def report(event, **fields):
    fields = dict(event=event, t=round(time.monotonic(), 3), **fields)
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def binds(endpoint):
    """vLLM's rule: the stable side of the link binds."""
    return (
        "*" in endpoint
        or "::" in endpoint
        or endpoint.startswith("ipc://")
        or endpoint.startswith("inproc://")
    )


def check_int64(h, what):
    if isinstance(h, bool) or not isinstance(h, int):
        raise ValueError("%s %r is not an integer" % (what, h))
    if not (-(2 ** 63) <= h < 2 ** 64):
        raise ValueError("%s %d does not fit 64 bits" % (what, h))
    return h


def to_wire_event(ev):
    """One event as vLLM's msgspec encoder writes it: a map whose first key
    is the "type" tag, then the fields in their declared order."""
    kind = ev.get("type")
    if kind == "BlockStored":
        hashes = [check_int64(h, "block hash") for h in ev["block_hashes"]]
        parent = ev.get("parent_block_hash")
        if parent is not None:
            check_int64(parent, "parent block hash")
        block_size = int(ev.get("block_size", 16))
        tokens = ev.get("token_ids")
        if tokens is None:
            tokens = [(i * 7919) % 32000 for i in range(block_size * len(hashes))]
        out = {
            "type": "BlockStored",
            "block_hashes": hashes,
            "parent_block_hash": parent,
            "token_ids": tokens,
            "block_size": block_size,
            "lora_id": ev.get("lora_id"),
            "medium": ev.get("medium", "GPU"),
            "lora_name": ev.get("lora_name"),
        }
        if "group_idx" in ev:
            out["group_idx"] = int(ev["group_idx"])
        if "kv_cache_spec_kind" in ev:
            out["kv_cache_spec_kind"] = ev["kv_cache_spec_kind"]
        return out
    if kind == "BlockRemoved":
        out = {
            "type": "BlockRemoved",
            "block_hashes": [check_int64(h, "block hash") for h in ev["block_hashes"]],
            "medium": ev.get("medium", "GPU"),
        }
        if "group_idx" in ev:
            out["group_idx"] = int(ev["group_idx"])
        return out
    if kind == "AllBlocksCleared":
        return {"type": "AllBlocksCleared"}
    raise ValueError("unknown event type %r" % (kind,))


def to_payload(batch):
    """A batch as current vLLM encodes it: [ts, [events], dp_rank]."""
    ts = float(batch.get("ts", time.time()))
    events = [to_wire_event(e) for e in batch.get("events", [])]
    rank = int(batch.get("dp_rank", 0))
    # use_bin_type: strings as msgpack str, as msgspec writes them; ints
    # >= 2**63 come out as uint 64, floats as float 64.
    return msgpack.packb([ts, events, rank], use_bin_type=True)


class Engine:
    """One engine's publisher; restart() makes it a new engine."""

    def __init__(self, sc, stdin_fd):
        self.ctx = zmq.Context.instance()
        self.endpoint = sc["endpoint"]
        self.replay_endpoint = sc.get("replay_endpoint")
        self.topic = sc.get("topic", "").encode("utf-8")
        self.no_topic = bool(sc.get("replay_no_topic", False))
        self.buffer_steps = int(sc.get("buffer_steps", 10000))
        self.hwm = int(sc.get("hwm", 100000))
        self.linger_ms = int(sc.get("linger_ms", 1000))
        self.stdin_fd = stdin_fd
        self.stdin_closed = False
        self.incarnation = 0
        self.pub = self.replay = None
        self.monitors = {}
        self.open()

    # --- sockets -------------------------------------------------------

    def open(self):
        self.incarnation += 1
        self.seq = 0
        self.buffer = deque(maxlen=self.buffer_steps)
        self.connected = 0  # PUB peers whose handshake succeeded, not yet gone
        self.pub = self.ctx.socket(zmq.PUB)
        self.pub.set_hwm(self.hwm)
        self.monitors = {"pub": self.pub.get_monitor_socket()}
        if binds(self.endpoint):
            self.pub.bind(self.endpoint)
            self.endpoint = self.resolved(self.pub, self.endpoint)
        else:
            self.pub.connect(self.endpoint)
        rep = None
        if self.replay_endpoint:
            self.replay = self.ctx.socket(zmq.ROUTER)
            self.monitors["replay"] = self.replay.get_monitor_socket()
            self.replay.bind(self.replay_endpoint)
            self.replay_endpoint = self.resolved(self.replay, self.replay_endpoint)
            rep = self.replay_endpoint
        report("bound", incarnation=self.incarnation, endpoint=self.endpoint,
               port=port_of(self.endpoint), replay_endpoint=rep,
               replay_port=port_of(rep) if rep else None,
               libzmq=zmq.zmq_version(), pyzmq=zmq.__version__)

    @staticmethod
    def resolved(sock, requested):
        """The endpoint to bind again after a restart: the requested one
        with the port the first bind got, so that a wildcard port stays
        the same across restarts as a configured one does."""
        if not requested.startswith("tcp://"):
            return requested
        last = sock.getsockopt(zmq.LAST_ENDPOINT).decode()
        host = requested[len("tcp://"):].rsplit(":", 1)[0]
        return "tcp://%s:%s" % (host, last.rsplit(":", 1)[1])

    def close(self):
        for name, mon in self.monitors.items():
            sock = self.pub if name == "pub" else self.replay
            try:
                sock.disable_monitor()
            except zmq.ZMQError:
                pass
            mon.close(linger=0)
        self.monitors = {}
        self.pub.close(linger=self.linger_ms)
        self.pub = None
        if self.replay is not None:
            self.replay.close(linger=0)
            self.replay = None

    def restart(self, down):
        report("closing", incarnation=self.incarnation, last_seq=self.seq - 1)
        self.close()
        time.sleep(down)
        self.open()

    # --- serving -------------------------------------------------------

    def pump(self, timeout):
        """Serves replay requests and reads monitor events for up to
        timeout seconds (0: only what is waiting)."""
        deadline = time.monotonic() + timeout
        poller = zmq.Poller()
        if self.replay is not None:
            poller.register(self.replay, zmq.POLLIN)
        for mon in self.monitors.values():
            poller.register(mon, zmq.POLLIN)
        if self.stdin_fd is not None and not self.stdin_closed:
            poller.register(self.stdin_fd, zmq.POLLIN)
        while True:
            left = max(0.0, deadline - time.monotonic())
            ready = dict(poller.poll(int(left * 1000)))
            if not ready:
                return
            for name, mon in self.monitors.items():
                if mon in ready:
                    self.monitor_event(name, recv_monitor_message(mon))
            if self.replay is not None and self.replay in ready:
                self.serve_replay()
            if self.stdin_fd is not None and self.stdin_fd in ready:
                if not os.read(self.stdin_fd, 4096):
                    self.stdin_closed = True
                    poller.unregister(self.stdin_fd)
            if time.monotonic() >= deadline:
                return

    def monitor_event(self, socket, msg):
        kind = MONITOR_EVENTS.get(msg["event"], str(msg["event"]))
        if socket == "pub":
            if kind == "HANDSHAKE_SUCCEEDED":
                self.connected += 1
            elif kind == "DISCONNECTED":
                self.connected = max(0, self.connected - 1)
        report("monitor", incarnation=self.incarnation, socket=socket, kind=kind,
               value=msg["value"], endpoint=msg["endpoint"].decode(errors="replace"))

    def serve_replay(self):
        while True:
            try:
                frames = self.replay.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(frames) != 3:
                report("replay_bad", incarnation=self.incarnation,
                       frames=[len(f) for f in frames])
                continue
            ident, delim, start_bytes = frames
            start = int.from_bytes(start_bytes, "big")
            answered = []
            for seq, payload in self.buffer:
                if seq >= start:
                    self.send_replay(ident, seq.to_bytes(8, "big"), payload)
                    answered.append(seq)
            self.send_replay(ident, END_SEQ, b"")
            report("replay", incarnation=self.incarnation, identity=ident.hex(),
                   delimiter=len(delim), start=start, answered=len(answered),
                   first=answered[0] if answered else None,
                   last=answered[-1] if answered else None)

    def send_replay(self, ident, seq_bytes, payload):
        if self.no_topic:
            self.replay.send_multipart([ident, b"", seq_bytes, payload])
        else:
            self.replay.send_multipart([ident, b"", self.topic, seq_bytes, payload])

    def publish(self, batch):
        payload = to_payload(batch)
        seq = self.seq
        self.pub.send_multipart([self.topic, seq.to_bytes(8, "big"), payload])
        self.buffer.append((seq, payload))
        self.seq += 1
        return seq

    # --- steps ---------------------------------------------------------

    def run(self, steps):
        for i, step in enumerate(steps):
            if "batches" in step:
                interval = float(step.get("interval", 0))
                first = None
                for b in step["batches"]:
                    seq = self.publish(b)
                    first = seq if first is None else first
                    self.pump(interval)
                report("published", incarnation=self.incarnation, first=first, last=self.seq - 1)
            elif "wait_peer" in step:
                deadline = time.monotonic() + float(step["wait_peer"])
                while self.connected < 1:
                    if time.monotonic() >= deadline:
                        raise TimeoutError("step %d: no subscriber connected in %ss" % (i, step["wait_peer"]))
                    self.pump(0.02)
                report("peer", incarnation=self.incarnation, connected=self.connected)
                # The subscription follows the handshake; libzmq's PUB
                # drops what it sends before it has read it.
                self.pump(float(step.get("settle", 0.3)))
            elif "pause" in step:
                self.pump(float(step["pause"]))
            elif "mark" in step:
                report("mark", incarnation=self.incarnation, name=step["mark"], next_seq=self.seq)
            elif "restart" in step:
                self.restart(float(step["restart"]))
            else:
                raise ValueError("step %d: unknown step %r" % (i, step))

    def hold(self, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self.stdin_closed:
            self.pump(min(0.1, max(0.0, deadline - time.monotonic())))


def port_of(endpoint):
    if endpoint and endpoint.startswith("tcp://"):
        try:
            return int(endpoint.rsplit(":", 1)[1])
        except ValueError:
            return None
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario", nargs="?", help="the scenario as JSON text")
    ap.add_argument("--scenario", dest="scenario_file", help="a JSON file holding the scenario")
    ap.add_argument("--endpoint", help="PUB endpoint (overrides the scenario's)")
    ap.add_argument("--replay-endpoint", help="ROUTER endpoint (overrides the scenario's)")
    ap.add_argument("--topic", help="topic (overrides the scenario's)")
    ap.add_argument("--replay-no-topic", action="store_true",
                    help="answer replay requests without the topic frame, as vLLM first did")
    ap.add_argument("--buffer-steps", type=int, help="batches the replay buffer keeps (vLLM: 10000)")
    ap.add_argument("--hold", type=float, help="seconds to keep serving replay after the steps")
    ap.add_argument("--exit-on-stdin-eof", action="store_true",
                    help="exit as soon as standard input closes")
    args = ap.parse_args()

    if args.scenario_file:
        with open(args.scenario_file) as f:
            sc = json.load(f)
    elif args.scenario:
        sc = json.loads(args.scenario)
    else:
        sc = {}
    for key in ("endpoint", "replay_endpoint", "topic", "buffer_steps", "hold"):
        v = getattr(args, key)
        if v is not None:
            sc[key] = v
    if args.replay_no_topic:
        sc["replay_no_topic"] = True
    sc.setdefault("endpoint", "tcp://*:5557")

    stdin_fd = sys.stdin.fileno() if args.exit_on_stdin_eof else None
    eng = Engine(sc, stdin_fd)
    try:
        eng.run(sc.get("steps", []))
        report("done", incarnation=eng.incarnation, next_seq=eng.seq)
        eng.hold(float(sc.get("hold", 0)))
    finally:
        eng.close()
        zmq.Context.instance().term()
    report("exit")


if __name__ == "__main__":
    main()
