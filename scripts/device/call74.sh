#!/bin/sh
# Call 74 (prepared 2026-12-05, eighteenth session; docs/perf.md "Next: the next session's
# device plan"): the round after the eighteenth session's suite, on any card (by-card.sh sends
# an H200 to run-final.sh first: the H200 tables come before it there).
#   sm90rm   sm90 with the d128 forward's items in the order before call 69 (heads fastest):
#            the eighteenth session's suite (an H100) read sliding_window 48K's forward 10%,
#            causal_blockwise 16K's and prefix_lm_document 32K's 6% and sliding_window_causal
#            48K's 4% below the sixteenth's, the KV-major order (call 69) having come between;
#            cuDNN read sliding_window 48K 10% above: another card
#   sm90rg   sm90 with the forward's tiles started at the mask's documents (ragged, cuDNN's
#            THD layout) where that visits 2% fewer tiles: full_document and causal_document
#            8K / 16K at 128 x 128 (3-4% fewer key positions), the d128 forward's cells below
#            cuDNN in the eighteenth session's suite (0.94-0.995x); at 192 x 128 (d64) also
#            full_document 32K, causal_blockwise and prefix_lm_document 16K
# 1. sm90rg's GPU tests (TestCompile, TestForwardEntries64/128: every mask through both
#    forward entries, full_document 2048 and causal_document 1024 ragged; TestMasks), then
#    sm90rm's (TestCompile, TestForwardEntries128, TestMasks);
# 2. r: cudnn / sm90 / sm90rg twice, the forward on full_document and causal_document at 8K,
#    16K and 32K at d128 and d64; prediction for sm90rg against sm90: +2 to +4% on the ragged
#    cells at 8K-16K (the key positions saved, less the partial tiles' mask work it also
#    saves or adds), level (within 1%) where the list is the same (d128 32K); promote if
#    every ragged cell gains and none loses over 1%;
# 3. a: cudnn / sm90 / sm90rm twice, the d128 forward on those cells and full / causal 16K and
#    48K; prediction: sm90rm within 3% of sm90 on every cell (the drop was the card's); a cell
#    where it gains 3% or more in both runs gives the KV-major order a rule there;
# 4. b: sm90 / sm90-persist three times, the d128 forward of full_document 8K and 16K: call 73
#    read the persistent side +2.2% at 8K (627 against 614, cuDNN's 627), under the 3% that
#    moves the rule; prediction: +1 to +3% at 8K, level at 16K.
# Bounded to 420 s (BUDGET); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call74.sh OUT   (carry bin/longca.gz bin/cuda.test.gz; any card: sm90rg decides the default the H200 tables time)
set -u
out=${1:?usage: call74.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-420} longca cuda.test || exit 1
for v in sm90 sm90rg sm90rm sm90-persist; do warm $v & done
wait
GPU_TESTS='TestCompile|TestForwardEntries64|TestForwardEntries128|TestMasks' gpu_tests sm90rg 120
GPU_TESTS='TestCompile|TestForwardEntries128|TestMasks' gpu_tests sm90rm 90
runsr="cudnn sm90 sm90rg cudnn sm90 sm90rg"
interleave r 30 "$runsr" --masks full_document,causal_document --seqlens 8K,16K,32K --passes fwd -w 2 -n 5
interleave s 30 "$runsr" --head-dim 64 --masks full_document,causal_document --seqlens 8K,16K,32K --passes fwd -w 2 -n 5
runs="cudnn sm90 sm90rm cudnn sm90 sm90rm"
interleave a 30 "$runs" --masks sliding_window,sliding_window_causal,full,causal --seqlens 16K,48K --passes fwd -w 2 -n 5
runs1="sm90 sm90rm sm90 sm90rm"
interleave e 30 "$runs1" --masks causal_blockwise,prefix_lm_document --seqlens 16K,32K --passes fwd -w 2 -n 5
runs2="sm90 sm90-persist sm90 sm90-persist sm90 sm90-persist"
interleave b 30 "$runs2" --masks full_document --seqlens 8K,16K --passes fwd -w 2 -n 8
cat "$out/t/summary.txt"
echo "=== the forward's plan, row by row (persistent-fwd, wide-fwd)"
row_variants r-2-sm90rg s-2-sm90rg a-1-sm90 a-2-sm90rm e-0-sm90 b-0-sm90 b-1-sm90-persist
table r "d128 forward TFLOP/s (sm90rg)" "sm90/cudnn sm90rg/cudnn sm90rg/sm90" $runsr
table s "d64 forward TFLOP/s (sm90rg)" "sm90/cudnn sm90rg/cudnn sm90rg/sm90" $runsr
table a "d128 forward TFLOP/s" "sm90/cudnn sm90rm/sm90" $runs
table e "d128 forward TFLOP/s (cuDNN far behind on these masks)" "sm90rm/sm90" $runs1
table b "d128 forward, full_document TFLOP/s" "sm90-persist/sm90" $runs2
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
