#!/bin/sh
# RAN 2026-12-05 on an H100 at ada1f67 (docs/perf.md "Calls 61-63 on an H100"); its experiments
# were promoted into sm90 or removed since (32497d1, 4fdd6ad): to rerun it, check out ada1f67.
# Call 61 (prepared 2026-12-05, eleventh session; not yet run): experiments sm90fr and
# sm90f3, the forward's entries read a turn ahead and the head-dim-64 forward's K/V ring
# three stages deep, designed from call 60's SASS stall samples of the d64 forward (full
# 16K: 1.9% of the samples on the work-list load's first use, 3.8% on the consumers' waits
# for K and V); and sm90bl, the d128 backward's lse / Dsum read as 8-byte pairs (call 60:
# mio_throttle 0.71 against cuDNN's 0.05). Offline (ptxas 12.4): sm90's 68 functions
# byte-identical to before; sm90fr's fwd90mo reads entry e + 2 before the turn's mbarrier
# waits (2,024 instructions against 2,032, no spill where sm90's spills 16 bytes outside the
# loop); sm90bl's bwd90e 2,720 instructions against 2,856 (64 LDS.64 for 128 scalar LDS),
# a 4-byte spill (a reload a step), its pairs' entries and head dim 64 sm90's own.
# 1. sm90f3's GPU tests (every mask, d64 and d128, fwd and bwd: both forward changes), the
#    other modules compiled meanwhile (in parallel: about 40 s each on a fresh machine);
#    sm90fr alone and sm90bl are checked by their timed rows only (every row against the
#    float64 reference), their GPU tests left to a promotion's check;
# 2. the d64 forward, 64:8, checked: cudnn / sm90 / sm90fr / sm90f3, twice, on full, causal,
#    full_document, causal_document at 8K / 16K / 32K / 48K;
# 3. the d128 forward: cudnn / sm90 / sm90fr, twice, full and causal 8K-48K (sm90f3's d128
#    forward is sm90fr's);
# 4. the d128 backward: cudnn / sm90 / sm90bl, twice, on full, full_document,
#    sliding_window_causal, causal_blockwise (unpaired) and causal (paired: sm90's code, the
#    control) at 16K / 32K / 48K;
# 5. (added later the same session) experiment sm90mo, the backward's block order weighing L2
#    (the key tiles of a KV head together where heaviest first thrashes it): cudnn / sm90 /
#    sm90mo, twice, MHA 64:64, d128 backward, causal, causal_document, share_question,
#    prefix_lm_causal at 8K / 16K (sm90mo is sm90's module: no compile of its own).
# Prediction (docs/perf.md "Next: call 61"): sm90fr +0.5 to +2% on the d64 forward (full,
# causal), +0 to +1% at d128; sm90f3 a further +0.5 to +2% at d64 where the rows are short
# (8K-16K), level at 32K-48K; sm90bl +0.5 to +2% on the unpaired d128 backward cells (full
# 32K-48K at 0.97-0.98x cuDNN), causal level; sm90mo +5 to +12% where its plan differs (64:64
# causal 8K, causal_document 8K, share_question 8K / 16K, prefix_lm_causal 8K: the L2 model
# 5-20 GB read against 0.8-2.2), level where it does not (causal and causal_document 16K).
# Bounded to 580 s; the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call61.sh OUT      (carry bin/longca.gz bin/cuda.test.gz; the call's timeout 600)
set -u
out=${1:?usage: call61.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-580} longca cuda.test || exit 1
for v in sm90 sm90fr sm90bl; do warm $v & done
gpu_tests sm90f3 200
wait
runs="cudnn sm90 sm90fr sm90f3 cudnn sm90 sm90fr sm90f3"
interleave f 20 "$runs" --head-dim 64 --masks full,causal,full_document,causal_document --seqlens 8K,16K,32K,48K --passes fwd -w 2 -n 5
runs2="cudnn sm90 sm90fr cudnn sm90 sm90fr"
interleave g 15 "$runs2" --masks full,causal --seqlens 8K,16K,32K,48K --passes fwd -w 2 -n 5
runs3="cudnn sm90 sm90bl cudnn sm90 sm90bl"
interleave b 30 "$runs3" --masks full,full_document,sliding_window_causal,causal_blockwise,causal --seqlens 16K,32K,48K --passes bwd -w 2 -n 5
runs4="cudnn sm90 sm90mo cudnn sm90 sm90mo"
HEADS=64:64
interleave m 15 "$runs4" --masks causal,causal_document,share_question,prefix_lm_causal --seqlens 8K,16K --passes bwd -w 2 -n 5
HEADS=
cat "$out/t/summary.txt"
table f "d64 forward TFLOP/s" "sm90/cudnn sm90fr/cudnn sm90f3/cudnn sm90fr/sm90 sm90f3/sm90 sm90f3/sm90fr" $runs
table g "d128 forward TFLOP/s" "sm90/cudnn sm90fr/cudnn sm90fr/sm90" $runs2
table b "d128 backward TFLOP/s" "sm90/cudnn sm90bl/cudnn sm90bl/sm90" $runs3
table m "d128 backward at 64:64 TFLOP/s" "sm90/cudnn sm90mo/cudnn sm90mo/sm90" $runs4
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
