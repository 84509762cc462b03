#!/usr/bin/env python3
"""Closure of LRU's gap to Belady by each strategy and hint source.

Reads the JSON rows of `kvevict compare -mode serve -hints ... -format json`
on standard input and prints, for each hint source, each online strategy's
closure: (S with hints - LRU with none) / (Belady - LRU with none) at each
capacity, and its mean over the capacities (docs/hints.md). With --best it
prints instead, per capacity, the best online strategy with each source.
"""
import json
import sys

rows = json.load(sys.stdin)
belady, hit = {}, {}
for r in rows:
    c = r["capacity_blocks"]
    if r["strategy"] == "belady":
        belady[c] = r["hit_ratio"]
    else:
        hit[(r["strategy"], r.get("hints", "none"), c)] = r["hit_ratio"]
caps = sorted(belady)
sources = list(dict.fromkeys(k[1] for k in hit))
strategies = sorted({k[0] for k in hit})
if "--best" in sys.argv:
    print("capacity | " + " | ".join(sources))
    for c in caps:
        cells = []
        for s in sources:
            ratio, name = max((hit[(x, s, c)], x) for x in strategies)
            cells.append(f"{name} {ratio:.4f}")
        print(f"{c} | " + " | ".join(cells))
    sys.exit()
lru = {c: hit[("lru", "none", c)] for c in caps}
for s in sources:
    print(f"== {s}")
    table = []
    for x in strategies:
        per = [(hit[(x, s, c)] - lru[c]) / (belady[c] - lru[c]) for c in caps]
        mean_hit = sum(hit[(x, s, c)] for c in caps) / len(caps)
        own = sum(hit[(x, "none", c)] for c in caps) / len(caps) if ("lru", "none", caps[0]) in hit and (x, "none", caps[0]) in hit else float("nan")
        table.append((sum(per) / len(per), x, mean_hit - own, per))
    for mean, x, rise, per in sorted(table, reverse=True):
        cells = " ".join(f"{100 * p:6.1f}" for p in per)
        print(f"  {x:15s} {100 * mean:6.1f}%  rise {rise:+.4f}  per capacity {cells}")
