#!/bin/sh
# Call 109 (prepared 2026-12-06, thirtieth session; not yet run): any card but an H200 (by-card.sh
# gives an H200 run-final). sm90xi: the item boundary as an ordinary turn where the overlapped
# forward draws its items by the counter (LONGCA_FWD_XITEM; docs/d64-forward-study.md,
# Proposal 2). Offline (ptxas 12.4): sm90's SASS unchanged; fwd90opd (d128) no spill, its loop
# 772 instructions; fwd90mopd (d64) 22 bytes spilt at the item boundary, none in the loop (717
# instructions against sm90's 715); no wgmma serialised.
# 1. sm90xi's GPU tests: the forward entries at both head dims (persistent on 3 blocks: items
#    crossing into items, items without entries), every mask, odd lengths and fp16, windows,
#    d64 groups. Prediction: they pass.
# 2. d: d64 forward, full and causal 8K, 16K, 32K, sm90 sm90xi x3. Prediction (medians):
#    8K +0.5 to +1.5%, 16K +0.2 to +0.8%, 32K within 0.5% (the boundary's share of an item
#    falls with its tiles: 64 at full 8K, 256 at 32K); none below -1%.
# 3. s: d128 forward where the rule runs it persistent (its items short): sliding_window_causal,
#    causal_document, block_causal_document, share_question at 8K and 16K, causal and
#    full_document 8K, sm90 sm90xi x3. Prediction: +1 to +3% where rows hold 8-20 tiles
#    (the windows, the documents), +0.5 to +2% at 30-60 (causal 8K, share_question 16K); none
#    below -1%. Promotion (LONGCA_FWD_XITEM in sm90) if both tables' medians' geomeans gain and
#    no cell is below -1%.
# QUICK=1 (where little device time is left): the forward entries' tests, then d at 8K only.
# Bounded to 330 s (BUDGET); tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call109.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call109.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-330} longca cuda.test || exit 1
warm sm90 &
warm sm90xi &
wait
R="sm90 sm90xi sm90 sm90xi sm90 sm90xi"
if [ "${QUICK:-0}" = 1 ]; then
	GPU_TESTS='TestForwardEntries64|TestForwardEntries128' gpu_tests sm90xi 45
	interleave d 20 "$R" --masks full,causal --seqlens 8K --head-dim 64 --passes fwd -w 3 -n 10
else
	GPU_TESTS='TestForwardEntries64|TestForwardEntries128|TestMasks|TestWindows|TestOddLengthsAndFP16|TestHeadDim64Groups' gpu_tests sm90xi 90
	interleave d 40 "$R" --masks full,causal --seqlens 8K,16K,32K --head-dim 64 --passes fwd -w 3 -n 10
fi
[ "${QUICK:-0}" = 1 ] || interleave s 40 "$R" --masks sliding_window_causal,causal_document,block_causal_document,share_question --seqlens 8K,16K --head-dim 128 --passes fwd -w 3 -n 10
[ "${QUICK:-0}" = 1 ] || interleave c 40 "$R" --masks causal,full_document --seqlens 8K --head-dim 128 --passes fwd -w 3 -n 10
cat "$out/t/summary.txt"
join_runs d $R >"$out/t/d.table"
{ join_runs s $R; join_runs c $R; } >"$out/t/s.table"
row_variants d-0-sm90 d-1-sm90xi s-0-sm90 s-1-sm90xi >"$out/t/variants" 2>&1
echo "=== d: d64 forward TFLOP/s: mask seqlen, then $R"
cat "$out/t/d.table"
geo_line "$out/t/d.table" "sm90xi / sm90, d64 full and causal, medians of 3" median
echo "=== s: d128 forward TFLOP/s, the rule's persistent cells: mask seqlen, then $R"
cat "$out/t/s.table"
geo_line "$out/t/s.table" "sm90xi / sm90, d128 persistent cells, medians of 3" median
python3 - "$out/t/d.table" "$out/t/s.table" <<'PY'
import statistics, sys
for p in sys.argv[1:]:
    for l in open(p):
        f = l.split()
        try:
            v = list(map(float, f[2:]))
        except ValueError:
            continue
        if len(v) == 6:
            print("%-24s %6s  median ratio %+.2f%%" % (f[0], f[1], 100 * (statistics.median(v[1::2]) / statistics.median(v[0::2]) - 1)))
PY
echo "=== the rows' variants (sm90, then sm90xi)"
cut -c1-400 "$out/t/variants"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
