#!/bin/sh
# Call 50 (2026-12-04, sixth session): sm90 with the backward's key tiles paired where
# pairsPay says so (causal-shaped rows at head dim 128; call 49's sm90hp paired every list):
# 1. sm90's GPU tests (every mask, d64 and d128, fwd and bwd, the deterministic repeat);
# 2. the backward at d128 on the five masks cuDNN runs whole, 8K-48K: sm90 / sm90np (never
#    paired) / cudnn / sm90, 64:8, checked; then the prefix_lm_causal and
#    block_causal_document cells the rule pairs beyond causal (32K and 8K), sm90 / sm90np.
# Bounded to 300 s; the table last; logs packed as OUT/t.tgz.
#   sh scripts/device/call50.sh OUT
set -u
out=${1:?usage: call50.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-300} longca cuda.test || exit 1
gpu_tests sm90 110
runs="sm90 sm90np cudnn sm90"
n=0
for v in $runs; do
	sel="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	step "d128-$n-$v" 75 kernel $sel --masks full,causal,full_document,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K --passes bwd -w 3 -n 10
	n=$((n + 1))
done
n=0
for v in sm90 sm90np; do
	step "x-$n-$v" 30 kernel --kernels cuda --variant $v --masks prefix_lm_causal,block_causal_document --seqlens 8K,32K --passes bwd -w 3 -n 10
	n=$((n + 1))
done
cat "$out/t/summary.txt"
echo "=== d128 backward TFLOP/s: mask seqlen, then" $runs
join_runs d128 $runs
echo "=== the other masks the rule pairs (prefix_lm_causal 32K, block_causal_document 8K): sm90 sm90np"
join_runs x sm90 sm90np
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
