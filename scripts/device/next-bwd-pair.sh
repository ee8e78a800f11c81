#!/bin/sh
# Ran as call 44 (2026-12-04 18:19 UTC; docs/perf.md "Calls 43-46"); sm90bg and sm90bw are removed since (sm90bg's d64 split is sm90's default): a record of the call.
# Prepared 2026-12-04 (fourth session; docs/perf.md "Next: sm90u, sm90bg, sm90bw, sm90ur"):
# two backward experiments in one call, from the repository root with bin/longca.gz and
# bin/cuda.test.gz carried (make device):
#   sh scripts/device/next-bwd-pair.sh OUT [A B]      (default sm90bg sm90bw)
# 1. A's and B's GPU tests (every mask, d64 and d128, fwd and bwd, the deterministic repeat);
# 2. the backward at d128 on the five masks cuDNN runs whole and at d64 on four, 8K-48K:
#    A / B / sm90 / cudnn / A / B (the clock's drift), 64:8, checked.
# Bounded to 540 s (sm90's first step compiles its module: 75 s cap); the tables last; the logs packed as OUT/t.tgz.
set -u
out=${1:?usage: next-bwd-pair.sh OUT [A B]}
a=${2:-sm90bg} b=${3:-sm90bw}
. scripts/device/lib.sh
call_start 540 longca cuda.test || exit 1
gpu_tests $a 110
gpu_tests $b 110
n=0
for v in $a $b sm90 cudnn $a $b; do
	sel="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	step "d128-$n-$v" 75 kernel $sel --masks full,causal,full_document,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K --passes bwd -w 3 -n 10
	step "d64-$n-$v" 35 kernel $sel --head-dim 64 --masks full,causal,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K --passes bwd -w 3 -n 10
	n=$((n + 1))
done
cat "$out/t/summary.txt"
for d in d128 d64; do
	echo "=== $d backward TFLOP/s: mask seqlen, then $a, $b, sm90, cudnn, $a, $b"
	join_runs $d $a $b sm90 cudnn $a $b
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
