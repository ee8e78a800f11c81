#!/bin/sh
# Call 82 (prepared 2026-12-06, twenty-first session; docs/perf.md "Next: call 82, sm90tq"):
# any card (ratios in the call).
# 1. sm90tq's GPU tests: TestTailWave (full d128 at the shortest lengths whose backward the
#    rule splits in 2, 4 and 8 parts on this card, the rows' tail-N), TestMasks,
#    TestSplit128Groups, TestLongRows.
# 2. g: cudnn / sm90 / sm90tq, twice each, interleaved, the d128 backward on full at
#    8K-48K. sm90tq runs the backward's whole waves unsplit over a 1-D grid and splits the
#    last, partial wave's items over the group's query heads (a second launch, their dK and
#    dV summed from fp32 partials). Prediction against sm90 (132 SMs, 64:8): 8K level (116
#    items left: no split pays, the rows say no tail; the control for sm90tq's own register
#    allocation of bwd90e), 16K +0.5 to +1.6% (tail-8: 7/8 of the
#    last wave), 32K +1 to +2.3% (tail-8, 5/8), 48K +1 to +2.6% (tail-8, 3/8); the model's
#    bounds, less the second launch and the partials (at 48K 36 items x 8 parts x 128 KB
#    written and read: 38 MB, about 20 us of 100 ms). Promotion: gains on 16K-48K, loses 1%
#    on none, its tests pass.
# Bounded to 300 s (BUDGET); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call82.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call82.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-300} longca cuda.test || exit 1
for v in sm90 sm90tq; do warm $v & done
wait
GPU_TESTS='TestTailWave|TestMasks|TestSplit128Groups|TestLongRows' gpu_tests sm90tq 150
runs="cudnn sm90 sm90tq cudnn sm90 sm90tq"
interleave g 60 "$runs" --masks full --seqlens 8K,16K,32K,48K --passes bwd -w 2 -n 5
cat "$out/t/summary.txt"
echo "=== the backward's plan, row by row (tail-N)"
row_variants g-2-sm90tq
table g "d128 full backward TFLOP/s" "sm90tq/sm90 sm90/cudnn sm90tq/cudnn" $runs
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
