#!/bin/sh
# Call 97 (2026-12-06, twenty-sixth session): `longca cp --settle` on a GPU for the first time
# (CPU-tested since the twenty-fifth session): 8 ranks on one GPU, balanced and ulysses, full
# and causal_document_long, 8K tokens per rank, --kernel cuda, checked, --baseline measure,
# --overlap; once with --settle 0, once with 250ms. From the repository root with
# bin/cp-device.tgz carried (make cp-device):
#   sh scripts/device/call97.sh OUT
# Predictions: every row ok and checked in both runs; settle_ms 250 on every row of the
# second run (each rank's own, before each pass), null on the first; the settled run no more
# than 20 s longer (8 rows x 2 passes' worth of idles plus the baselines); cp_efficiency with
# the settle within 5% of without on each cell (the baseline and the method both start rested,
# so the ratio moves less than either rate); the kernel-alone baseline's clock line at or
# above the unsettled one's.
set -u
out=${1:?usage: call97.sh OUT}
mkdir -p "$out"
t0=$(date +%s)
for s in 0 250ms; do
	CP_KERNELS=cuda CP_METHODS=balanced,ulysses CP_MASKS=full,causal_document_long CP_SETTLE=$s CP_BUDGET=200 CP_CUDA_TIME=200 \
		sh spmd/cp/balanced_gpu.sh "$out/s$s" >"$out/s$s.txt" 2>&1
	rc=$?
	echo "# [$(($(date +%s) - t0)) s] settle $s: rc=$rc"
	grep -h '"message":"cp"' "$out/s$s/cuda.log" 2>/dev/null | grep -o '"settle_ms":[0-9.]*' | sort | uniq -c
	echo "# kernel baselines (mask pass TFLOP/s MHz settle_ms):"
	grep -h 'kernel baseline' "$out/s$s/cuda.log" 2>/dev/null | sed -E 's/.*"mask":"([^"]*)".*"pass":"([^"]*)".*"tflops":([0-9.]*).*"sm_clock_mhz":([0-9.]*)[^}]*/\1 \2 \3 \4 &/' | awk '{ s = "-"; if (match($0, /"settle_ms":[0-9.]+/)) s = substr($0, RSTART + 12, RLENGTH - 12); print "#  ", $1, $2, $3, $4, s }' 
done
for s in 0 250ms; do
	echo "=== settle $s"
	sed -n '/^# ---- steps/,/^# ---- balanced/p' "$out/s$s.txt" | head -5
	sed -n '/^# ---- cp_efficiency/,$p' "$out/s$s.txt"
done
tar -C "$out" -czf "$out/call97.tgz" s0 s250ms s0.txt s250ms.txt 2>/dev/null && rm -rf "$out/s0" "$out/s250ms"
