#!/bin/sh
# Call 82 (prepared 2026-12-06, twenty-first session; docs/perf.md "Next: call 82, sm90tq and
# sm90tp"): any card (ratios in the call).
# 1. sm90tp's GPU tests (sm90tp is sm90tq, the last wave split on full's unpaired plan, plus
#    the same on causal's pairs): TestTailWave (full d128 at the shortest lengths whose
#    backward the rule splits in 2, 4 and 8 parts on this card, then causal's pairs, each
#    checked and its tail launch counted), TestMasks, TestSplit128Groups, TestLongRows.
# 2. g: cudnn / sm90 / sm90tp, twice each, interleaved, the d128 backward on full and causal
#    at 8K-48K (on full sm90tp runs sm90tq's code: its unpaired entries are the same).
#    Prediction against sm90 (132 SMs, 64:8): full 8K level (116 items left: no split pays,
#    the rows say no tail; the control for the variant's own register allocation of bwd90e),
#    full 16K +0.5 to +1.6% (tail-8: 7/8 of the last wave), 32K +1 to +2.3% (tail-8, 5/8),
#    48K +1 to +2.6% (tail-8, 3/8); causal (pairs-bwd) 8K and 16K level (256 and 512 pairs:
#    no tail), 32K +0.5 to +1.6% (1,024 pairs, tail-8), 48K +0.5 to +2.1% (1,536 pairs,
#    tail-8: 6/8). The bounds are the wave model's, less the second launch and the partials
#    (at 48K 36 items x 8 parts x 128 KB written and read: 38 MB, about 20 us of 100 ms).
#    Promotion: sm90tq where full gains and loses 1% nowhere; sm90tp where causal does too;
#    the tests pass.
# Bounded to 360 s (BUDGET); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call82.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call82.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-360} longca cuda.test || exit 1
for v in sm90 sm90tp; do warm $v & done
wait
GPU_TESTS='TestTailWave|TestMasks|TestSplit128Groups|TestLongRows' gpu_tests sm90tp 150
runs="cudnn sm90 sm90tp cudnn sm90 sm90tp"
interleave g 60 "$runs" --masks full,causal --seqlens 8K,16K,32K,48K --passes bwd -w 2 -n 5
cat "$out/t/summary.txt"
echo "=== the backward's plan, row by row (tail-N)"
row_variants g-2-sm90tp
table g "d128 backward TFLOP/s" "sm90tp/sm90 sm90/cudnn sm90tp/cudnn" $runs
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
