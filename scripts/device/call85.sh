#!/bin/sh
# Call 85 (prepared 2026-12-06, twenty-second session; docs/perf.md "Calls 82-84" and "Next:
# call 85"): any card (ratios in the call). sm90tp with the tail's code in entries of its own
# (bwd90et / bwd90est, bwd90ept / bwd90espt since commit "the tail's code in entries of its
# own"): every plan the tail does not split runs sm90's code (ptxas 12.4: byte-identical).
# 1. sm90tp's GPU tests: TestTailWave (full and causal at the shortest lengths the rule splits
#    in 2, 4 and 8 parts, each checked against the CPU reference and its tail launch counted),
#    TestMasks, TestSplit128Groups, TestLongRows (the tail now in entries of its own, its fp32
#    partials compact: not yet run on a GPU); capped at 300 s (calls 82-83 ran them in
#    224 s on a fresh H100, NVRTC's compile included).
# 2. g: cudnn / sm90 / sm90tp, three times each, interleaved, the d128 backward on full and
#    causal at 16K-48K (8K takes no tail: its rows run sm90's code).
#    Prediction against sm90, from calls 82 and 84 (four runs each, the tail then compiled
#    into bwd90e itself): full 16K -1 to +1% (read -0.9%), 32K / 48K +0.5 to +2% (+1.0 /
#    +1.3%); causal 16K level (no tail: 512 pairs), 32K +0.3 to +1.5% (+0.9%), 48K +1 to
#    +2.5% (+1.9%). Promotion (sm90tq and sm90tp into sm90): the mean over the cells gains and
#    no cell loses 1%, the tests pass.
# Bounded to 330 s (BUDGET); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call85.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call85.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-330} longca cuda.test || exit 1
for v in sm90 sm90tp; do warm $v & done
wait
GPU_TESTS='TestTailWave|TestMasks|TestSplit128Groups|TestLongRows' gpu_tests sm90tp 300
runs="cudnn sm90 sm90tp cudnn sm90 sm90tp cudnn sm90 sm90tp"
interleave g 40 "$runs" --masks full,causal --seqlens 16K,32K,48K --passes bwd -w 2 -n 5
cat "$out/t/summary.txt"
echo "=== the backward's plan, row by row (tail-N)"
row_variants g-2-sm90tp
table g "d128 backward TFLOP/s" "sm90tp/sm90 sm90/cudnn sm90tp/cudnn" $runs
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
