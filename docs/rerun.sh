#!/bin/sh
# docs/rerun.sh re-runs the commands whose output docs/ keeps in a file
# (docs/simulator.md, docs/cluster.md, docs/hints.md) and compares each with its file:
# every figure but the measured latencies (compare's evict µs columns) is
# deterministic, so anything else that differs is a drift to explain.
# From the clone's root, with the conversation trace at
# ../shared/traces/mooncake_conversation.jsonl (README.md says where to get
# it). Exit status 1 if an output differs; plots are written to a
# temporary directory, not over docs/.
set -u
trace=../shared/traces/mooncake_conversation.jsonl
[ -f "$trace" ] || { echo "rerun.sh: no $trace (README.md: where to get it)" >&2; exit 2; }
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/kvevict" ./cmd/kvevict || exit 2
k="$tmp/kvevict"
status=0

# same FILE: compares the command's output on stdin with docs/FILE, the
# last two numeric columns of compare's -wide rows (the latencies) masked.
same() {
	mask='s/  *[0-9.-]*  *[0-9.-]*$/ LAT/'
	case $1 in cluster_* | hints_* | conversation_serve_time.txt | conversation_serve_tier.txt) mask='s/^//' ;; esac
	if sed "$mask" > "$tmp/got" && sed "$mask" "docs/$1" > "$tmp/want" && cmp -s "$tmp/got" "$tmp/want"; then
		echo "same: docs/$1"
	else
		echo "DIFFERS: docs/$1"
		diff "$tmp/want" "$tmp/got" | head -20
		status=1
	fi
}

"$k" compare -trace "$trace" -wide -plot "$tmp/hit.png" | same conversation_replay.txt
"$k" compare -trace "$trace" -wide -mode serve -capacity 2500,10000 \
	-strategies lru,fifo,lfu,slru,qos_aware | same conversation_serve.txt
"$k" compare -trace "$trace" -mode serve -gpu h100 -model llama-3-8b -capacity 2500,10000 \
	-strategies lru,fifo,lfu,slru,qos_aware -rank goodput -slo 2s -tpot-slo 50ms | same conversation_serve_time.txt
"$k" compare -trace "$trace" -mode serve -gpu h100 -model llama-3-8b -capacity 2500,10000 \
	-strategies lru,fifo,lfu,slru,qos_aware -rank goodput -slo 2s -tpot-slo 50ms -tier cpu:4x:lru | same conversation_serve_tier.txt
"$k" cluster -trace "$trace" -strategies lru,auto -plot "$tmp/cluster.png" | same cluster_conversation.txt
"$k" cluster -trace "$trace" -engines 4 -strategies all -routers round-robin,prefix,approx -wide | same cluster_strategies.txt
"$k" cluster -trace "$trace" -engines 4 -speedup 1.7 -load-weight 0,0.25,0.5,1,2,4,8,16,32,64,128 | same cluster_time4.txt
"$k" cluster -trace "$trace" -engines 8 -speedup 3.2 -load-weight 0,0.25,0.5,1,2,4,8,16,32,64,128 | same cluster_time8.txt
"$k" cluster -trace "$trace" -engines 4,8 -decode -wide | same cluster_decode.txt
"$k" cluster -trace "$trace" -engines 4 -speedup 1.7 -decode -wide | same cluster_decode_time4.txt
"$k" cluster -trace "$trace" -engines 8 -speedup 3.2 -decode -wide | same cluster_decode_time8.txt
"$k" cluster -trace "$trace" -engines 4 -speedup 1.7 -decode -tier cpu:4x:lru -wide | same cluster_decode_tier4.txt
"$k" cluster -trace "$trace" -engines 8 -speedup 3.2 -decode -tier cpu:4x:lru -wide | same cluster_decode_tier8.txt
hs=none,hindsight
for p in 0.5 0.6 0.7 0.8 0.9; do hs=$hs,hindsight:precision=$p:recall=$p:seed=1; done
"$k" compare -trace "$trace" -mode serve -hints "$hs" -format json | python3 docs/scripts/closure.py | same hints_trace_tail.txt
"$k" compare -trace "$trace" -hints none,hindsight,hindsight:precision=0.8:recall=0.8:seed=1,ttl=5m -format json |
	python3 docs/scripts/closure.py | same hints_trace_replay.txt
"$k" cluster -trace "$trace" -engines 4,8 -routers round-robin,prefix -strategies lru,auto \
	-hints none,hindsight,hindsight:precision=0.8:recall=0.8:seed=1,ttl=5m -rank hit | same hints_cluster.txt
exit $status
