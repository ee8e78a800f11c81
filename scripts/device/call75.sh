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
#   sm90lz   the lean forward's subtraction point moved to a tile's maximum only where
#            that passes it by more than 8 (FlashAttention-4's conditional rescaling): alpha
#            1 and the rescale of O skipped wherever no row of a warp moves (sm90 rescales in
#            about half of the tiles at 8K, sm90lz in about none after a row's first), three
#            instructions from the maximum to the point instead of four: static softmax
#            clocks 669 -> 658 (d64), 665 -> 652 (d128)
# 1. GPU tests: sm90xf4's and sm90xf8's d64 forwards (TestForwardEntries64: every mask
#    through both entries, rows without keys; TestHeadDim64Groups; TestMasks), sm90rs's and
#    sm90lz's (TestCompile, TestForwardEntries64/128, TestMasks; sm90lz's and sm90's also
#    TestClimbingScores: scores whose maximum climbs 15+ log2 units a key tile, so that O is
#    rescaled and sm90lz's point moves at every tile, which random scores never make it do);
# 2. d: cudnn / sm90 / sm90rs / sm90xf8 / sm90xf4 / sm90lz twice, the d64 forward, full and
#    causal at 8K and 16K. Prediction against sm90: sm90rs 0 to +2% (fewer issue slots, the
#    exponentials' 8-clock spacing unchanged); sm90xf8 -3 to +4%, sm90xf4 -6 to +6% (MUFU's
#    share of a round down 12 / 25%; call 20 lost 14-25% with the same split in the
#    two-warpgroup forward of the day, whose warps' instruction streams bound it); sm90lz +1
#    to +3%; a winner must gain on every cell;
# 3. r: cudnn / sm90 / sm90rs / sm90lz twice, the d128 forward: full and causal (the wide
#    forward, fwd90n: sm90lz's only) and full_document and causal_document (fwd90op) at 8K
#    and 16K. Prediction against sm90: sm90rs -2 to +1% on the documents (the products 3%
#    longer, the softmax's static clocks 4% longer), level on full and causal (its code
#    does not run there); sm90lz +0.5 to +2%;
# 4. sm90's and sm90xf4's d64 full 8K forwards under ncu: time, instructions, stall reasons.
# Bounded to 540 s (BUDGET; the call takes 600); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call75.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call75.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-540} longca cuda.test || exit 1
for v in sm90 sm90rs sm90xf8 sm90xf4 sm90lz; do warm $v & done
wait
GPU_TESTS='TestForwardEntries64|TestHeadDim64Groups|TestMasks' gpu_tests sm90xf4 90
GPU_TESTS='TestForwardEntries64|TestMasks' gpu_tests sm90xf8 90
GPU_TESTS='TestCompile|TestForwardEntries64|TestForwardEntries128|TestMasks' gpu_tests sm90rs 90
GPU_TESTS='TestCompile|TestForwardEntries64|TestForwardEntries128|TestMasks|TestClimbingScores' gpu_tests sm90lz 90
GPU_TESTS='TestClimbingScores' gpu_tests sm90 60
runsd="cudnn sm90 sm90rs sm90xf8 sm90xf4 sm90lz cudnn sm90 sm90rs sm90xf8 sm90xf4 sm90lz"
interleave d 25 "$runsd" --head-dim 64 --masks full,causal --seqlens 8K,16K --passes fwd -w 2 -n 5
runsr="cudnn sm90 sm90rs sm90lz cudnn sm90 sm90rs sm90lz"
interleave r 25 "$runsr" --masks full,causal,full_document,causal_document --seqlens 8K,16K --passes fwd -w 2 -n 5
NCU_PASS=fwd NCU_DIM=64
ncu_stall sm90 full 8K 40
ncu_stall sm90xf4 full 8K 40
unset NCU_PASS NCU_DIM
cat "$out/t/summary.txt"
echo "=== the forward's plan, row by row (persistent-fwd)"
row_variants d-2-sm90rs r-2-sm90rs
table d "d64 forward TFLOP/s" "sm90/cudnn sm90rs/sm90 sm90xf8/sm90 sm90xf4/sm90 sm90lz/sm90" $runsd
table r "d128 forward TFLOP/s" "sm90/cudnn sm90rs/sm90 sm90lz/sm90" $runsr
for v in sm90 sm90xf4; do
	echo "=== $v's d64 full 8K forward under ncu: time, instructions, stall reasons an issued instruction (call 71's sm90: wait 1.85, long_scoreboard 0.75, not_selected 0.73, dispatch 0.70, barrier 0.44)"
	stalls "$out/t/ncu-stall-$v-full-8K-fwd-d64.log"
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
