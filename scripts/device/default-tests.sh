#!/bin/sh
# The default's GPU tests, or those named (a regular expression's alternatives, as GPU_TESTS),
# each capped at CAP seconds, a summary and the failures printed, the log packed as
# OUT/t.tgz. Written 2026-12-06 (twenty-third session) for the tail's new cases after
# sm90tp's promotion:
#   sh scripts/device/default-tests.sh OUT 'TestCompile|TestTailWave' 300
#   (carry bin/longca.gz bin/cuda.test.gz; VARIANT=sm90nt for another variant)
set -u
out=${1:?usage: default-tests.sh OUT [TESTS] [CAP]}
. scripts/device/lib.sh
call_start ${3:-300} cuda.test || exit 1
[ -n "${2:-}" ] && GPU_TESTS=$2 && export GPU_TESTS
gpu_tests "${VARIANT:-sm90}" "${3:-300}"
cat "$out/t/summary.txt"
grep -E -- '--- (PASS|FAIL|SKIP)|tail launch|window' "$out/t/test-${VARIANT:-sm90}.log" | head -40
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
