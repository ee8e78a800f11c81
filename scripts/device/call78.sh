#!/bin/sh
# Call 78 (prepared 2026-12-05, twentieth session, after call 77; docs/perf.md "Next: call
# 78"): any card (ratios in the call).
# 1. sm90lp's GPU tests (LONGCA_FWD_WALK: the persistent forward's blocks walk the host's
#    longest-processing-time list; the tests' capped grids make each block walk many items).
# 2. b: sm90 / sm90ko / sm90lp / sm90rm twice, the d128 forward on the persistent masks at
#    8K-32K (full_document and the windows' non-persistent cells are controls).
#    sm90ko (LONGCA_FWD_ORDER_RULE) walks the persistent forward's items heads fastest where a
#    model of the static walk (fwdOrderPays) says KV-major leaves the blocks 2% or more less
#    even: at 64:8 causal_blockwise 16K (modelled +6.8%), causal_document 32K (+3.0%) and
#    prefix_lm_document 32K (+2.8%); rows say heads-fwd there. sm90lp (rows say lpt-fwd)
#    replaces the static walk b, b + 132, ... by the LPT list: the model's busiest block over
#    the mean 1.00-1.02 where the static walk's is 1.01-1.12.
#    Prediction, against sm90: sm90ko causal_blockwise 16K +6 to +9% (as sm90rm: +7.7 / +7.9%
#    in calls 74 and 77), causal_document and prefix_lm_document 32K +1 to +4%, every other
#    cell within 1%; sm90lp half to all of the model's gain: causal_blockwise 16K +7 to +12%,
#    causal_blockwise 8K, causal_document 8K / 32K, prefix_lm_document 8K-32K and
#    share_question 8K-16K +2 to +4%, block_causal_document, sliding_window_causal and
#    causal_document 16K +1 to +2%, sliding_window within 1%, non-persistent cells within 1%;
#    sm90rm below sm90 on the cells the rule keeps KV-major (call 77: -0.5 to -1.5% on the
#    persistent ones). Promotion: a variant that gains on its cells and loses 1% on none.
# 3. c: sm90 / sm90lp twice, the d64 forward on the same masks (192-row tiles): the model's
#    gains +2 to +7% on causal_blockwise, causal_document 8K, prefix_lm_document 8K-16K,
#    share_question 8K; prediction half to all of them, level on the non-persistent cells.
# 4. ncu's SASS source page of one d128 full 16K backward (sm90's bwd90e): the lines its stall
#    samples fall on (call 77: long_scoreboard 2.19 and mio_throttle 0.57 an issued
#    instruction against cuDNN's 1.59 / 0.05, 15% fewer instructions than cuDNN's, 0.974x
#    cuDNN's time under ncu). Prediction: the mbarrier waits of the Q / dO stage and of the
#    dQ hand-off, the proxy fence after the dQ stage's stores and the stage's STS among the
#    first ten lines, about half the samples on the first ten.
# Bounded to 330 s (BUDGET); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call78.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call78.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-330} longca cuda.test || exit 1
for v in sm90 sm90ko sm90lp sm90rm; do warm $v & done
wait
GPU_TESTS='TestForwardEntries64|TestForwardEntries128|TestMasks' gpu_tests sm90lp 90
masks=causal_blockwise,causal_document,prefix_lm_document,share_question,block_causal_document,sliding_window_causal,sliding_window,full_document
runs="sm90 sm90ko sm90lp sm90rm sm90 sm90ko sm90lp sm90rm"
interleave b 40 "$runs" --masks $masks --seqlens 8K,16K,32K --passes fwd -w 2 -n 5
runs64="sm90 sm90lp sm90 sm90lp"
interleave c 40 "$runs64" --masks $masks --seqlens 8K,16K,32K --passes fwd --head-dim 64 -w 2 -n 5
NCU_PASS=bwd ncu_sass sm90 full 16K 128 90
cat "$out/t/summary.txt"
echo "=== the forward's plan, row by row (persistent-fwd, ragged-fwd, heads-fwd, lpt-fwd)"
row_variants b-1-sm90ko b-2-sm90lp
table b "d128 forward TFLOP/s" "sm90ko/sm90 sm90lp/sm90 sm90rm/sm90" $runs
table c "d64 forward TFLOP/s" "sm90lp/sm90" $runs64
echo "=== the d128 full 16K backward (sm90, bwd90e) under ncu: the SASS lines with the most stall samples"
sass_top "$out/t/ncu-sass-sm90-full-16K.log"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
