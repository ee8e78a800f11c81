#!/bin/sh
# Call 56 (prepared 2026-12-05, ninth session; not yet run): the head-dim-64 forward with
# three consumer warpgroups and the overlap within a turn, experiment sm90mo (fwd90m's ring of
# three warpgroups, fwd90o's order inside a turn: the next tile's Q K^T and this tile's P V as
# two groups, the next tile's softmax under P V; FlashAttention-3 runs head dim 64 with both).
# 1. sm90mo's GPU tests (every mask, d64 and d128, fwd and bwd; the d64 forward's persistent
#    entry on the short masks, the plain one on TestLongRows' 8K);
# 2. the d64 forward, 64:8, checked: cudnn / sm90 / sm90mo / sm90 / sm90mo on full, causal,
#    full_document, causal_document, sliding_window_causal at 8K-48K;
# 3. ncu on one full 32K d64 forward launch, sm90 and sm90mo: time, instructions, stalls.
# Prediction (docs/perf.md "Next: call 56"): sm90mo over sm90 +0 to +4% on full and causal
# (0.93-0.97x cuDNN), +2 to +5% on the documents and the window (call 25: the overlap alone,
# on two warpgroups, +5% there and 0 on full and causal).
# Bounded to 330 s; the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call56.sh OUT      (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call56.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-330} longca cuda.test || exit 1
gpu_tests sm90mo 110
runs="cudnn sm90 sm90mo sm90 sm90mo"
n=0
for v in $runs; do
	sel="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	step "m-$n-$v" 40 kernel $sel --head-dim 64 --masks full,causal,full_document,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K --passes fwd -w 2 -n 8
	n=$((n + 1))
done
for v in sm90 sm90mo; do
	_left=$((budget + 40 - ($(date +%s) - t0)))
	[ "$_left" -gt 15 ] || { echo "# ncu $v skipped (time)" >>"$out/t/summary.txt"; continue; }
	timeout -k 5 $((_left < 30 ? _left : 30)) ncu --clock-control none -k 'regex:^fwd90m' -c 1 --metrics "$STALL_METRICS" \
		bin/longca kernel --kernels cuda --variant $v --no-check -w 0 -n 1 --masks full --seqlens 32K --heads 64:8 --head-dim 64 --passes fwd \
		--out "$out/t/ncu-run-$v" >"$out/t/ncu-$v.log" 2>&1
	echo "# ncu $v rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
done
cat "$out/t/summary.txt"
echo "=== d64 forward TFLOP/s: mask seqlen, then" $runs
join_runs m $runs >"$out/t/m.table"
cat "$out/t/m.table"
echo "=== over cuDNN (each variant's mean over its runs) and sm90mo over sm90"
python3 - "$out/t/m.table" $runs <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
names = sys.argv[2:]
def mean(xs):
    xs = [float(x) for x in xs if x != "-"]
    return sum(xs) / len(xs) if xs else None
vs = [v for v in dict.fromkeys(names) if v != "cudnn"]
print("mask seqlen " + " ".join(vs) + " mo/sm90")
for r in rows:
    cells = {}
    for i, v in enumerate(names):
        cells.setdefault(v, []).append(r[2 + i] if 2 + i < len(r) else "-")
    m = {v: mean(c) for v, c in cells.items()}
    c = m.get("cudnn")
    out = ["-" if c is None or m[v] is None else "%.3f" % (m[v] / c) for v in vs]
    out.append("-" if m.get("sm90mo") is None or m.get("sm90") is None else "%+.1f%%" % (100 * (m["sm90mo"] / m["sm90"] - 1)))
    print(r[0], r[1], " ".join(out))
PY
echo "=== one full 32K d64 forward launch under ncu (sm90, then sm90mo)"
for v in sm90 sm90mo; do echo "## $v"; stalls "$out/t/ncu-$v.log"; done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
