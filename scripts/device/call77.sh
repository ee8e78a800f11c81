#!/bin/sh
# Call 77 (prepared 2026-12-05, nineteenth session, after call 74; docs/perf.md "Next: the next
# session's device plan", step 2): the H100 round, on any card (ratios in the call).
# 1. a: sm90 / sm90rm twice, the d128 forward on every kernel mask at 8K and 16K (where the
#    forward is persistent or short: the KV-major item order's cells). Call 74 read sm90rm
#    (heads fastest, the order before call 69) +7.9% on causal_blockwise 16K in both runs and
#    -2.5 / -3.1% on full / causal 48K. Prediction: causal_blockwise 16K +5 to +9%, the other
#    masks within 3%; a rule (the order heads-fastest on some rows) is written only from
#    cells that gain 3% or more in both runs;
# 2. ncu stall reasons of one d128 full 16K backward, sm90 and cuDNN: the backward's one cell
#    below 0.98x cuDNN in the nineteenth session's suite (0.954; 1.05 in the sixteenth).
#    Prediction: as call 60's at 32K on the H200, sm90 more long_scoreboard and mio_throttle
#    stalls an instruction than cuDNN, fewer instructions.
# Bounded to 300 s (BUDGET); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call77.sh OUT   (carry bin/longca.gz)
set -u
out=${1:?usage: call77.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-300} longca || exit 1
for v in sm90 sm90rm; do warm $v & done
wait
runs="sm90 sm90rm sm90 sm90rm"
interleave a 45 "$runs" --masks full,causal,full_document,causal_document,sliding_window_causal,sliding_window,share_question,causal_blockwise,prefix_lm_causal,prefix_lm_document,global_sliding_window,block_causal_document --seqlens 8K,16K --passes fwd -w 2 -n 5
ncu_stall sm90 full 16K 40
ncu_stall cudnn full 16K 40
cat "$out/t/summary.txt"
echo "=== the forward's plan, row by row (persistent-fwd, wide-fwd, ragged-fwd)"
row_variants a-0-sm90
table a "d128 forward TFLOP/s" "sm90rm/sm90" $runs
echo "=== the d128 full 16K backward under ncu, sm90 and cuDNN: stall reasons an issued instruction"
stall_table
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
