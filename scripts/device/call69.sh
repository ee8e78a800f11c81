#!/bin/sh
# (Ran 2026-12-05, seventeenth session, on an H100: docs/perf.md "Calls 67-70 on an H100". sm90dq
# promoted into sm90 and removed since: it no longer runs as written.)
# Call 69 (prepared 2026-12-05, seventeenth session; docs/perf.md "Next: call 69"): what calls
# 67 and 68 found, on the new default (sm90 with the split rule widened to 2, 4 or 8 parts:
# call 67's sm90g8 +32 to +51% on 64K block-sparse maps).
#   sm90dq   the backward's pairs within documents by DRAM bytes as well as tail (call 67:
#            sm90dp's pairs split in 2 +20 to +23% at 16K on three masks, where sm90's tail
#            rule leaves them unpaired); sm90dp (pairs wherever rows vary) beside it
#   sm90kv   the forward's work items a KV head's together (call 68: sm90's d64 full 16K
#            forward read 1.54 GB from DRAM at 84% L2 hits, cuDNN's 0.17 GB at 99%)
# 1. GPU tests: sm90 (TestSplit128Groups, TestBlockSparse, TestMasks: the new split rule),
#    sm90kv (TestForwardEntries64/128: every mask through both forward entries; TestMasks),
#    sm90dq (TestMasks);
# 2. b: cudnn / sm90 / sm90dp / sm90dq twice, d128 backward, six masks whose rows vary within
#    documents or blocks, 8K-32K;
# 3. s: sm90 once, block-sparse b128 r0.2 / r0.5 at 32K / 64K backward: the rows must say
#    gsplit-8 at 64K;
# 4. f / g: cudnn / sm90 / sm90kv twice, the forward at d64 (f) and d128 (g), full and causal
#    at 8K-32K;
# 5. ncu: DRAM bytes and L2 hit rate of sm90kv's forward (d64 and d128 full 16K), sm90's at d128.
# Bounded to 500 s (BUDGET); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call69.sh OUT      (carry bin/longca.gz bin/cuda.test.gz; the call's timeout 600)
set -u
out=${1:?usage: call69.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-500} longca cuda.test || exit 1
for v in sm90 sm90kv sm90dq; do warm $v & done
wait
GPU_TESTS='TestCompile|TestSplit128Groups|TestBlockSparse|TestMasks' gpu_tests sm90 120
GPU_TESTS='TestCompile|TestForwardEntries64|TestForwardEntries128|TestMasks' gpu_tests sm90kv 90
GPU_TESTS='TestCompile|TestMasks' gpu_tests sm90dq 60
runs="cudnn sm90 sm90dp sm90dq cudnn sm90 sm90dp sm90dq"
interleave b 40 "$runs" --masks causal_document,prefix_lm_document,causal_blockwise,share_question,causal_document_long,prefix_lm_causal --seqlens 8K,16K,32K --passes bwd -w 1 -n 4
step s-0-sm90 45 sparse --kernels cuda --variant sm90 --seqlens 32K,64K --block 128 --ratios 0.2,0.5 --passes bwd -w 1 -n 3
runs3="cudnn sm90 sm90kv cudnn sm90 sm90kv"
interleave f 30 "$runs3" --head-dim 64 --masks full,causal --seqlens 8K,16K,32K --passes fwd -w 2 -n 5
interleave g 30 "$runs3" --masks full,causal --seqlens 8K,16K,32K --passes fwd -w 2 -n 5
NCU_PASS=fwd NCU_DIM=64 ncu_mem sm90kv full 16K 30
NCU_PASS=fwd NCU_DIM=128
for v in sm90kv sm90 cudnn; do ncu_mem $v full 16K 30; done
unset NCU_PASS NCU_DIM
cat "$out/t/summary.txt"
echo "=== which rows split (gsplit-N) or paired"
row_variants b-1-sm90 b-2-sm90dp b-3-sm90dq s-0-sm90
echo "=== L2 and DRAM"
mem_table
table b "d128 backward TFLOP/s" "sm90/cudnn sm90dp/cudnn sm90dq/cudnn sm90dp/sm90 sm90dq/sm90" $runs
table s "block-sparse b128 backward TFLOP/s (sm90, the widened split)" "" sm90
table f "d64 forward TFLOP/s" "sm90/cudnn sm90kv/cudnn sm90kv/sm90" $runs3
table g "d128 forward TFLOP/s" "sm90/cudnn sm90kv/cudnn sm90kv/sm90" $runs3
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
