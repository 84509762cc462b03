"""A libzmq publisher for the Go tests: connects an XPUB to the endpoint
given, waits for a subscription, sends N messages [topic, 8-byte
sequence, payload] and waits up to 10 s for them to be written; with a
third argument "stay", it then stays connected until killed."""
import sys
import time

import zmq

endpoint, n = sys.argv[1], int(sys.argv[2])
ctx = zmq.Context()
s = ctx.socket(zmq.XPUB)
s.setsockopt(zmq.SNDHWM, 0)
s.setsockopt(zmq.RCVTIMEO, 20000)
s.setsockopt(zmq.LINGER, 10000)
s.connect(endpoint)
s.recv()  # the subscription: the handshake is done
for i in range(n):
    s.send_multipart([b"kv@libzmq", i.to_bytes(8, "big"), b"p" * 100])
if sys.argv[3:] == ["stay"]:
    while True:
        time.sleep(1)
s.close()
ctx.term()
