#!/bin/sh
# Call 71 (prepared 2026-12-05, seventeenth session; docs/perf.md "Next: call 71"): the H100
# round after calls 67-70's promotions (an H200 runs run-final.sh etc. instead: by-card.sh).
#   sm90dt   sm90 with the pairs-by-bytes rule's tail bound at 1.25 instead of 1.13
#            (docPairsBytesTail): call 69's sm90dp won share_question 32K by +6.3% (tail
#            1.143x, 40 -> 6 GB modelled), left unpaired by sm90's 1.13: at 64:8 the one plan
#            1.25 changes (the other cells' pairs save under 4 GB)
# 1. sm90dt's GPU tests (TestCompile, TestMasks, TestSplit128Groups);
# 2. b: cudnn / sm90 / sm90dt twice, d128 backward, share_question and causal_document_long
#    (0.93x cuDNN at 8K in call 70) at 8K-48K; c: sm90 / sm90g2 twice on causal_blockwise 48K,
#    where sm90's pairs within blocks split in 4 (since the bytes rule weighs the plan's parts,
#    after call 70: not yet timed) and sm90g2 runs sm90's plan before (key tiles together,
#    split 2); prediction: -3 to +5%, sm90 to keep the plan if it is not 1% slower
# 3. f: cudnn / sm90 / sm90kv / sm90kv-persist twice, d64 forward, full and causal 8K / 16K:
#    cuDNN's d64 forward is persistent and KV-major; ours is neither at these lengths (sm90kv
#    is KV-major); prediction for sm90kv-persist against sm90: -2 to +3%;
# 4. the d64 forward's stalls by SASS line on sm90's current build (call 60 read an older
#    one), full 8K and 16K, and cuDNN's stall reasons at 8K (the gap is widest at 8K-16K:
#    0.90-0.95x);
# Bounded to 460 s (BUDGET); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/by-card.sh OUT run-final.sh 585 -- call71.sh   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call71.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-460} longca cuda.test || exit 1
for v in sm90 sm90dt sm90kv; do warm $v & done
wait
GPU_TESTS='TestCompile|TestSplit128Groups|TestMasks' gpu_tests sm90dt 90
runs="cudnn sm90 sm90dt cudnn sm90 sm90dt"
interleave b 40 "$runs" --masks share_question,causal_document_long --seqlens 8K,16K,32K,48K --passes bwd -w 1 -n 4
interleave c 40 "sm90 sm90g2 sm90 sm90g2" --masks causal_blockwise --seqlens 48K --passes bwd -w 1 -n 4
runs3="cudnn sm90 sm90kv sm90kv-persist cudnn sm90 sm90kv sm90kv-persist"
interleave f 30 "$runs3" --head-dim 64 --masks full,causal --seqlens 8K,16K --passes fwd -w 2 -n 5
NCU_PASS=fwd NCU_DIM=64
for v in sm90 cudnn; do ncu_stall $v full 8K 40; done
ncu_sass sm90 full 8K 64 60
ncu_sass sm90 full 16K 64 60
unset NCU_PASS NCU_DIM
cat "$out/t/summary.txt"
echo "=== which rows paired"
row_variants b-1-sm90 b-2-sm90dt c-0-sm90 c-1-sm90g2
table b "d128 backward TFLOP/s" "sm90/cudnn sm90dt/cudnn sm90dt/sm90" $runs
table c "d128 backward, causal_blockwise 48K TFLOP/s" "sm90/sm90g2" sm90 sm90g2 sm90 sm90g2
table f "d64 forward TFLOP/s" "sm90/cudnn sm90kv/sm90 sm90kv-persist/sm90" $runs3
stall_table
echo "=== sm90's d64 forward SASS, full 8K: the instructions with the most stall samples"
sass_top "$out/t/ncu-sass-sm90-full-8K-fwd-d64.log"
echo "=== the same at 16K"
sass_top "$out/t/ncu-sass-sm90-full-16K-fwd-d64.log"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
