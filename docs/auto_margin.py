# Auto against the best other online strategy, from kvevict compare CSVs
# (all strategies): the tables of docs/auto.md and one line per point.
# A file named trace.csv is the conversation trace (aim: within 0.002, and
# the mean share of the LRU-to-Belady gap closed); the others are synthetic
# workloads named by their file (aim: within 0.005).
import csv, sys

def load(path):
    rows = {}
    for r in csv.DictReader(open(path)):
        rows.setdefault(int(r['capacity_blocks']), {})[r['strategy']] = float(r['hit_ratio'])
    return rows

points, below = 0, []
for path in sys.argv[1:]:
    name = path.split('/')[-1].rsplit('.', 1)[0]
    trace = name == 'trace'
    tol = 0.002 if trace else 0.005
    rows = load(path)
    print(f'**{name}**\n')
    head = '| blocks | LRU | best other online | auto | auto - best | Belady |'
    print(head + (' gap closed |' if trace else ''))
    print('|---' * (head.count('|') - 1 + trace) + '|')
    gaps = []
    for cap in sorted(rows):
        r = rows[cap]
        # the first in the CSV's order among equals: lru before its ties
        who = max((s for s in r if s not in ('auto', 'belady')), key=r.get)
        best = r[who]
        d = r['auto'] - best
        points += 1
        if d < -tol:
            below.append(f'{name} {cap}: {d:+.4f} ({who})')
        line = f'| {cap} | {r["lru"]:.3f} | {best:.3f} ({who}) | {r["auto"]:.3f} | {d:+.4f} | {r["belady"]:.3f} |'
        if trace:
            g = (r['auto'] - r['lru']) / (r['belady'] - r['lru'])
            gaps.append(g)
            line += f' {100 * g:.1f}% |'
        print(line)
    if trace:
        print(f'\nmean gap closed: {100 * sum(gaps) / len(gaps):.1f}%')
    print()
print(f'{len(below)} of {points} points below the best other online strategy by more than the aim allows:')
for b in below:
    print('  ' + b)
