#!/bin/sh
# Call 57 (2026-12-05, tenth session): the default after calls 54-56. sm90 now runs sm90d64's
# head-dim-64 entries (bwd90qq, fwd90mo) and splits the head-dim-128 backward in two where
# split128Pays says so (call 54's sm90g2 cells); sm90ns is sm90 never splitting at 128.
# 1. sm90's GPU tests (every mask, d64 and d128, fwd and bwd, deterministic);
# 2. the d128 backward, 64:8, checked, sm90 / sm90ns / sm90 on the twelve masks at 32K and 48K
#    (the rule splits prefix_lm_causal 48K, causal_blockwise 32K / 48K, share_question 48K,
#    causal_document 32K of call 54's cells; the other five masks untimed by call 54).
# Prediction: the split cells +3 to +6% over sm90ns (causal_blockwise 48K level), every other
# cell the same plan and level within noise (1-2%).
# Bounded to 200 s (the session's last device time); the tables last; logs as OUT/t.tgz.
#   sh scripts/device/call57.sh OUT      (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call57.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-200} longca cuda.test || exit 1
gpu_tests sm90 100
runs="sm90 sm90ns sm90"
n=0
for v in $runs; do
	step "s-$n-$v" 45 kernel --kernels cuda --variant $v --masks all --seqlens 32K,48K --passes bwd -w 2 -n 5
	n=$((n + 1))
done
cat "$out/t/summary.txt"
echo "=== d128 backward TFLOP/s: mask seqlen, then" $runs
join_runs s $runs >"$out/t/s.table"
cat "$out/t/s.table"
compare "$out/t/s.table" "sm90/sm90ns" $runs
echo "=== the rows' variants (gsplit-2 where the rule split)"
row_variants s-0-sm90
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
