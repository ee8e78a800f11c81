#!/bin/sh
# Call 88 (twenty-fourth session, 2026-12-06), the H100 side of by-card.sh: why the d128
# forward on block_causal_document drops at 48K (call 87's run-final on an H100: 659 / 637 /
# 525 TFLOP/s at 16K / 32K / 48K, 1.292x Flex at 48K, the one cell of 96 below 1.3x; the H200
# read 562-605 there). Every tile of its list is full (area = entries x 128 x 128), the
# forward is persistent at all three lengths and a model of its static item stride fills the
# SMs 0.98 / 0.98 / 0.99, so neither masking nor balance explains it.
# 1. sm90 (persistent) against sm90-plain (a block a query tile), twice each, interleaved,
#    and torch:flex once: block_causal_document 16K, 32K, 48K, fwd, 64:8, checked;
# 2. ncu of sm90's forward at 32K and 48K: DRAM bytes, L2 hit rate, time; and the speed of
#    light section (the SM clock: a 48K launch that runs at a lower clock reads as slower).
#   sh scripts/device/by-card.sh OUT sparse-final.sh 360 -- call88.sh 400
# Predictions: sm90-plain within 3% of sm90 at 16K and 32K; at 48K either sm90-plain is 10%+
# faster (then persistence, not the mask, is the cause) or both are equally slow and ncu shows
# 48K reading several times 32K's DRAM bytes per FLOP (then the items' order over L2 is).
set -u
out=${1:?usage: call88.sh OUT [LIMIT]}
. scripts/device/lib.sh
call_start "${2:-400}" longca || exit 1
warm sm90 sm90-plain
A="--masks block_causal_document --seqlens 16K,32K,48K --passes fwd -w 3 -n 10"
interleave b 60 "sm90 sm90-plain sm90 sm90-plain" $A
step flex 60 kernel --kernels torch:flex $A
NCU_PASS=fwd ncu_mem sm90 block_causal_document 32K 40
NCU_PASS=fwd ncu_mem sm90 block_causal_document 48K 40
NCU_PASS=fwd ncu_mem sm90-plain block_causal_document 48K 40
NCU_PASS=fwd ncu_sol sm90 block_causal_document 48K 40
cat "$out/t/summary.txt"
echo "=== block_causal_document fwd TFLOP/s: sm90 sm90-plain sm90 sm90-plain"
join_runs b sm90 sm90-plain sm90 sm90-plain
echo "=== torch:flex"
grep -E '^  block' "$out/t/flex.log" | head -3
echo "=== ncu"
for f in "$out"/t/ncu-mem-*.log; do
	echo "## $(basename "$f" .log)"
	grep -E 'dram__bytes|lts__t_sector_hit|gpu__time_duration' "$f" | sed 's/  */ /g' | head -4
done
sol_table
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
