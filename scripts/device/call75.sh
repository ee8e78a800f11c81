#!/bin/sh
# Call 75 (prepared 2026-12-05, nineteenth session, no device lent; docs/perf.md "Next: call
# 75"): the d64 forward's softmax, on any card (ratios against sm90 and cuDNN in the call).
#   sm90rs   the rows' sums by the tensor cores: V's stages each followed by a chunk of
#            ones, P V n72 (d64) / n136 (d128, fwd90o and fwd90op only: the 128-key forward,
#            not the wide one) leaves each row's sum in O's last columns; 64 FADD a thread a
#            tile fewer (the loop 708 -> 677 instructions at d64), static softmax clocks
#            669 -> 652 (d64), 665 -> 691 (d128)
#   sm90xf8  one in 8 of the d64 forward's exponentials on the FMA pipe (exp2_fma, in a
#            thread's second row): MUFU 66 -> 58 a loop, static softmax clocks 669 -> 657;
#            the SM's multi-function unit is as busy as its tensor cores at d64
#   sm90xf4  one in 4 (MUFU 50, static clocks 633)
# 1. GPU tests: sm90xf4's and sm90xf8's d64 forwards (TestForwardEntries64: every mask
#    through both entries; TestHeadDim64Groups; TestMasks), sm90rs's (TestCompile,
#    TestForwardEntries64/128, TestMasks);
# 2. d: cudnn / sm90 / sm90rs / sm90xf8 / sm90xf4 twice, the d64 forward, full, causal and
#    causal_document at 8K and 16K. Prediction against sm90: sm90rs 0 to +2% (fewer issue
#    slots, the exponentials' 8-clock spacing unchanged); sm90xf8 -3 to +4%, sm90xf4 -6 to
#    +6% (MUFU's share of a round down 12 / 25%; call 20 lost 14-25% with the same split in
#    the two-warpgroup forward of the day, whose warps' instruction streams bound it); a
#    winner must gain on every full and causal cell and lose at most 1% on causal_document;
# 3. r: cudnn / sm90 / sm90rs twice, the d128 forward where it runs fwd90op (persistent):
#    full_document, causal_document and sliding_window_causal at 8K and 16K. Prediction:
#    -2 to +1% (the products 3% longer, the softmax's static clocks 4% longer);
# 4. sm90's and sm90xf4's d64 full 8K forwards under ncu: time, instructions, stall reasons.
# Bounded to 420 s (BUDGET); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call75.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call75.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-420} longca cuda.test || exit 1
for v in sm90 sm90rs sm90xf8 sm90xf4; do warm $v & done
wait
GPU_TESTS='TestForwardEntries64|TestHeadDim64Groups|TestMasks' gpu_tests sm90xf4 90
GPU_TESTS='TestForwardEntries64|TestMasks' gpu_tests sm90xf8 90
GPU_TESTS='TestCompile|TestForwardEntries64|TestForwardEntries128|TestMasks' gpu_tests sm90rs 90
runsd="cudnn sm90 sm90rs sm90xf8 sm90xf4 cudnn sm90 sm90rs sm90xf8 sm90xf4"
interleave d 30 "$runsd" --head-dim 64 --masks full,causal,causal_document --seqlens 8K,16K --passes fwd -w 2 -n 5
runsr="cudnn sm90 sm90rs cudnn sm90 sm90rs"
interleave r 30 "$runsr" --masks full_document,causal_document,sliding_window_causal --seqlens 8K,16K --passes fwd -w 2 -n 5
NCU_PASS=fwd NCU_DIM=64
ncu_stall sm90 full 8K 40
ncu_stall sm90xf4 full 8K 40
unset NCU_PASS NCU_DIM
cat "$out/t/summary.txt"
echo "=== the forward's plan, row by row (persistent-fwd)"
row_variants d-2-sm90rs r-2-sm90rs
table d "d64 forward TFLOP/s" "sm90/cudnn sm90rs/sm90 sm90xf8/sm90 sm90xf4/sm90" $runsd
table r "d128 forward TFLOP/s (fwd90op)" "sm90/cudnn sm90rs/sm90" $runsr
for v in sm90 sm90xf4; do
	echo "=== $v's d64 full 8K forward under ncu: time, instructions, stall reasons an issued instruction (call 71's sm90: wait 1.85, long_scoreboard 0.75, not_selected 0.73, dispatch 0.70, barrier 0.44)"
	stalls "$out/t/ncu-stall-$v-full-8K-fwd-d64.log"
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
