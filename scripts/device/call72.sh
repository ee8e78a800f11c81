#!/bin/sh
# Call 72 (prepared 2026-12-05, eighteenth session; docs/perf.md "Next: call 72"): the H100
# round after call 71 (an H200 runs run-final.sh instead: by-card.sh).
#   sm90ea   sm90 with the forward's overlapped loop reading the next tile's work-list entry
#            a turn ahead (LONGCA_FWD_ENTRY_AHEAD): call 71's SASS samples of the d64 full 8K
#            forward put 2.6% of them on that load's use, issued after the turn's waits
# 1. GPU tests: sm90ea's forward entries (TestForwardEntries64/128, TestMasks);
# 2. b: cudnn / sm90 twice, d128 backward, share_question and causal_blockwise 32K / 48K: the
#    two plans call 71 changed (share_question 32K paired split 2, as sm90dt; causal_blockwise
#    48K unpaired split 2, as sm90g2), now sm90's;
# 3. f / g: cudnn / sm90 / sm90ea twice, the forward at d64 (full, causal 8K / 16K) and d128
#    (full, causal, full_document, causal_document 8K / 16K); prediction for sm90ea against
#    sm90: d64 0 to +2%, d128 0 to +1.5%;
# 4. sm90ea's d64 full 8K stall samples by SASS line (where the entry's wait went).
# Bounded to 330 s (BUDGET); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/by-card.sh OUT run-final.sh 585 -- call72.sh   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call72.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-330} longca cuda.test || exit 1
for v in sm90 sm90ea; do warm $v & done
wait
GPU_TESTS='TestCompile|TestForwardEntries64|TestForwardEntries128|TestMasks' gpu_tests sm90ea 90
runs="cudnn sm90 cudnn sm90"
interleave b 40 "$runs" --masks share_question,causal_blockwise --seqlens 32K,48K --passes bwd -w 1 -n 4
runs3="cudnn sm90 sm90ea cudnn sm90 sm90ea"
interleave f 30 "$runs3" --head-dim 64 --masks full,causal --seqlens 8K,16K --passes fwd -w 2 -n 5
interleave g 30 "$runs3" --masks full,causal,full_document,causal_document --seqlens 8K,16K --passes fwd -w 2 -n 5
NCU_PASS=fwd NCU_DIM=64
ncu_sass sm90ea full 8K 64 60
unset NCU_PASS NCU_DIM
cat "$out/t/summary.txt"
echo "=== which rows paired"
row_variants b-1-sm90 b-3-sm90
table b "d128 backward TFLOP/s" "sm90/cudnn" $runs
table f "d64 forward TFLOP/s" "sm90/cudnn sm90ea/cudnn sm90ea/sm90" $runs3
table g "d128 forward TFLOP/s" "sm90/cudnn sm90ea/cudnn sm90ea/sm90" $runs3
echo "=== sm90ea's d64 forward SASS, full 8K: the instructions with the most stall samples"
sass_top "$out/t/ncu-sass-sm90ea-full-8K-fwd-d64.log"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
