#!/bin/sh
# h100-round2.sh OUT [BUDGET]: what an H100 does with a session's first call in the
# twenty-second session (by-card.sh's other side; written 2026-12-06):
# 1. the default's whole GPU test list (sm90 with call 80's sm90qp promoted: its backward tests
#    ran, 74 checks, the whole list not yet), each test capped at 150 s (about 100 s in all);
# 2. call82.sh (sm90tp's tests and the tail split's d128 backward against sm90 and cuDNN) in
#    OUT/c82, with what is left of BUDGET (default 585 s) less 15 s.
# d64-final is left out: call 81 measured the d64 backward at 1.0x cuDNN or better on 12 of 12
# H100 cells, and the goal's cells are H200 rows.
#   sh scripts/device/by-card.sh OUT run-final.sh 585 -- h100-round2.sh 585
set -u
out=${1:?usage: h100-round2.sh OUT [BUDGET]}
. scripts/device/lib.sh
call_start "${2:-585}" longca cuda.test || exit 1
gpu_tests sm90 150
cat "$out/t/summary.txt"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
left=$((budget - ($(date +%s) - t0) - 15))
[ "$left" -gt 120 ] || { echo "# call82 skipped: ${left} s left"; exit 0; }
CALL_BUDGET=$left sh scripts/device/call82.sh "$out/c82"
