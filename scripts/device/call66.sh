#!/bin/sh
# Run 2026-12-05, sixteenth session (rows in docs/results/h100-calls64-66-20261205b.txt);
# sm90c, sm90c2, sm90k-persist and sm90d3 removed since: it no longer runs as written (to
# rerun it, check out 2bbcb47, the last commit with them).
# Call 66 (prepared 2026-12-05, fifteenth session; not yet run): the head-dim-64 forward's
# shapes against cuDNN's, and cuDNN's ring at head dim 128 (docs/perf.md "Next: call 66").
# cuDNN's d64 forward (call 65) is one persistent block an SM of a producer and two consumer
# warpgroups over 128 x 256 tiles with a three-stage K/V ring; sm90's is three consumers over
# 192 x 128 tiles. At head dim 128 cuDNN has one Q tile and three stages; sm90 two and two.
#   sm90k          cuDNN's d64 shape: two consumers taking turns over 128 x 256 tiles, S in
#                  two 128-key halves so that S, P and O fit 240 registers, three stages of
#                  256 keys, 230,528 bytes (k256-fwd)
#   sm90k-seq      sm90k with the turn in sequence: P V waited for, then Q K^T whole
#   sm90k-persist  sm90k always persistent (one module with sm90k)
#   sm90c2         one consumer over 64 x 256 tiles in sequence, two blocks an SM (c2-fwd)
#   sm90c          one consumer over 64 x 128 tiles with the overlap, two blocks an SM (c1-fwd)
#   sm90d3         at head dim 128 sm90's fwd90o with one Q tile and three stages, persistent
#                  on every row, the wide forward off (d3-fwd)
# 1. the forward's GPU tests of each (TestForwardEntries64/128: every mask, odd lengths,
#    fp16, CP windows and block-sparse maps through the persistent entry, on a full grid and
#    on 3 blocks that walk several items, and the plain one, against the CPU reference;
#    TestForwardOccupancy, TestMasks), every module compiled first, in parallel;
# 2. cudnn / sm90 / the d64 ones twice, d64 forward, full, causal, full_document,
#    causal_document at 8K-48K, 64:8, every row checked; which rows ran the new forwards;
# 3. cudnn / sm90 / sm90d3 twice, d128 forward, the same masks and lengths.
# Bounded to 560 s (BUDGET); the tables last; logs packed as OUT/t.tgz. VARIANTS, TESTED
# narrow the d64 experiments and the tested ones.
#   sh scripts/device/call66.sh OUT      (carry bin/longca.gz bin/cuda.test.gz; the call's timeout 600)
set -u
out=${1:?usage: call66.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-560} longca cuda.test || exit 1
vs=${VARIANTS:-sm90k sm90k-seq sm90k-persist sm90c2 sm90c}
for v in sm90 sm90d3 $vs; do [ "$v" = sm90k-persist ] || warm $v & done
wait
# the forward's tests only (their backward is sm90's): every mask, odd lengths, fp16, CP
# windows and block-sparse maps through the persistent entry on a full grid and on 3 blocks
# (several items a block) and the plain one, the launch registers and blocks an SM, the masks
export GPU_TESTS='TestCompile|TestForwardEntries64|TestForwardEntries128|TestForwardOccupancy|TestMasks'
for v in ${TESTED:-sm90k sm90k-seq sm90d3 sm90c2 sm90c}; do gpu_tests $v 100; done
unset GPU_TESTS
runs="cudnn sm90 $vs cudnn sm90 $vs"
interleave p 35 "$runs" --head-dim 64 --masks full,causal,full_document,causal_document --seqlens 8K,16K,32K,48K --passes fwd -w 2 -n 5
runs3="cudnn sm90 sm90d3 cudnn sm90 sm90d3"
interleave q 45 "$runs3" --masks full,causal,full_document,causal_document --seqlens 8K,16K,32K,48K --passes fwd -w 2 -n 5
cat "$out/t/summary.txt"
_k=2
for v in $vs; do
	echo "=== which $v rows ran its forward"
	row_variants p-$_k-$v
	_k=$((_k + 1))
done
pairs="sm90/cudnn"
for v in $vs; do pairs="$pairs $v/cudnn"; done
for v in $vs; do pairs="$pairs $v/sm90"; done
table p "d64 forward TFLOP/s" "$pairs" $runs
echo "=== which sm90d3 rows ran its forward"
row_variants q-2-sm90d3
table q "d128 forward TFLOP/s" "sm90/cudnn sm90d3/cudnn sm90d3/sm90" $runs3
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
