#!/bin/sh
# Call 64 (2026-12-05, fifteenth session): sm90 after calls 61-62's promotion (sm90n's wide
# forward at head dim 128, sm90mo's L2-weighed backward order at MHA, sm90bl's paired lse
# and Dsum loads), on the GPU for the first time as the default:
# 1. sm90's GPU tests (every mask, odd lengths, fp16, CP windows, block-sparse maps; fwd and
#    bwd against the CPU reference): the promotion's correctness, the wide forward now
#    sm90's on TestLongRows' head-dim-128 rows;
# 2. cudnn / sm90 twice on issue 19's five masks (full, causal, full_document,
#    causal_document, sliding_window_causal): d128 fwd 8K-48K, d128 bwd 16K-48K, d64 fwd
#    8K-48K, d64 bwd 16K-48K, 64:8; 64:64 bwd on sm90mo's masks at 8K / 16K after the d128
#    rows (what a short budget skips is d64 and ncu, last).
# Prediction (docs/perf.md "Call 64"): the d128 forward's ratios those of sm90n-plain in
# call 62 (full and causal 32K-48K 1.03-1.05x on the H100), the d128 backward's those of
# sm90bl in call 61 (full 32K-48K 1.00-1.01x), d64 unchanged (0.94-0.97x at 8K-16K), 64:64
# as sm90mo in call 61.
# 3. sm90-plain against sm90 on the document cells near the persistence threshold (d128 fwd);
# 4. ncu's launch statistics of cuDNN's and sm90's forwards (d64 full 16K, d128 full 32K).
# Bounded to 540 s; the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call64.sh OUT      (carry bin/longca.gz bin/cuda.test.gz; the call's timeout 600)
set -u
out=${1:?usage: call64.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-540} longca cuda.test || exit 1
warm sm90 &
gpu_tests sm90 200
wait
m5=full,causal,full_document,causal_document,sliding_window_causal
runs="cudnn sm90 cudnn sm90"
interleave f 40 "$runs" --masks $m5 --seqlens 8K,16K,32K,48K --passes fwd -w 2 -n 5
interleave b 60 "$runs" --masks $m5 --seqlens 16K,32K,48K --passes bwd -w 2 -n 5
HEADS=64:64
interleave m 20 "$runs" --masks causal,causal_document,share_question,prefix_lm_causal --seqlens 8K,16K --passes bwd -w 2 -n 5
HEADS=
# the persistence rule's other side now that the non-persistent d128 forward is wide: call 62
# read sm90n-plain (wide, never persistent) +1.9% over sm90 (persistent) on full_document 16K
# (30.7 tiles a row, the rule's threshold 32); sm90-plain on the persistent document cells
# whose wide tiles pay (24-32 tiles a row: full_document 16K, causal_document and
# prefix_lm_document 32K, full_document_long 8K, causal_document_long 16K) and beside them
runs2="sm90 sm90-plain sm90 sm90-plain"
interleave w 25 "$runs2" --masks full_document,causal_document,prefix_lm_document,full_document_long,causal_document_long --seqlens 8K,16K,32K --passes fwd -w 2 -n 5
interleave e 30 "$runs" --head-dim 64 --masks $m5 --seqlens 8K,16K,32K,48K --passes fwd -w 2 -n 5
interleave c 60 "$runs" --head-dim 64 --masks $m5 --seqlens 16K,32K,48K --passes bwd -w 2 -n 5
# cuDNN's forward launch (block size, registers a thread, shared memory, blocks an SM): its
# d64 kernel is named 64x256x64_4x1x1 (call 62), its d128 one 64x128x128_4x1x1
for c in "full 16K 64" "full 32K 128"; do
	set -- $c
	ncu_launch cudnn "$1" "$2" "$3"
	ncu_launch sm90 "$1" "$2" "$3"
done
cat "$out/t/summary.txt"
table f "d128 forward TFLOP/s" "sm90/cudnn" $runs
table b "d128 backward TFLOP/s" "sm90/cudnn" $runs
table e "d64 forward TFLOP/s" "sm90/cudnn" $runs
table c "d64 backward TFLOP/s" "sm90/cudnn" $runs
table m "d128 backward at 64:64 TFLOP/s" "sm90/cudnn" $runs
table w "d128 forward, persistent or not, TFLOP/s" "sm90-plain/sm90" $runs2
launch_table
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
