#!/bin/sh
# Call 121 (prepared 2026-12-06, thirty-third session, after calls 117-120 on an H200): the two
# d128 misses of the H200's suite (call 118), one reading each: full 8K's backward 0.951
# (535.4 against 563.1; the H100s read 1.00-1.03 there) and causal 16K's forward 0.9997 (a cell
# both kernels read two rates at on the H100, calls 111-112). The card's rates, or the kernel's
# gap? Eight processes of `longca kernel --kernels cuda,cudnn` (four with cudnn first), d128,
# full and causal at 8K and 16K, both passes, checked, settled; pair_cells' table last. Any
# card; meant for an H200 (on an H100 it is the control).
# Prediction (written before the run, for an H200): full 8K backward median 0.95-0.98 with cuda
# ahead in at most 2 of 8 pairs (the kernel's gap on this card: cuDNN's backward gains more from
# the H200 at 8K than ours), full 16K backward 1.00-1.03; causal 16K forward median 1.00-1.04
# with cuda ahead in 5 or more of 8; the other cells 1.0 or above. If full 8K's median reaches
# 1.0, the H200's d128 backward is 20 of 20 by this reading and call 118's miss was the card's.
# Bounded to 200 s (BUDGET); the pairs' table, then the same read by `longca report --against cudnn
# --pairs` (its first GPU use: the two must agree); logs packed as OUT/t.tgz.
#   sh scripts/device/call121.sh OUT   (carry bin/longca.gz)
set -u
out=${1:?usage: call121.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-200} longca || exit 1
# the NVRTC compile outside the timed steps
warm sm90
pair_steps 60 --masks full,causal --seqlens 8K,16K --head-dim 128 --passes fwd,bwd -w 3 -n 10
cat "$out/t/summary.txt"
echo "=== d128, cuda (sm90, the default) over cudnn, same-process pairs (even steps cuda first, odd cudnn first)"
pair_cells $steps
# the same pairs read by longca itself (report --against --pairs over the steps' rank files)
mkdir -p "$out/t/all" && for s in $steps; do cp "$out/t/$s"/*.rank-*.arrow "$out/t/all/" 2>/dev/null; done
for p in fwd bwd; do
	echo "=== longca report --against cudnn --pairs --pass $p"
	bin/longca report "$out/t/all" --against cudnn --pairs --pass $p 2>&1 | sed -n '/^# against cudnn/,$p' | grep -v '^#$'
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
