#!/bin/sh
# h100-round.sh OUT [D64_LIMIT]: what an H100 does with a session's first call (by-card.sh's
# other side; written 2026-12-06 in the twenty-first session):
# 1. the default's whole GPU test list (sm90 with call 80's sm90qp promoted: its backward tests
#    ran, 74 checks, the whole list not yet), each test capped at 150 s;
# 2. d64-final.sh with every mask and peer at head dim 64 (both late publishes), stopped at
#    D64_LIMIT seconds (default 400; about 310 s on an H100 in the nineteenth session).
# The tests' summary first, then d64-final's table and criteria; the test logs as OUT/t.tgz.
#   sh scripts/device/by-card.sh OUT run-final.sh 585 -- h100-round.sh 400
set -u
out=${1:?usage: h100-round.sh OUT [D64_LIMIT]}
. scripts/device/lib.sh
call_start 600 longca cuda.test || exit 1
gpu_tests sm90 150
cat "$out/t/summary.txt"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
sh scripts/device/d64-final.sh "$out/d64" "${2:-400}"
