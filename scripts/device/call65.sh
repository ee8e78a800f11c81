#!/bin/sh
# Call 65 (2026-12-05, fifteenth session): the least a short device window needs after calls
# 61-62's promotion: ncu's launch statistics of cuDNN's forwards (block size, registers a
# thread, shared memory, blocks an SM: its d64 kernel is named 64x256x64_4x1x1, call 62),
# which decide the design of the next d64-forward experiment, then sm90's GPU tests (the
# promoted default against the CPU reference) in what is left. About 20 s for ncu, 110 s
# for the tests (sm90 compiled meanwhile).
#   BUDGET=S sh scripts/device/call65.sh OUT    (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call65.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-150} longca cuda.test || exit 1
warm sm90 &
for c in "full 16K 64" "full 32K 128"; do
	set -- $c
	ncu_launch cudnn "$1" "$2" "$3"
done
ncu_launch sm90 full 16K 64
wait
_left=$((budget - ($(date +%s) - t0)))
[ "$_left" -gt 30 ] && gpu_tests sm90 "$_left"
cat "$out/t/summary.txt"
launch_table
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
