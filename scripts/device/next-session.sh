#!/bin/sh
# Prepared 2026-12-04 for the next session's first call: `longca run --suite gpu` with the
# default of call 31 and the reference cache (harness.NewKernelCheck), all 96 cases in the
# call's bound (call 32 reached 88 in 530 s without the cache), from the repository root
# with bin/longca.gz carried (make device):
#   sh scripts/device/next-session.sh OUT
# Then, in later calls: scripts/device/next-d64bwd.sh (bin/cuda.test.gz too; about 500 s) and
# scripts/device/cp-final.sh (make cp-device; the CP rows of issue 19's must-show).
set -u
out=${1:?usage: next-session.sh OUT}
exec sh scripts/device/run-final.sh "$out" 545
