#!/bin/sh
# Call 55 (prepared 2026-12-05, ninth session; not yet run): the head-dim-64 backward at 128
# queries a step, experiment sm90qq (two of the work list's 64-query tiles a step, 128-key
# blocks on two consumer warpgroups: the d128 backward's shape with the head dimension and the
# step's queries swapped, FlashAttention-3's 128 x 128 tiles at head dim 64).
# 1. sm90qq's GPU tests (every mask, d64 and d128, fwd and bwd, deterministic; TestHeadDim64Groups:
#    GQA groups at odd lengths and fp16 at d64, where a step's two items cross heads and an odd
#    walk's last step is half masked);
# 2. the d64 backward, 64:8, checked: cudnn / sm90 / sm90qq / sm90be / sm90 / sm90qq on full,
#    causal, full_document, causal_document, sliding_window_causal at 8K-48K (sm90be: two
#    consumer warpgroups over 128-key blocks at 64 queries a step, the same blocks as sm90qq's:
#    what the step's length alone does);
# 3. ncu on one full 32K d64 backward launch, sm90 and sm90qq: time, instructions, stalls.
# Prediction (docs/perf.md "Next: call 55"): sm90qq over sm90 +4 to +8% on full and causal at
# 16K-48K (0.95 -> 0.99-1.03x cuDNN), -3 to +5% at 8K, -2 to +4% on the documents and the
# window; sm90qq over sm90be +8 to +15% on full and causal; instructions a FLOP -25 to -35%.
# Bounded to 500 s; the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call55.sh OUT      (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call55.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-500} longca cuda.test || exit 1
gpu_tests sm90qq 110
runs="cudnn sm90 sm90qq sm90be sm90 sm90qq"
n=0
for v in $runs; do
	sel="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	step "q-$n-$v" 50 kernel $sel --head-dim 64 --masks full,causal,full_document,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K --passes bwd -w 2 -n 5
	n=$((n + 1))
done
for v in sm90 sm90qq; do
	_left=$((budget + 40 - ($(date +%s) - t0)))
	[ "$_left" -gt 15 ] || { echo "# ncu $v skipped (time)" >>"$out/t/summary.txt"; continue; }
	timeout -k 5 $((_left < 35 ? _left : 35)) ncu --clock-control none -k 'regex:^bwd90[tq]_bf16' -c 1 --metrics "$STALL_METRICS" \
		bin/longca kernel --kernels cuda --variant $v --no-check -w 0 -n 1 --masks full --seqlens 32K --heads 64:8 --head-dim 64 --passes bwd \
		--out "$out/t/ncu-run-$v" >"$out/t/ncu-$v.log" 2>&1
	echo "# ncu $v rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
done
cat "$out/t/summary.txt"
echo "=== d64 backward TFLOP/s: mask seqlen, then" $runs
join_runs q $runs >"$out/t/q.table"
cat "$out/t/q.table"
echo "=== over cuDNN (each variant's mean over its runs) and sm90qq over sm90 / over sm90be"
python3 - "$out/t/q.table" $runs <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
names = sys.argv[2:]
def mean(xs):
    xs = [float(x) for x in xs if x != "-"]
    return sum(xs) / len(xs) if xs else None
vs = [v for v in dict.fromkeys(names) if v != "cudnn"]
print("mask seqlen " + " ".join(vs) + " qq/sm90 qq/be")
for r in rows:
    cells = {}
    for i, v in enumerate(names):
        cells.setdefault(v, []).append(r[2 + i] if 2 + i < len(r) else "-")
    m = {v: mean(c) for v, c in cells.items()}
    c = m.get("cudnn")
    out = ["-" if c is None or m[v] is None else "%.3f" % (m[v] / c) for v in vs]
    for a, b in (("sm90qq", "sm90"), ("sm90qq", "sm90be")):
        out.append("-" if m.get(a) is None or m.get(b) is None else "%+.1f%%" % (100 * (m[a] / m[b] - 1)))
    print(r[0], r[1], " ".join(out))
PY
echo "=== one full 32K d64 backward launch under ncu (sm90, then sm90qq)"
for v in sm90 sm90qq; do echo "## $v"; stalls "$out/t/ncu-$v.log"; done
echo "=== the rows' variants (gsplit-N)"
for r in q-1-sm90 q-2-sm90qq; do
	bin/longca merge --csv "$out/t/$r" >/dev/null 2>&1 &&
		python3 -c 'import csv,sys; r=list(csv.DictReader(open(sys.argv[1]))); print(" | ".join(x["mask"][:12] + " " + x["seqlen"] + ": " + x["kernel_variant"] for x in r))' "$out/t/$r/merged.csv"
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
