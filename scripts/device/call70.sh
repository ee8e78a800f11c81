#!/bin/sh
# Call 70 (prepared 2026-12-05, seventeenth session): the default after call 69's promotions
# (sm90's d128 forward items a KV head's together, LONGCA_FWD_KVMAJOR128; the backward's pairs
# within documents by DRAM bytes, docPairsBytesPay) checked whole and timed beside cuDNN.
# 1. every GPU test of sm90 (gpu_test.go);
# 2. f: cudnn / sm90 twice, d128 forward, issue 19's five masks at 8K-32K;
# 3. b: cudnn / sm90 twice, d128 backward, the document masks call 69 paired, 8K-16K.
# Bounded to 270 s (BUDGET); tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call70.sh OUT      (carry bin/longca.gz bin/cuda.test.gz; the call's timeout 300)
set -u
out=${1:?usage: call70.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-270} longca cuda.test || exit 1
warm sm90 &
gpu_tests sm90 150
wait
runs="cudnn sm90 cudnn sm90"
interleave f 30 "$runs" --masks full,causal,full_document,causal_document,sliding_window_causal --seqlens 8K,16K,32K --passes fwd -w 2 -n 5
interleave b 30 "$runs" --masks causal_document,prefix_lm_document,causal_blockwise,causal_document_long --seqlens 8K,16K --passes bwd -w 1 -n 4
cat "$out/t/summary.txt"
echo "=== which rows split (gsplit-N) or paired"
row_variants b-1-sm90
table f "d128 forward TFLOP/s" "sm90/cudnn" $runs
table b "d128 backward TFLOP/s" "sm90/cudnn" $runs
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
