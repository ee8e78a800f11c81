#!/bin/sh
# Call 103 (prepared 2026-12-06, twenty-eighth session; not yet run): any card. Why the
# forward's work counter read 2-4% lower than the static walk on 8 ranks sharing one GPU
# (call 101b: ring-p2p 332.3 -> 318.6, loongtrain 410.1 -> 398.6, usp 406.1 -> 398.5 device
# TFLOP/s, causal_document_long forward), where one rank (0.88-0.90 -> 0.99) and the kernel
# alone (23 cells a head dim, +2.4 to +2.7%) gained. First suspect: the 4-byte memset before
# each launch, which on that GPU waits for an SM held by another rank's one-block-per-SM
# kernel. sm90cr zeroes the counter in the launch itself (its last block), with no memset.
# 1. sm90cr's forward GPU tests (its entries on a full grid and on 3 blocks, one launch after
#    another of other grids: a counter left dirty would skip items and fail them; every mask,
#    windows, odd lengths, fp16). Prediction: they pass.
# 2. c8: 8 ranks on one GPU, ring-p2p, loongtrain and usp (2x4), causal_document_long
#    forward, 8K tokens a rank, in the order sm90-static sm90 sm90cr sm90-static sm90 sm90cr.
#    Prediction, if the memset is the cause: sm90cr at sm90-static's rate or above (within
#    -1 to +3%), sm90 2-4% under both. If sm90cr reads as sm90, the cause is elsewhere (the
#    counter's atomics under eight kernels, or the item order), and the 8-rank rows keep
#    sm90-static's walk only where ranks share a GPU.
# 3. k: the kernel alone, d128 and d64 forward, causal_blockwise / causal_document /
#    share_question at 8K and 16K, sm90 sm90cr sm90 sm90cr. Prediction: within +-1%.
# Bounded to 420 s (BUDGET); tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call103.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call103.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-420} longca cuda.test || exit 1
warm sm90 &
warm sm90cr &
wait
warm sm90-static
GPU_TESTS='TestMasks|TestOddLengthsAndFP16|TestWindows|TestForwardEntries64|TestForwardEntries128|TestForwardOccupancy' gpu_tests sm90cr 120
i=0
for v in sm90-static sm90 sm90cr sm90-static sm90 sm90cr; do
	cp8 "c8-$i-$v" "$v"
	i=$((i + 1))
done
m=causal_blockwise,causal_document,share_question
interleave k 40 "sm90 sm90cr sm90 sm90cr" --masks $m --head-dim 128 --seqlens 8K,16K --passes fwd -w 3 -n 8
interleave l 40 "sm90 sm90cr sm90 sm90cr" --masks $m --head-dim 64 --seqlens 8K,16K --passes fwd -w 3 -n 8
cat "$out/t/summary.txt"
echo "=== 8 ranks on one GPU, causal_document_long forward: device TFLOP/s (method: run order as above)"
for m in ring-p2p loongtrain usp; do
	printf '%-10s' "$m"
	for f in "$out"/t/c8-*.report; do
		printf ' %s=%s' "$(basename "$f" .report | cut -d- -f3-)" "$(grep -E "^  $m " "$f" | awk '{print $11}')"
	done
	echo
done
table k "d128 forward TFLOP/s, settled" sm90cr/sm90 sm90 sm90cr sm90 sm90cr
geo_line "$out/t/k.table" "sm90cr / sm90, d128"
table l "d64 forward TFLOP/s, settled" sm90cr/sm90 sm90 sm90cr sm90 sm90cr
geo_line "$out/t/l.table" "sm90cr / sm90, d64"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
