# Summarize kvevict compare CSVs: per workload and capacity, each strategy's hit ratio.
import csv, sys, collections
rows = collections.defaultdict(dict)  # (workload, capacity) -> strategy -> hit
order = []
for path in sys.argv[1:]:
    wl = path.split('/')[-1].rsplit('.', 1)[0]
    for r in csv.DictReader(open(path)):
        key = (wl, int(r['capacity_blocks']))
        if key not in rows: order.append(key)
        rows[key][r['strategy']] = float(r['hit_ratio'])
strategies = [s for s in next(iter(rows.values())).keys() if s != 'belady']
print('| workload | blocks | ' + ' | '.join(strategies) + ' | belady |')
print('|---|---|' + '---|' * (len(strategies) + 1))
for key in order:
    r = rows[key]
    best = max(r[s] for s in strategies if s != 'auto')
    cells = []
    for s in strategies:
        v = r[s]
        cell = f'{v:.3f}'
        if s != 'auto' and v == best: cell = f'**{cell}**'
        cells.append(cell)
    print(f'| {key[0]} | {key[1]} | ' + ' | '.join(cells) + f' | {r["belady"]:.3f} |')
