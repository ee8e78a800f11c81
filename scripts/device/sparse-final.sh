#!/bin/sh
# Issue 19's block-sparse table with the final default (prepared 2026-12-05, eleventh
# session; not yet run; the last one, call 36, predates the calls 44-59 defaults): the cuda
# kernel and torch:flex on the same block maps, 64:8, head dim 128, fwd and bwd, checked,
# and the dense full mask at the same lengths (the target: at Flex's rate or above on
# 128-token blocks, and 80% of the dense rate per kept area).
# 1. longca sparse --block 128,64 --ratios 0.2,0.5 at 32K and 64K;
# 2. variable blocks (--avg-block 256) at 32K;
# 3. longca kernel --masks full at 32K and 64K (cuda, cudnn).
# Each sweep stopped with SIGINT at its bound (rows kept); bounded to LIMIT (default 360 s);
# the reports last; rows and logs packed as OUT/t.tgz.
#   sh scripts/device/sparse-final.sh OUT [LIMIT]      (carry bin/longca.gz)
set -u
out=${1:?usage: sparse-final.sh OUT [LIMIT]}
. scripts/device/lib.sh
call_start "${2:-360}" longca || exit 1
warm sm90
# each sweep a share of the budget (step's cap; the rows kept when it is stopped)
step uniform $((budget * 60 / 100)) sparse --kernels cuda,torch:flex --seqlens 32K,64K --block 128,64 --ratios 0.2,0.5 --passes fwd,bwd -w 2 -n 5
step variable $((budget * 20 / 100)) sparse --kernels cuda,torch:flex --seqlens 32K --avg-block 256 --ratios 0.2,0.5 --passes fwd,bwd -w 2 -n 5
step dense $((budget * 12 / 100)) kernel --kernels cuda,cudnn --masks full --seqlens 32K,64K --passes fwd,bwd -w 2 -n 5
cat "$out/t/summary.txt"
for n in uniform variable dense; do
	echo "=== $n"
	grep -vE '^\{' "$out/t/$n.log" | grep -E '^ |^# (mask|Cases|Geomean)|x fastest' | head -60
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
