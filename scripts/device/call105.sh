#!/bin/sh
# Call 105 (prepared 2026-12-06, twenty-ninth session, after call 104; run in the thirtieth on an
# H100, 179 s: outcome in docs/perf.md "Calls 105-108"; sm90pr is no longer a variant): any card.
# sm90pr: the d128 forward's persistence rule at 72 tiles a row instead of 32. Call 104's
# persist-rule (16K and 32K, one process each) had the persistent forward, now by the work
# counter, ahead of the plain one (128 x 176 tiles) up to 67 tiles a row and behind from 88.
# At 64:8, 12 masks, 8K-48K, the threshold flips 9 cells: full 8K (64.0 tiles a row), causal 8K
# / 16K (32.5 / 64.5), full_document 8K / 32K (36.2 / 56.6), share_question 32K (36.5),
# prefix_lm_causal 8K / 16K (38.4 / 67.5), global_sliding_window 8K (49.5).
# 1. sm90pr's GPU tests (the d128 forward's entries, every mask). Prediction: they pass (the
#    same entries, another choice among them).
# 2. g: sm90 sm90pr sm90 sm90pr, d128 forward, full, causal, full_document, share_question,
#    prefix_lm_causal, global_sliding_window at 8K, 16K, 32K (9 of the 18 cells flip).
#    Prediction: on the flipped cells geomean +1 to +4% (prefix_lm_causal 16K +4 to +8%,
#    share_question 32K +2 to +4%, full 8K and causal 16K -1 to +2%); the other 9 level
#    (within 1%: the same launch). Promotion (shortRows 72 in sm90) if the flipped cells'
#    geomean gains and none loses over 1%.
# 3. p: where time is left (150 s), persist-rule.sh at 8K and 48K (call 104 ran 16K and 32K):
#    the rule's refit over the four lengths. Prediction: the crossing between 64 and 90 tiles
#    a row at 8K and 48K too.
# Bounded to 330 s (BUDGET); tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call105.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call105.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-330} longca cuda.test || exit 1
warm sm90 &
warm sm90pr &
warm sm90-persist &
warm sm90-plain &
wait
GPU_TESTS='TestForwardEntries128|TestMasks' gpu_tests sm90pr 60
interleave g 45 "sm90 sm90pr sm90 sm90pr" --masks full,causal,full_document,share_question,prefix_lm_causal,global_sliding_window --head-dim 128 --seqlens 8K,16K,32K --passes fwd -w 3 -n 10
row_variants g-0-sm90 g-1-sm90pr >"$out/t/g.variants" 2>&1
persist_step "8K 48K"
cat "$out/t/summary.txt"
table g "d128 forward TFLOP/s" sm90pr/sm90 sm90 sm90pr sm90 sm90pr
geo_line "$out/t/g.table" "sm90pr / sm90, d128, all 18 cells"
grep -E '^(full 8192|causal 8192|causal 16384|full_document 8192|full_document 32768|share_question 32768|prefix_lm_causal 8192|prefix_lm_causal 16384|global_sliding_window 8192) ' "$out/t/g.table" >"$out/t/g.flip"
geo_line "$out/t/g.flip" "sm90pr / sm90, d128, the 9 flipped cells"
echo "=== the rows' variants (sm90, then sm90pr)"
cut -c1-600 "$out/t/g.variants"
echo "=== p: the d128 persistence rule with the counter, 8K and 48K"
tail -30 "$out/t/p.table" 2>/dev/null
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
