#!/bin/sh
# Call 80 (prepared 2026-12-06, twentieth session, after call 79; docs/perf.md "Next: call
# 80"): any card (ratios in the call).
# 1. the default's whole GPU test list (sm90 with call 79's sm90qf promoted: not yet run whole
#    with it), then sm90qp's backward tests.
# 2. f: sm90 / sm90qp twice, the d128 backward on the masks whose rows the backward pairs
#    (pairs-bwd, doc-pairs-bwd) at 8K-32K. sm90qp publishes the dQ stage late in the pairs'
#    entries too (bwd90ep, bwd90esp), as sm90qf did in the unpaired ones (call 79: d128 +0.5
#    to +2%, d64 +1.6 to +4.9%). Prediction: the paired cells +0.5 to +2%, the unpaired
#    (the rows say no pairs) within 1% (the same code). Promotion: gains on the paired cells,
#    loses 1% on none, its tests pass.
# 3. ncu's SASS source page of one d64 full 16K backward (bwd90qq) with the late publish:
#    where its stall samples fall now (call 78 read the d128 one before it: 5.7% on the
#    proxy fence).
# Bounded to 330 s (BUDGET); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call80.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call80.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-330} longca cuda.test || exit 1
for v in sm90 sm90qp; do warm $v & done
wait
gpu_tests sm90 120
GPU_TESTS='TestMasks|TestClimbingScores|TestSplit128Groups|TestLongRows' gpu_tests sm90qp 90
runs="sm90 sm90qp sm90 sm90qp"
interleave f 45 "$runs" --masks causal,causal_document,prefix_lm_causal,prefix_lm_document,causal_blockwise,share_question,full --seqlens 8K,16K,32K --passes bwd -w 2 -n 5
NCU_PASS=bwd ncu_sass sm90 full 16K 64 90
cat "$out/t/summary.txt"
echo "=== the backward's plan, row by row (pairs-bwd, doc-pairs-bwd, gsplit-N)"
row_variants f-1-sm90qp
table f "d128 backward TFLOP/s" "sm90qp/sm90" $runs
echo "=== the d64 full 16K backward (sm90, bwd90qq) under ncu: the SASS lines with the most stall samples"
sass_top "$out/t/ncu-sass-sm90-full-16K-d64.log"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
