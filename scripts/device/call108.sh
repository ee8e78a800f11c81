#!/bin/sh
# Call 108 (prepared 2026-12-06, thirtieth session, after sm90p60's promotion; ran on an H100,
# 187 s: 346 checks, 0 failed): any card but an
# H200 (by-card.sh gives an H200 run-final's first part). sm90 as promoted (the d128 forward's
# persistence rule at 60 tiles a row): its whole GPU test list (every test of gpu_test.go,
# every mask fwd and bwd against the CPU reference). Prediction: every check passes (the
# rule picks among entries every one of which the tests run).
# Bounded to 240 s (BUDGET); logs packed as OUT/t.tgz.
#   sh scripts/device/call108.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call108.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-240} longca cuda.test || exit 1
gpu_tests sm90 200
cat "$out/t/summary.txt"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
