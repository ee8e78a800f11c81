#!/bin/sh
# Call 79 (prepared 2026-12-05, twentieth session, after call 78; docs/perf.md "Next: call
# 79"): any card (ratios in the call).
# 1. sm90qf's GPU tests (LONGCA_BWD_LATE_FENCE: a wrong order of the dQ stage's stores and the
#    writer's bulk reduction reads stale dQ, which the checks against the CPU reference catch).
# 2. d: sm90 / sm90qf twice, the d128 backward on full, causal, full_document,
#    causal_document, sliding_window_causal at 8K-32K; e: the same at head dim 64.
#    sm90qf publishes each step's dQ stage (the proxy fence and the arrival on dqFull) after
#    the next step's S^T and dP^T are issued instead of straight after its stores (call 78:
#    5.7% of the d128 full 16K backward's stall samples on FENCE.VIEW.ASYNC.S, 2.6% on the
#    arrival, 0.6% on its MEMBAR.ALL.CTA), except in the pairs' entries (causal and the
#    paired document rows: level there). Prediction against sm90: the unpaired d128 cells
#    (full, full_document, sliding_window_causal) +1 to +3%, the paired ones within 1%, the
#    d64 backward (bwd90qq, unpaired) +0.5 to +2%. Promotion: gains on its cells, loses 1% on
#    none, its GPU tests pass.
# Bounded to 300 s (BUDGET); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call79.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call79.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-300} longca cuda.test || exit 1
for v in sm90 sm90qf; do warm $v & done
wait
GPU_TESTS='TestMasks|TestClimbingScores|TestHeadDim64Groups|TestSplit128Groups|TestLongRows' gpu_tests sm90qf 100
masks=full,causal,full_document,causal_document,sliding_window_causal
runs="sm90 sm90qf sm90 sm90qf"
interleave d 45 "$runs" --masks $masks --seqlens 8K,16K,32K --passes bwd -w 2 -n 5
interleave e 45 "$runs" --masks $masks --seqlens 8K,16K,32K --passes bwd --head-dim 64 -w 2 -n 5
cat "$out/t/summary.txt"
echo "=== the backward's plan, row by row (pairs-bwd, doc-pairs-bwd, gsplit-N)"
row_variants d-1-sm90qf
table d "d128 backward TFLOP/s" "sm90qf/sm90" $runs
table e "d64 backward TFLOP/s" "sm90qf/sm90" $runs
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
