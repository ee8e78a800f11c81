#!/bin/sh
# Call 60 (2026-12-05, eleventh session, the session's last device minutes): what the two
# cells furthest below cuDNN spend their cycles on, read before any design:
# 1. ncu's stall samples per SASS instruction of sm90's head-dim-64 forward (fwd90 entry),
#    full 16K (call 58: 0.91-0.95x cuDNN; ncu there: `wait` 1.86 stalls an issued
#    instruction against cuDNN's 0.79, 3.6% more instructions): the 30 instructions with the
#    most samples (sass_top);
# 2. the stall reasons of one full 32K head-dim-128 backward launch, sm90 and cuDNN (0.97-0.98x
#    in the day's run; call 39 at 16K, before stmatrix: mio_throttle 0.60 against 0.05).
# Bounded to BUDGET (default 160 s); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call60.sh OUT      (carry bin/longca.gz)
set -u
out=${1:?usage: call60.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-160} longca || exit 1
warm sm90
left=$((budget - ($(date +%s) - t0)))
timeout -k 5 $((left < 60 ? left : 60)) ncu --clock-control none -k 'regex:^fwd90' -c 1 \
	--section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
	bin/longca kernel --kernels cuda --no-check -w 0 -n 1 --masks full --seqlens 16K --heads 64:8 --head-dim 64 --passes fwd \
	--out "$out/t/ncu-src-run" >"$out/t/ncu-fwd64-sass.csv" 2>&1
echo "# ncu fwd d64 sass rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
for v in sm90 cudnn; do ncu_stall $v full 32K 30; done
cat "$out/t/summary.txt"
echo "=== the d64 forward, full 16K: the SASS instructions with the most stall samples"
sass_top "$out/t/ncu-fwd64-sass.csv"
echo "=== one full 32K d128 backward launch: time, instructions, stalls"
stall_table
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
