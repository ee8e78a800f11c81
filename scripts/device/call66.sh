#!/bin/sh
# Call 66 (prepared 2026-12-05, fifteenth session; not yet run): the head-dim-64 forward's
# shapes against cuDNN's (docs/perf.md "Next: call 66"). cuDNN's d64 forward (call 65) is one
# persistent block an SM of a producer and two consumer warpgroups over 128 x 256 tiles with
# a three-stage K/V ring; sm90's is three consumers over 192 x 128 tiles.
#   sm90c   one consumer warpgroup a block over 64 x 128 tiles, the overlap within it, two
#           blocks an SM, no turns (c1-fwd)
#   sm90c2  one consumer over 64 x 256 tiles, Q K^T / softmax / P V in sequence, two blocks
#           an SM (c2-fwd)
#   sm90k   cuDNN's shape: two consumers taking turns over 128 x 256 tiles, three stages
#           (k256-fwd), if built (VARIANTS leaves it out otherwise)
# 1. the GPU tests of each (every mask through the persistent and the plain entry at d64,
#    TestForwardEntries64; fwd and bwd against the CPU reference), all compiled meanwhile;
# 2. cudnn / sm90 / each twice, d64 forward, full, causal, full_document, causal_document at
#    8K-48K, 64:8, every row checked; which rows ran the new forwards.
# Bounded to 540 s (BUDGET); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call66.sh OUT      (carry bin/longca.gz bin/cuda.test.gz; the call's timeout 600)
set -u
out=${1:?usage: call66.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-540} longca cuda.test || exit 1
vs=${VARIANTS:-sm90c sm90c2 sm90k}
for v in sm90 $vs; do warm $v & done
wait
for v in $vs; do gpu_tests $v 120; done
runs="cudnn sm90 $vs cudnn sm90 $vs"
interleave p 35 "$runs" --head-dim 64 --masks full,causal,full_document,causal_document --seqlens 8K,16K,32K,48K --passes fwd -w 2 -n 5
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
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
