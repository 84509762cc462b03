"""libzmq's CURVE for the Go tests (pyzmq). Key files hold one Z85 key on
a line, as zmq.curve_keypair returns it.

  curve.py keys DIR                  writes server, client and stranger
                                     keypairs: DIR/NAME.key (secret) and
                                     DIR/NAME.pub (public)
  curve.py pub DIR N                 binds an XPUB on 127.0.0.1 as the CURVE
                                     server of DIR/server.key, prints its
                                     endpoint, waits for a subscription and
                                     sends N messages [topic, 8-byte
                                     sequence, payload]
  curve.py sub ENDPOINT DIR NAME N   connects a SUB as the CURVE client of
                                     keypair NAME to the server
                                     DIR/server.pub, and receives N messages
                                     numbered 0 to N-1
  curve.py dealer ENDPOINT DIR NAME  connects a DEALER as that client, asks
                                     [empty, 8-byte 7] and wants it back

A client prints the first handshake event its monitor sees: "succeeded",
or "failed auth 400", "failed protocol" or "disconnected" (a server that
closed the connection in the handshake), and then exits 3. Any other
failure, or nothing within 10 s, exits 1."""
import sys

import zmq
from zmq.utils.monitor import recv_monitor_message


def key(path):
    with open(path, "rb") as f:
        return f.read().strip()


def client(kind, endpoint, d, name):
    ctx = zmq.Context()
    s = ctx.socket(kind)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.RCVTIMEO, 10000)
    s.curve_serverkey = key(f"{d}/server.pub")
    s.curve_publickey = key(f"{d}/{name}.pub")
    s.curve_secretkey = key(f"{d}/{name}.key")
    mon = s.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_DISCONNECTED)
    mon.setsockopt(zmq.RCVTIMEO, 10000)
    s.connect(endpoint)
    ev = recv_monitor_message(mon)
    if ev["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
        print("succeeded", flush=True)
    elif ev["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
        print("failed auth", ev["value"], flush=True)
        sys.exit(3)
    elif ev["event"] == zmq.EVENT_DISCONNECTED:
        print("disconnected", flush=True)
        sys.exit(3)
    else:
        print("failed protocol", ev["value"], flush=True)
        sys.exit(3)
    return s


mode = sys.argv[1]
if mode == "keys":
    d = sys.argv[2]
    for name in ("server", "client", "stranger"):
        public, secret = zmq.curve_keypair()
        with open(f"{d}/{name}.pub", "wb") as f:
            f.write(public + b"\n")
        with open(f"{d}/{name}.key", "wb") as f:
            f.write(secret + b"\n")
elif mode == "pub":
    d, n = sys.argv[2], int(sys.argv[3])
    ctx = zmq.Context()
    s = ctx.socket(zmq.XPUB)
    s.setsockopt(zmq.SNDHWM, 0)
    s.setsockopt(zmq.RCVTIMEO, 20000)
    s.setsockopt(zmq.LINGER, 10000)
    s.curve_server = True
    s.curve_secretkey = key(f"{d}/server.key")
    s.bind("tcp://127.0.0.1:*")
    print(s.getsockopt(zmq.LAST_ENDPOINT).decode(), flush=True)
    s.recv()  # the subscription: a handshake is done
    for i in range(n):
        s.send_multipart([b"kv@libzmq", i.to_bytes(8, "big"), b"p" * 100])
    s.close()
    ctx.term()
elif mode == "sub":
    endpoint, d, name, n = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    s = client(zmq.SUB, endpoint, d, name)
    s.setsockopt(zmq.SUBSCRIBE, b"")
    for i in range(n):
        try:
            frames = s.recv_multipart()
        except zmq.Again:
            sys.exit(f"received {i} of {n}")
        if int.from_bytes(frames[1], "big") != i:
            sys.exit(f"message {i} numbered {int.from_bytes(frames[1], 'big')}")
elif mode == "dealer":
    endpoint, d, name = sys.argv[2], sys.argv[3], sys.argv[4]
    s = client(zmq.DEALER, endpoint, d, name)
    s.send_multipart([b"", (7).to_bytes(8, "big")])
    if s.recv_multipart() != [b"", (7).to_bytes(8, "big")]:
        sys.exit("a wrong answer")
else:
    sys.exit(f"unknown mode {mode}")
