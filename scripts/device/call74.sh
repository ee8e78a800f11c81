#!/bin/sh
# Call 74 (prepared 2026-12-05, eighteenth session; docs/perf.md "Next: the next session's
# device plan"): the H100 round after the eighteenth session's suite (an H200 runs the H200
# tables instead: by-card.sh).
#   sm90rm   sm90 with the d128 forward's items in the order before call 69 (heads fastest):
#            the eighteenth session's suite (an H100) read sliding_window 48K's forward 10%,
#            causal_blockwise 16K's and prefix_lm_document 32K's 6% and sliding_window_causal
#            48K's 4% below the sixteenth's, the KV-major order (call 69) having come between;
#            cuDNN read sliding_window 48K 10% above: another card
# 1. sm90rm's GPU tests (TestCompile, TestForwardEntries128, TestMasks);
# 2. a: cudnn / sm90 / sm90rm twice, the d128 forward on those cells and full / causal 16K and
#    48K; prediction: sm90rm within 3% of sm90 on every cell (the drop was the card's); a cell
#    where it gains 3% or more in both runs gives the KV-major order a rule there;
# 3. b: sm90 / sm90-persist three times, the d128 forward of full_document 8K and 16K: call 73
#    read the persistent side +2.2% at 8K (627 against 614, cuDNN's 627), under the 3% that
#    moves the rule; prediction: +1 to +3% at 8K, level at 16K.
# Bounded to 300 s (BUDGET); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/by-card.sh OUT run-final.sh 585 -- call74.sh   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call74.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-300} longca cuda.test || exit 1
for v in sm90 sm90rm sm90-persist; do warm $v & done
wait
GPU_TESTS='TestCompile|TestForwardEntries128|TestMasks' gpu_tests sm90rm 90
runs="cudnn sm90 sm90rm cudnn sm90 sm90rm"
interleave a 30 "$runs" --masks sliding_window,sliding_window_causal,full,causal --seqlens 16K,48K --passes fwd -w 2 -n 5
runs1="sm90 sm90rm sm90 sm90rm"
interleave e 30 "$runs1" --masks causal_blockwise,prefix_lm_document --seqlens 16K,32K --passes fwd -w 2 -n 5
runs2="sm90 sm90-persist sm90 sm90-persist sm90 sm90-persist"
interleave b 30 "$runs2" --masks full_document --seqlens 8K,16K --passes fwd -w 2 -n 8
cat "$out/t/summary.txt"
echo "=== the forward's plan, row by row (persistent-fwd, wide-fwd)"
row_variants a-1-sm90 a-2-sm90rm e-0-sm90 b-0-sm90 b-1-sm90-persist
table a "d128 forward TFLOP/s" "sm90/cudnn sm90rm/sm90" $runs
table e "d128 forward TFLOP/s (cuDNN far behind on these masks)" "sm90rm/sm90" $runs1
table b "d128 forward, full_document TFLOP/s" "sm90-persist/sm90" $runs2
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
