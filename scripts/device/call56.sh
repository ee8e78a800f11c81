#!/bin/sh
# Call 56 (prepared 2026-12-05, ninth session; not yet run): the backward with two dQ stages
# a consumer warpgroup, experiment sm90w2 (a warpgroup stages a step's dQ while the writer's
# bulk reduction still reads the last step's; the writer hands a stage back once the next
# step's reductions are issued), at both head dims.
# 1. sm90w2's GPU tests (every mask, d64 and d128, fwd and bwd, deterministic);
# 2. the backward, 64:8, checked, interleaved sm90 / sm90w2 / sm90 / sm90w2: d128 on full,
#    causal, full_document, causal_document, prefix_lm_causal at 16K-48K; d64 on full, causal
#    at 8K-48K;
# 3. ncu's stall samples by reason of one causal 16K d128 backward launch, sm90 and sm90w2.
# Prediction (docs/perf.md "Next: call 56"): +0.5 to +2.5% on every cell (the hand-off's wait
# for its stage, about 5% of call 47's stall samples, mostly gone), the most at d64 (three
# warpgroups share the one writer).
# Bounded to 400 s; the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call56.sh OUT      (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call56.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-400} longca cuda.test || exit 1
gpu_tests sm90w2 130
runs="sm90 sm90w2 sm90 sm90w2"
n=0
for v in $runs; do
	step "w-$n-$v" 50 kernel --kernels cuda --variant $v --masks full,causal,full_document,causal_document,prefix_lm_causal --seqlens 16K,32K,48K --passes bwd -w 2 -n 5
	step "v-$n-$v" 25 kernel --kernels cuda --variant $v --head-dim 64 --masks full,causal --seqlens 8K,16K,32K,48K --passes bwd -w 2 -n 5
	n=$((n + 1))
done
for v in sm90 sm90w2; do ncu_stall $v causal 16K; done
cat "$out/t/summary.txt"
for dim in w v; do
	echo "=== backward TFLOP/s ($([ $dim = w ] && echo d128 || echo d64)): mask seqlen, then" $runs
	join_runs $dim $runs >"$out/t/$dim.table"
	cat "$out/t/$dim.table"
	compare "$out/t/$dim.table" "sm90w2/sm90" $runs
done
echo "=== one causal 16K d128 backward launch under ncu: time, instructions, stalls"
stall_table
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
