#!/bin/sh
# Call 89 (twenty-fourth session, 2026-12-06): block_causal_document alone with every peer,
# the suite's settings (-w 3 -n 10, checked, the peers in the suite's order), fwd and bwd,
# 8K-48K: does the run-final reading at 48K fwd (cuda 525 TFLOP/s, 1.292x Flex, call 87)
# come back when the mask is timed outside the nine minutes of suite before it? (Call 88,
# alone: sm90 624 / 619 against Flex 410.)
#   sh scripts/device/call89.sh OUT [LIMIT]     (carry bin/longca.gz)
# Prediction: 48K fwd 600-630 (1.45-1.55x Flex): the suite's reading was the card's state late
# in a long run, not the kernel's.
set -u
out=${1:?usage: call89.sh OUT [LIMIT]}
. scripts/device/lib.sh
call_start "${2:-240}" longca || exit 1
step bcd "$budget" kernel --kernels cuda,cudnn,torch:flex,torch:varlen --masks block_causal_document --seqlens 8K,16K,32K,48K --passes fwd,bwd -w 3 -n 10
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,temperature.gpu,power.draw,clocks_throttle_reasons.active --format=csv >>"$out/t/summary.txt" 2>&1
cat "$out/t/summary.txt"
grep -vE '^\{' "$out/t/bcd.log" | grep -E '^ |^# (mask|Cases|Geomean)' | head -30
bin/longca report "$out/t/bcd" --against torch:flex --at 1.3 2>/dev/null | grep '^# cuda against'
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
