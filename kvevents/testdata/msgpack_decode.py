"""Times python3-msgpack's C extension decoding each file named.

For each file, prints the nanoseconds one msgpack.unpackb of its bytes
takes: the best of three runs of at least 0.2 s each. BenchmarkCodec runs
it beside Decode on the same bytes; by hand:

    /usr/bin/python3 testdata/msgpack_decode.py batch.msgpack
"""
import sys
import time

import msgpack

try:
    from msgpack import _cmsgpack  # noqa: F401  the C extension, not the fallback
except ImportError:
    sys.exit("msgpack_decode.py: msgpack has no C extension here")

for path in sys.argv[1:]:
    with open(path, "rb") as f:
        data = f.read()
    unpackb = msgpack.unpackb
    unpackb(data)
    best = None
    for _ in range(3):
        n, start = 0, time.perf_counter_ns()
        while True:
            for _ in range(1000):
                unpackb(data)
            n += 1000
            elapsed = time.perf_counter_ns() - start
            if elapsed >= 200_000_000:
                break
        best = elapsed / n if best is None else min(best, elapsed / n)
    print("%.1f" % best)
