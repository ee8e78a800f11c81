#!/bin/sh
# Call 73 (prepared 2026-12-05, eighteenth session; docs/perf.md "Next: call 73"): the H100
# round after call 72's promotion (an H200 runs run-final.sh instead: by-card.sh).
# 1. every GPU test of the default (sm90 since call 72: the forward's next entry read a turn
#    ahead; the pairs-by-bytes tail 1.25 and its bytes weighed against the unpaired plan);
# 2. a / d: cudnn / sm90 / sm90-plain / sm90-persist twice, the forward on issue 19's
#    document masks and the causal window at d128 (8K-32K) and the documents at d64: the d128
#    forward of causal_document 16K reads 0.945x cuDNN (call 72), full_document 8K / 16K
#    0.98 / 0.99x, and sm90 runs them persistent over 128 x 128 tiles (full_document 8K wide);
#    sm90-plain runs them one item a block (then over 128 x 176 tiles where those visit at
#    most 3% more keys), sm90-persist always persistent. Prediction: within 3% of sm90 on
#    every cell; a side that gains 3% or more on a cell moves the persistence rule there.
# Bounded to 300 s (BUDGET); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/by-card.sh OUT run-final.sh 585 -- call73.sh   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call73.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-300} longca cuda.test || exit 1
for v in sm90 sm90-plain sm90-persist; do warm $v & done
wait
gpu_tests sm90 150
runs="cudnn sm90 sm90-plain sm90-persist cudnn sm90 sm90-plain sm90-persist"
interleave a 30 "$runs" --masks full_document,causal_document,sliding_window_causal --seqlens 8K,16K,32K --passes fwd -w 2 -n 5
interleave d 30 "$runs" --head-dim 64 --masks full_document,causal_document --seqlens 8K,16K,32K --passes fwd -w 2 -n 5
cat "$out/t/summary.txt"
echo "=== the forward's plan, row by row (persistent-fwd, wide-fwd)"
row_variants a-1-sm90 a-2-sm90-plain a-3-sm90-persist d-1-sm90 d-2-sm90-plain d-3-sm90-persist
table a "d128 forward TFLOP/s" "sm90/cudnn sm90-plain/sm90 sm90-persist/sm90" $runs
table d "d64 forward TFLOP/s" "sm90/cudnn sm90-plain/sm90 sm90-persist/sm90" $runs
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
