#!/bin/sh
# Call 87 (twenty-fourth session, 2026-12-06), the H100 side of by-card.sh: TestTailWave
# again (its causal pairs now run through a second kernel of the variant with the order fixed
# to key tiles together: call 86b's default-tests found the default's order rule takes
# heaviest first below 16K, which the tail keeps unsplit since 07f9189), then issue 19's
# block-sparse table (sparse-final.sh's three sweeps) with the rest of the budget.
#   sh scripts/device/by-card.sh OUT run-final.sh 585 -- call87.sh 560
#   (carry bin/longca.gz bin/cuda.test.gz)
# Predictions: TestTailWave 18 checks (bwd=false and true of each of its 9 cases), 0
# failed; sparse 128-token cuda >= torch:flex on 8 of 8 cells, dense share >= 0.8 on 6-8.
set -u
out=${1:?usage: call87.sh OUT [LIMIT]}
. scripts/device/lib.sh
call_start "${2:-560}" longca cuda.test || exit 1
GPU_TESTS=TestTailWave gpu_tests sm90 150
warm sm90
step uniform $((budget * 45 / 100)) sparse --kernels cuda,torch:flex --seqlens 32K,64K --block 128,64 --ratios 0.2,0.5 --passes fwd,bwd -w 2 -n 5
step variable $((budget * 12 / 100)) sparse --kernels cuda,torch:flex --seqlens 32K --avg-block 256 --ratios 0.2,0.5 --passes fwd,bwd -w 2 -n 5
step dense $((budget * 10 / 100)) kernel --kernels cuda,cudnn --masks full --seqlens 32K,64K --passes fwd,bwd -w 2 -n 5
cat "$out/t/summary.txt"
grep -E -- '--- (PASS|FAIL)|tail launch|key tiles together|FAIL' "$out/t/test-sm90.log" | cut -c1-200 | head -20
for n in uniform variable dense; do
	echo "=== $n"
	grep -vE '^\{' "$out/t/$n.log" | grep -E '^ |^# (mask|Cases|Geomean)|x fastest' | head -40
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
