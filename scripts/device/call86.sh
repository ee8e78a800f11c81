#!/bin/sh
# Call 86 (prepared 2026-12-06, twenty-third session; docs/perf.md "Call 85"): any card (ratios
# in the call). Call 85 spent its 330 s on sm90tp's GPU tests (82 checks, 0 failed; one
# assertion of the test itself wrong: full at a partial last key tile takes no tail by
# full's rule, the test said it must) and timed only cuDNN. This call times first and tests
# after:
# 1. g: cudnn / sm90 / sm90tp, three times each, interleaved, the d128 backward on full and
#    causal at 16K-48K (every timed row checked against the CPU reference first, as always).
#    Prediction against sm90 (call 85's, unchanged): full 16K -1 to +1%, 32K / 48K +0.5 to
#    +2%; causal 16K level (no tail), 32K +0.3 to +1.5%, 48K +1 to +2.5%. Promotion: the mean
#    over the cells gains, no cell loses 1%, the tests pass.
# 2. TestTailWave alone, as corrected (full's partial length without a tail; causal's pairs
#    at a partial last key tile, 2,112 at 64:16, with the tail), capped at what is left.
# Bounded to 420 s (BUDGET); the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call86.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call86.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-420} longca cuda.test || exit 1
for v in sm90 sm90tp; do warm $v & done
wait
runs="cudnn sm90 sm90tp cudnn sm90 sm90tp cudnn sm90 sm90tp"
interleave g 40 "$runs" --masks full,causal --seqlens 16K,32K,48K --passes bwd -w 2 -n 5
left=$((budget - ($(date +%s) - t0)))
if [ "$left" -gt 60 ]; then
	GPU_TESTS='TestTailWave' gpu_tests sm90tp "$left"
else
	echo "# TestTailWave skipped (time: $left s left)" >>"$out/t/summary.txt"
fi
cat "$out/t/summary.txt"
grep -E 'tail launch|partial|--- (PASS|FAIL)' "$out/t/test-sm90tp.log" 2>/dev/null | head -12
echo "=== the backward's plan, row by row (tail-N)"
row_variants g-2-sm90tp
table g "d128 backward TFLOP/s" "sm90tp/sm90 sm90/cudnn sm90tp/cudnn" $runs
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
