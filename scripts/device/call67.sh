#!/bin/sh
# (Ran 2026-12-05, seventeenth session, on an H100: docs/perf.md "Calls 67-70 on an H100". sm90-lv1,
# sm90g4, sm90t removed since and sm90sr promoted into sm90: it no longer runs as written.)
# Call 67 (prepared 2026-12-05, sixteenth session): the two backward gaps call 64
# and sparse-final found on an H100, and the d64 forward's serial softmax chains
# (docs/perf.md "Next: calls 67 and 68"; the ncu reading of why cuDNN's d64 shape lost in ours is
# call 68, call68.sh).
#   sm90-lv1   sm90 without sm90bl's paired lse/Dsum loads (LONGCA_BWD_LV2): causal_document
#              16K's d128 backward read 0.82x cuDNN in call 64 (0.95-0.98 on the H200 before
#              the promotion); sm90dp (pairs within documents always, and then split 2 by
#              its rule: rows gsplit-2 doc-pairs-bwd; 9.9 -> 1.9 GB by the L2 model, tail
#              1.12x) and sm90fk (key tiles together: 6.0 GB, tail 1.18x) beside it
#   sm90g4/g8  the d128 backward split in 4 / 8 parts always: the L2 model has block-sparse
#              64K's backward read 157 GB unsplit, 93 split 4, 55 split 8 (b128 r0.2), where
#              sm90 read 373 TFLOP/s at 64K against 513 at 32K (Flex 379 / 385); sm90sr's
#              plans on these cells are sm90g8's or sm90's (docs/perf.md)
#   sm90t      the forward's softmax over four partial maxima and sums: sm90's SASS has each
#              row's maximum and sum as one serial chain of 16 dependent FMNMX / FADD
# 1. sm90g8's GPU tests (TestSplit128Groups: groups of 8 and 4, block-sparse maps, pairs
#    within documents with the split; the row must say gsplit-8; TestBlockSparse, TestMasks),
#    sm90t's forward tests (every mask through both d64 and d128 entries; TestMasks);
# 2. b: cudnn / sm90 / sm90-lv1 / sm90dp / sm90fk twice, d128 backward, causal_document,
#    prefix_lm_document, causal_blockwise at 8K and 16K (the H100's low cells against cuDNN and
#    Flex: heaviest-first plans the L2 model has read 7.7-10 GB at 16K, the key tiles together
#    3.6-6);
# 3. s: sm90 / sm90g4 / sm90g8 twice, block-sparse b128 r0.2 / r0.5 at 32K / 64K backward;
# 4. f / g: cudnn / sm90 / sm90t twice, the forward at d64 (f) and d128 (g), full and causal
#    at 8K-32K.
# Bounded to 540 s (BUDGET); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call67.sh OUT      (carry bin/longca.gz bin/cuda.test.gz; the call's timeout 600)
set -u
out=${1:?usage: call67.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-540} longca cuda.test || exit 1
for v in sm90 sm90-lv1 sm90g4 sm90g8 sm90t; do warm $v & done
wait
GPU_TESTS='TestCompile|TestSplit128Groups|TestBlockSparse|TestMasks' gpu_tests sm90g8 120
GPU_TESTS='TestCompile|TestForwardEntries64|TestForwardEntries128|TestMasks' gpu_tests sm90t 90
runs="cudnn sm90 sm90-lv1 sm90dp sm90fk cudnn sm90 sm90-lv1 sm90dp sm90fk"
interleave b 30 "$runs" --masks causal_document,prefix_lm_document,causal_blockwise --seqlens 8K,16K --passes bwd -w 2 -n 5
runs2="sm90 sm90g4 sm90g8 sm90 sm90g4 sm90g8"
_k=0
for v in $runs2; do
	step "s-$_k-$v" 45 sparse --kernels cuda --variant "$v" --seqlens 32K,64K --block 128 --ratios 0.2,0.5 --passes bwd -w 1 -n 3
	_k=$((_k + 1))
done
runs3="cudnn sm90 sm90t cudnn sm90 sm90t"
interleave f 30 "$runs3" --head-dim 64 --masks full,causal --seqlens 8K,16K,32K --passes fwd -w 2 -n 5
interleave g 30 "$runs3" --masks full,causal --seqlens 8K,16K,32K --passes fwd -w 2 -n 5
cat "$out/t/summary.txt"
echo "=== which rows split (gsplit-N) or paired"
row_variants b-1-sm90 b-3-sm90dp s-1-sm90g4 s-2-sm90g8
table b "d128 backward TFLOP/s" "sm90/cudnn sm90-lv1/cudnn sm90dp/cudnn sm90fk/cudnn sm90-lv1/sm90 sm90dp/sm90 sm90fk/sm90" $runs
table s "block-sparse b128 backward TFLOP/s" "sm90g4/sm90 sm90g8/sm90" $runs2
table f "d64 forward TFLOP/s" "sm90/cudnn sm90t/cudnn sm90t/sm90" $runs3
table g "d128 forward TFLOP/s" "sm90/cudnn sm90t/cudnn sm90t/sm90" $runs3
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
