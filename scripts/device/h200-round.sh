#!/bin/sh
# h200-round.sh OUT [LIMIT_SECONDS] (prepared 2026-12-07, thirty-fourth session, which got no
# H200): the two H200 questions issue 19 still has, in one call, so that one start answers
# both (starts are scarce: the thirty-third and thirty-fourth sessions spent 570 s and 1,400 s
# of device time on refused ones).
#   1. call121.sh (BUDGET 180 s): d128 full and causal 8K-16K, both passes, cuda and cuDNN in
#      each of eight processes: is full 8K's backward 0.951 (call 118) the kernel's gap on
#      the H200 or one reading? Prediction in its header.
#   2. d64-final.sh with the rest of LIMIT (default 590 s): the d64 table with every peer at
#      8K, 16K and 32K (48K left out for time: the whole table took 418 s on an H100, and the
#      H200's suite parts ran 1.2-1.4x the H100's wall), stopped by SIGINT at its limit with
#      the rows so far kept. Prediction (written before any run): d64 backward 15 of 15 at
#      1.0x cuDNN (the H100's 20 of 20, geomean 1.128, lowest 1.017), Flex 42 of 42 at 1.3x or
#      more (the H100's 56 of 56), d64 forward full 8K-32K 0.94-0.98 as call 119 read it.
# Carry bin/longca.gz. On an H100: run by-card.sh OUT h200-round.sh -- cp-final.sh.
set -u
out=${1:?usage: h200-round.sh OUT [LIMIT_SECONDS]}
limit=${2:-590}
. scripts/device/lib.sh
limit_seconds h200-round.sh "$limit" "h200-round.sh OUT [LIMIT_SECONDS]" || exit 2
r0=$(date +%s)
BUDGET=180 sh scripts/device/call121.sh "$out"
rc=$?
echo "# [$(($(date +%s) - r0)) s] call121.sh rc=$rc"
left=$((limit - ($(date +%s) - r0) - 20))
if [ "$left" -lt 120 ]; then
	echo "# h200-round: $left s left, too few for d64-final"
	exit 0
fi
sh scripts/device/d64-final.sh "$out" "$left" --seqlens 8K,16K,32K
rc=$?
echo "# [$(($(date +%s) - r0)) s] d64-final.sh rc=$rc"
