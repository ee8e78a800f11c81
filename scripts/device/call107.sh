#!/bin/sh
# Call 107 (prepared 2026-12-06, thirtieth session, after calls 105-106; ran on an H100, 148 s:
# promoted, docs/perf.md "Calls 105-108"; sm90p60 is now sm90, sm90-r32 the other side): any card. sm90p60:
# the d128 forward's persistence rule at 60 tiles a row (sm90's 32), the threshold read off
# calls 105-106 (sm90pr, 72: by the medians of five runs a side the six flipped cells below 60
# tiles a row gained 0.5-6.3%, prefix_lm_causal 16K at 67.5 lost 4.6%). Fresh processes, so
# that the cells chosen from those runs are timed again.
# 1. sm90p60's GPU tests (the d128 forward's entries, every mask). Prediction: they pass (the
#    same entries, another choice among them).
# 2. g: sm90 sm90p60 x3, d128 forward: causal, full_document, global_sliding_window,
#    prefix_lm_causal at 8K and full_document, share_question at 32K (the six it flips), full
#    8K (64 tiles a row: the same launch, the control). Prediction: by the medians geomean over
#    the six +1.5 to +3% (causal 8K and full_document 8K +2%, share_question 32K +3 to +6%,
#    prefix_lm_causal 8K and full_document 32K 0 to +1.5%), none below -1%; full 8K level
#    (within 1%). Promotion (shortRows 60 in sm90, sm90-r32 the other side) if the medians'
#    geomean over the six gains and none is below -1%.
# Bounded to 240 s (BUDGET); tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call107.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call107.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-240} longca cuda.test || exit 1
warm sm90 &
warm sm90p60 &
wait
GPU_TESTS='TestForwardEntries128|TestMasks' gpu_tests sm90p60 60
R="sm90 sm90p60 sm90 sm90p60 sm90 sm90p60"
F="--head-dim 128 --passes fwd -w 3 -n 10"
interleave a 40 "$R" --masks causal,full_document,global_sliding_window,prefix_lm_causal,full --seqlens 8K $F
interleave b 40 "$R" --masks full_document,share_question --seqlens 32K $F
cat "$out/t/summary.txt"
for d in a b; do
	join_runs $d $R
done >"$out/t/g.table"
echo "=== d128 forward TFLOP/s: mask seqlen, then $R"
cat "$out/t/g.table"
grep -v '^full 8192 ' "$out/t/g.table" >"$out/t/g.six"
geo_line "$out/t/g.six" "sm90p60 / sm90, the 6 flipped cells, medians of 3" median
geo_line "$out/t/g.six" "sm90p60 / sm90, the 6 flipped cells, means of 3"
python3 - "$out/t/g.table" <<'PY'
import statistics, sys
for l in open(sys.argv[1]):
    f = l.split()
    try:
        v = list(map(float, f[2:]))
    except ValueError:
        continue
    if len(v) == 6:
        print("%-24s %6s  median ratio %+.2f%%" % (f[0], f[1], 100 * (statistics.median(v[1::2]) / statistics.median(v[0::2]) - 1)))
PY
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
