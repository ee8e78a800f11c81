#!/bin/sh
# Call 109 (prepared 2026-12-06, thirtieth session): any card but an H200 (by-card.sh gives an
# H200 run-final). sm90xi: the item boundary as an ordinary turn where the overlapped forward
# draws its items by the counter (LONGCA_FWD_XITEM; docs/d64-forward-study.md, Proposal 2), now
# at head dim 128 only (fwd90opd). Its first run, call 109q (binary f9b711b, QUICK, with the
# boundary at both head dims): the forward entries' tests 208 checks, 0 failed; d64 causal 8K
# -2.0%, full 8K -0.9% (three runs a side, every run alike; predicted +0.5 to +1.5%: wrong in
# sign), so the d64 forward keeps sm90's. Offline (ptxas 12.4): fwd90opd no spill, no wgmma
# serialised, its loop 772 instructions; sm90's SASS unchanged, and sm90xi's d64 entries now
# sm90's.
# 1. sm90xi's GPU tests: the forward entries at head dim 128 (persistent on 3 blocks: items
#    crossing into items, items without entries), every mask, odd lengths and fp16, windows.
#    Prediction: they pass.
# 2. s: d128 forward where the rule runs it persistent: sliding_window_causal,
#    causal_document, block_causal_document, share_question at 8K and 16K, causal and
#    full_document 8K, sm90 sm90xi x3. Prediction (after call 109q's d64 loss, with two
#    consumer warpgroups and no spill here): -1 to +2% (the epilogue now in the warpgroup's
#    time between turns, which at d128 is the other warpgroup's one turn); the windows (8-16
#    tiles a row) the most either way. Promotion (LONGCA_FWD_XITEM in sm90) if the medians'
#    geomean gains and no cell is below -1%.
# 3. f: d128 full and causal 32K (the wide forward, a block an item: the same launch, the
#    control). Prediction: within 1%.
# Bounded to 300 s (BUDGET); tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call109.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call109.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-300} longca cuda.test || exit 1
warm sm90 &
warm sm90xi &
wait
GPU_TESTS='TestForwardEntries128|TestMasks|TestWindows|TestOddLengthsAndFP16' gpu_tests sm90xi 90
R="sm90 sm90xi sm90 sm90xi sm90 sm90xi"
interleave s 40 "$R" --masks sliding_window_causal,causal_document,block_causal_document,share_question --seqlens 8K,16K --head-dim 128 --passes fwd -w 3 -n 10
interleave c 40 "$R" --masks causal,full_document --seqlens 8K --head-dim 128 --passes fwd -w 3 -n 10
interleave f 40 "$R" --masks full,causal --seqlens 32K --head-dim 128 --passes fwd -w 3 -n 10
cat "$out/t/summary.txt"
{ join_runs s $R; join_runs c $R; } >"$out/t/s.table"
join_runs f $R >"$out/t/f.table"
row_variants s-0-sm90 s-1-sm90xi c-0-sm90 c-1-sm90xi >"$out/t/variants" 2>&1
echo "=== s: d128 forward TFLOP/s, the rule's persistent cells: mask seqlen, then $R"
cat "$out/t/s.table"
geo_line "$out/t/s.table" "sm90xi / sm90, d128 persistent cells, medians of 3" median
echo "=== f: d128 full and causal 32K (the same launch): mask seqlen, then $R"
cat "$out/t/f.table"
geo_line "$out/t/f.table" "sm90xi / sm90, the control, medians of 3" median
cell_medians "$out/t/s.table"
echo "=== the rows' variants (sm90, then sm90xi)"
cut -c1-400 "$out/t/variants"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
