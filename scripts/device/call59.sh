#!/bin/sh
# Call 59 (prepared 2026-12-05, tenth session; not yet run): experiment sm90pe, the
# backward's pairs in entries of their own (bwd90ep, bwd90esp), the module compiled without
# LONGCA_BWD_PAIRS, so that unpaired blocks run a kernel without the pairs' code (call 54:
# sm90 so compiled read full +1.2% at 16K / 32K / 48K, one run each). Offline (ptxas 12.4):
# the pairs' entries are sm90's bwd90e / bwd90es instruction for instruction; the unpaired
# d128 entry 2,856 static instructions against sm90's 3,496, no spill.
# 1. sm90pe's GPU tests (every mask, d64 and d128, fwd and bwd, deterministic);
# 2. the d128 backward, 64:8, checked, sm90 / sm90pe / sm90 / sm90pe on full, full_document,
#    sliding_window_causal, causal_blockwise (unpaired, unsplit at 16K), causal and
#    causal_document (paired: the same kernel) at 16K / 32K / 48K; the d64 backward on full
#    and causal 16K / 48K (bwd90qq without the pairs' barrier).
# Prediction (docs/perf.md "Next: call 59"): the unpaired cells +0.5 to +2% (full +1.2% as in
# call 54), the paired cells level within the call's spread (1-2%), d64 level.
# Bounded to 330 s; the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call59.sh OUT      (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call59.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-330} longca cuda.test || exit 1
gpu_tests sm90pe 110
warm sm90
runs="sm90 sm90pe sm90 sm90pe"
n=0
for v in $runs; do
	step "p-$n-$v" 45 kernel --kernels cuda --variant $v --masks full,full_document,sliding_window_causal,causal_blockwise,causal,causal_document --seqlens 16K,32K,48K --passes bwd -w 2 -n 5
	step "q-$n-$v" 15 kernel --kernels cuda --variant $v --head-dim 64 --masks full,causal --seqlens 16K,48K --passes bwd -w 2 -n 5
	n=$((n + 1))
done
cat "$out/t/summary.txt"
for dim in p q; do
	echo "=== backward TFLOP/s ($([ $dim = p ] && echo d128 || echo d64)): mask seqlen, then" $runs
	join_runs $dim $runs >"$out/t/$dim.table"
	cat "$out/t/$dim.table"
	compare "$out/t/$dim.table" "sm90pe/sm90" $runs
done
echo "=== the rows' variants (pairs-bwd / doc-pairs-bwd: the pairs' entry in sm90pe)"
row_variants p-1-sm90pe
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
