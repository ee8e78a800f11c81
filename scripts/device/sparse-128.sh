#!/bin/sh
# Issue 19's block-sparse criterion alone, for a call with little device time left: the cuda
# kernel and torch:flex on the 128-token uniform maps (kept 0.2 and 0.5, 32K and 64K, 64:8,
# d128, fwd and bwd, checked), then dense full at the same lengths (cuda, cudnn), the 80% of
# dense's reference. sparse-final.sh is the whole table (64-token and variable maps too).
#   sh scripts/device/sparse-128.sh OUT [LIMIT]     (carry bin/longca.gz)
set -u
out=${1:?usage: sparse-128.sh OUT [LIMIT]}
. scripts/device/lib.sh
call_start "${2:-180}" longca || exit 1
warm sm90
step uniform128 $((budget * 65 / 100)) sparse --kernels cuda,torch:flex --seqlens 32K,64K --block 128 --ratios 0.2,0.5 --passes fwd,bwd -w 2 -n 5
step dense $((budget * 30 / 100)) kernel --kernels cuda,cudnn --masks full --seqlens 32K,64K --passes fwd,bwd -w 2 -n 5
cat "$out/t/summary.txt"
for n in uniform128 dense; do
	echo "=== $n"
	grep -vE '^\{' "$out/t/$n.log" | grep -E '^ |^# (mask|Cases)' | head -24
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
