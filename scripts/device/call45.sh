#!/bin/sh
# Call 45 (2026-12-04, fifth session): the new default's GPU tests on the split and the
# masks (TestMasks, TestHeadMasks, TestLongRows: d64's split path against the float64
# reference), then `longca run --suite gpu` whole (run-final.sh) in what is left of 585 s.
#   sh scripts/device/call45.sh OUT
set -u
out=${1:?usage: call45.sh OUT}
t0=$(date +%s)
mkdir -p "$out/t"
STEP_TIMEOUT=50 sh kernels/cuda/gpu.sh "$out/t" test sm90 'TestMasks|TestHeadMasks|TestLongRows' >/dev/null 2>&1
cat "$out/t/summary.txt"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
sh scripts/device/run-final.sh "$out" $((585 - ($(date +%s) - t0)))
