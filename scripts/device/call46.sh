#!/bin/sh
# Call 46 (2026-12-04, fifth session): the new default's whole GPU test suite (call 45's
# stopped at its 50 s cap inside TestLongRows), then the d64 table the standard suite does
# not time: sm90 / cudnn / sm90 (the clock's drift), full, causal, causal_document,
# sliding_window_causal, 8K-48K, fwd and bwd, 64:8, checked; rows name the split (gsplit-N).
#   sh scripts/device/call46.sh OUT
set -u
out=${1:?usage: call46.sh OUT}
. scripts/device/lib.sh
call_start 300 longca cuda.test || exit 1
gpu_tests sm90 130
n=0
for v in sm90 cudnn sm90; do
	sel="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	step "d64-$n-$v" 50 kernel $sel --head-dim 64 --masks full,causal,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K --passes fwd,bwd -w 3 -n 10
	n=$((n + 1))
done
cat "$out/t/summary.txt"
echo "=== d64 TFLOP/s: mask seqlen pass, then sm90, cudnn, sm90"
JOIN_PASS=1 join_runs d64 sm90 cudnn sm90 | sort -k3,3 -s
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
