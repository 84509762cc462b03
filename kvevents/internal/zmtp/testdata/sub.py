"""A libzmq subscriber for the Go tests: connects a SUB to the endpoint
given, subscribes to everything, and exits 0 once it has received N
messages [topic, 8-byte sequence, payload] numbered 0 to N-1 in order,
1 if one is out of order or none comes for 20 s."""
import sys

import zmq

endpoint, n = sys.argv[1], int(sys.argv[2])
ctx = zmq.Context()
s = ctx.socket(zmq.SUB)
s.setsockopt(zmq.RCVTIMEO, 20000)
s.setsockopt(zmq.LINGER, 0)
s.setsockopt(zmq.SUBSCRIBE, b"")
s.connect(endpoint)
for i in range(n):
    try:
        frames = s.recv_multipart()
    except zmq.Again:
        sys.exit(f"received {i} of {n}")
    if int.from_bytes(frames[1], "big") != i:
        sys.exit(f"message {i} numbered {int.from_bytes(frames[1], 'big')}")
s.close()
ctx.term()
