#!/bin/sh
# Call 76 (nineteenth session, after calls 74-75 on an H100): the promoted default against
# the one before it. sm90 now takes call 74's sm90rg (the forward's tiles started at the
# documents where that pays; a packed list's launch passes no bounds, so the define costs
# nothing there: call 74 read sm90rg 1.3% below sm90 on d64 lists it left packed) and call
# 75's sm90lz at head dim 128 only (+1.5 to +2% there, -0.6 to -2.1% at 64); sm90-c75 is sm90
# before them.
# 1. the new default's GPU tests, all of gpu_test.go (TestClimbingScores with them);
# 2. f: cudnn / sm90-c75 / sm90 twice, the d128 forward: full_document and causal_document
#    8K / 16K / 32K, full and causal 8K / 16K; prediction (sm90 against sm90-c75): the
#    ragged cells (both documents at 8K-16K) +5 to +9%, the rest +1 to +2%;
# 3. g: cudnn / sm90-c75 / sm90 twice, the d64 forward: full_document and causal_document
#    8K / 16K / 32K; prediction: the ragged cells (full_document 8K-32K, causal_document 8K)
#    +4 to +6%, the packed ones within 1%.
# Bounded to 330 s (BUDGET); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call76.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call76.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-330} longca cuda.test || exit 1
for v in sm90 sm90-c75; do warm $v & done
wait
gpu_tests sm90 150
runs="cudnn sm90-c75 sm90 cudnn sm90-c75 sm90"
interleave f 30 "$runs" --masks full_document,causal_document,full,causal --seqlens 8K,16K,32K --passes fwd -w 2 -n 5
interleave g 30 "$runs" --head-dim 64 --masks full_document,causal_document --seqlens 8K,16K,32K --passes fwd -w 2 -n 5
cat "$out/t/summary.txt"
echo "=== the forward's plan, row by row (persistent-fwd, wide-fwd, ragged-fwd)"
row_variants f-2-sm90 g-2-sm90
table f "d128 forward TFLOP/s" "sm90-c75/cudnn sm90/cudnn sm90/sm90-c75" $runs
table g "d64 forward TFLOP/s" "sm90-c75/cudnn sm90/cudnn sm90/sm90-c75" $runs
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
