#!/bin/sh
# Call 106 (prepared 2026-12-06, thirtieth session, after call 105; ran on an H100, 130 s:
# docs/perf.md "Calls 105-108"; sm90pr is no longer a variant): any card. sm90pr again,
# on the 9 cells its rule flips, three runs a side. Call 105 (an H100): the flipped cells'
# geomean +1.83%, but prefix_lm_causal 16K -3.6% by the means (sm90 686.7 / 698.1, sm90pr
# 630.5 / 704.3: one low run) and the same launch read 11% apart between runs on controls
# (global_sliding_window 16K sm90 635.1 / 698.0): two runs a side do not settle a 2% rule.
# 1. g: sm90 sm90pr x3, d128 forward, the 9 flipped cells (full 8K, causal 8K / 16K,
#    full_document 8K / 32K, share_question 32K, prefix_lm_causal 8K / 16K,
#    global_sliding_window 8K) as 5 mask-length runs. Prediction: by the medians, geomean +1
#    to +3% (causal 8K and full_document 8K +2%, as call 105 read both runs alike), none below
#    -1% (prefix_lm_causal 16K +2 to +6%, call 104's persist-rule +7.5%). Promotion (shortRows
#    72 in sm90) if the medians' geomean gains and no cell's median is below -1%, in this call
#    and over calls 105 and 106's runs together.
# Bounded to 240 s (BUDGET); tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call106.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call106.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-240} longca || exit 1
warm sm90 &
warm sm90pr &
wait
R="sm90 sm90pr sm90 sm90pr sm90 sm90pr"
F="--head-dim 128 --passes fwd -w 3 -n 10"
interleave a 40 "$R" --masks full,prefix_lm_causal,global_sliding_window,full_document,causal --seqlens 8K $F
interleave b 40 "$R" --masks causal,prefix_lm_causal --seqlens 16K $F
interleave c 40 "$R" --masks full_document,share_question --seqlens 32K $F
cat "$out/t/summary.txt"
for d in a b c; do
	join_runs $d $d-0-sm90 $d-1-sm90pr $d-2-sm90 $d-3-sm90pr $d-4-sm90 $d-5-sm90pr
done >"$out/t/g.table"
echo "=== d128 forward TFLOP/s: mask seqlen, then $R"
cat "$out/t/g.table"
geo_line "$out/t/g.table" "sm90pr / sm90, the 9 flipped cells, medians of 3" median
geo_line "$out/t/g.table" "sm90pr / sm90, the 9 flipped cells, means of 3"
python3 - "$out/t/g.table" <<'PY'
import statistics, sys
for l in open(sys.argv[1]):
    f = l.split()
    try:
        v = list(map(float, f[2:]))
    except ValueError:
        continue
    print("%-24s %6s  median ratio %+.2f%%" % (f[0], f[1], 100 * (statistics.median(v[1::2]) / statistics.median(v[0::2]) - 1)))
PY
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
