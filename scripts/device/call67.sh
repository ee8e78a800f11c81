#!/bin/sh
# Call 67 (prepared 2026-12-05, sixteenth session; not yet run): the two backward gaps call 64
# and sparse-final found on an H100, and why cuDNN's d64 forward shape lost in ours
# (docs/perf.md "Next: call 67").
#   sm90-lv1   sm90 without sm90bl's paired lse/Dsum loads (LONGCA_BWD_LV2): causal_document
#              16K's d128 backward read 0.82x cuDNN in call 64 (0.95-0.98 on the H200 before
#              the promotion); sm90dp (pairs within documents always, and then split 2 by
#              its rule: rows gsplit-2 doc-pairs-bwd; 9.9 -> 1.9 GB by the L2 model, tail
#              1.12x) and sm90fk (key tiles together: 6.0 GB, tail 1.18x) beside it
#   sm90g4/g8  the d128 backward split in 4 / 8 parts always: the L2 model has block-sparse
#              64K's backward read 157 GB unsplit, 93 split 4, 55 split 8 (b128 r0.2), where
#              sm90 read 373 TFLOP/s at 64K against 513 at 32K (Flex 379 / 385)
#   sm90k-seq  call 66's closest d64 shape (-4 to -16% against sm90): ncu's stall reasons
#              beside sm90's and cuDNN's on full 16K, and its SASS source page
# 1. sm90g8's GPU tests (TestSplit128Groups: groups of 8 and 4, block-sparse maps, the row
#    must say gsplit-8; TestBlockSparse, TestMasks), sm90g4's split test;
# 2. b: cudnn / sm90 / sm90-lv1 / sm90dp / sm90fk twice, d128 backward, causal_document,
#    prefix_lm_document, causal_blockwise at 8K and 16K (the H100's low cells against cuDNN and
#    Flex: heaviest-first plans the L2 model has read 8-10 GB at 16K, the key tiles together
#    4-6);
# 3. s: sm90 / sm90g4 / sm90g8 twice, block-sparse b128 r0.2 / r0.5 at 32K / 64K backward;
# 4. d: cudnn / sm90 / sm90g4 / sm90g8 twice, dense backward full 32K / 64K (sparse-final's denominators);
# 5. ncu: stalls and the tensor pipe's share of one d64 full 16K forward of sm90k-seq, sm90,
#    cudnn; sm90k-seq's SASS page; L2's hit rate and DRAM bytes of each (last).
# Bounded to 540 s (BUDGET); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call67.sh OUT      (carry bin/longca.gz bin/cuda.test.gz; the call's timeout 600)
set -u
out=${1:?usage: call67.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-540} longca cuda.test || exit 1
for v in sm90 sm90-lv1 sm90g4 sm90g8 sm90k-seq; do warm $v & done
wait
GPU_TESTS='TestCompile|TestSplit128Groups|TestBlockSparse|TestMasks' gpu_tests sm90g8 120
GPU_TESTS='TestSplit128Groups' gpu_tests sm90g4 60
runs="cudnn sm90 sm90-lv1 sm90dp sm90fk cudnn sm90 sm90-lv1 sm90dp sm90fk"
interleave b 30 "$runs" --masks causal_document,prefix_lm_document,causal_blockwise --seqlens 8K,16K --passes bwd -w 2 -n 5
runs2="sm90 sm90g4 sm90g8 sm90 sm90g4 sm90g8"
_k=0
for v in $runs2; do
	step "s-$_k-$v" 45 sparse --kernels cuda --variant "$v" --seqlens 32K,64K --block 128 --ratios 0.2,0.5 --passes bwd -w 1 -n 3
	_k=$((_k + 1))
done
runs3="cudnn sm90 sm90g4 sm90g8 cudnn sm90 sm90g4 sm90g8"
interleave d 30 "$runs3" --masks full --seqlens 32K,64K --passes bwd -w 1 -n 3
NCU_PASS=fwd NCU_DIM=64
# the stalls and the tensor pipe's share (call 21's metric); then, last, L2's hit rate and
# DRAM bytes (sm90k's 128-query tiles stream K and V from L2 1.5x as often as sm90's
# 192-query ones; cuDNN's as often as sm90k's)
STALL_METRICS="$STALL_METRICS,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"
for v in sm90k-seq sm90 cudnn; do ncu_stall $v full 16K 40; done
ncu_sass sm90k-seq full 16K 64 60
for v in sm90k-seq cudnn sm90; do ncu_mem $v full 16K 30; done
unset NCU_PASS NCU_DIM
cat "$out/t/summary.txt"
echo "=== which rows split (gsplit-N) or paired"
row_variants b-1-sm90 b-3-sm90dp s-1-sm90g4 s-2-sm90g8 d-1-sm90 d-3-sm90g8
table b "d128 backward TFLOP/s" "sm90/cudnn sm90-lv1/cudnn sm90dp/cudnn sm90fk/cudnn sm90-lv1/sm90 sm90dp/sm90 sm90fk/sm90" $runs
table s "block-sparse b128 backward TFLOP/s" "sm90g4/sm90 sm90g8/sm90" $runs2
table d "dense backward TFLOP/s" "sm90/cudnn sm90g4/cudnn sm90g8/cudnn sm90g4/sm90 sm90g8/sm90" $runs3
stall_table
echo "=== the tensor pipe's share, then L2 and DRAM (one d64 full 16K forward each)"
for f in "$out"/t/ncu-stall-*-fwd-d64.log; do
	[ -f "$f" ] && { echo "## $(basename "$f" .log)"; grep -E 'gmma_cycles_active' "$f" | awk '{print "  " $1, $(NF-1), $NF}'; }
done
mem_table
echo "=== sm90k-seq's SASS: the instructions with the most stall samples"
sass_top "$out/t/ncu-sass-sm90k-seq-full-16K-fwd-d64.log"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
