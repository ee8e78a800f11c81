#!/bin/sh
# Call 78 (prepared 2026-12-05, twentieth session, after call 77; docs/perf.md "Next: call
# 78"): any card (ratios in the call).
# 1. b: sm90 / sm90ko / sm90rm twice, the d128 forward on the persistent masks at 16K and 32K.
#    sm90ko (LONGCA_FWD_ORDER_RULE) walks the persistent forward's items heads fastest where a
#    model of the static walk (fwdOrderPays) says KV-major leaves the blocks 2% or more less
#    even: at 64:8 causal_blockwise 16K (modelled +6.8%), causal_document 32K (+3.0%) and
#    prefix_lm_document 32K (+2.8%); rows say heads-fwd there. Prediction: sm90ko against sm90
#    causal_blockwise 16K +6 to +9% (as sm90rm: +7.7 / +7.9% in calls 74 and 77),
#    causal_document and prefix_lm_document 32K +1 to +4%, every other cell within 1% (the
#    same order; its persistent entries carry the second order's item code, the loop's SASS
#    as sm90's); sm90rm below sm90 on the cells the rule keeps KV-major (call 77: -0.5 to
#    -1.5% on the persistent ones). Promotion: sm90ko gains on the three and loses 1% on none.
# 2. ncu's SASS source page of one d128 full 16K backward (sm90's bwd90e): the lines its stall
#    samples fall on (call 77: long_scoreboard 2.19 and mio_throttle 0.57 an issued
#    instruction against cuDNN's 1.59 / 0.05, 15% fewer instructions than cuDNN's, 0.974x
#    cuDNN's time under ncu). Prediction: the mbarrier waits of the Q / dO stage and of the
#    dQ hand-off, the proxy fence after the dQ stage's stores and the stage's STS among the
#    first ten lines, about half the samples on the first ten.
# Bounded to 300 s (BUDGET); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call78.sh OUT   (carry bin/longca.gz)
set -u
out=${1:?usage: call78.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-300} longca || exit 1
for v in sm90 sm90ko sm90rm; do warm $v & done
wait
runs="sm90 sm90ko sm90rm sm90 sm90ko sm90rm"
interleave b 45 "$runs" --masks causal_blockwise,causal_document,prefix_lm_document,share_question,block_causal_document,sliding_window_causal,sliding_window --seqlens 16K,32K --passes fwd -w 2 -n 5
NCU_PASS=bwd ncu_sass sm90 full 16K 128 90
cat "$out/t/summary.txt"
echo "=== the forward's plan, row by row (persistent-fwd, ragged-fwd, heads-fwd)"
row_variants b-1-sm90ko
table b "d128 forward TFLOP/s" "sm90ko/sm90 sm90rm/sm90" $runs
echo "=== the d128 full 16K backward (sm90, bwd90e) under ncu: the SASS lines with the most stall samples"
sass_top "$out/t/ncu-sass-sm90-full-16K.log"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
