#!/bin/sh
# Call 117 (prepared 2026-12-06, thirty-second session, after calls 113-116): any card but an
# H200 (by-card.sh gives an H200 the suite's first part). The d64 forward's misses in call
# 114's d64 table (full 8K 0.967, full 16K 0.903, full 32K 0.999, causal 8K 0.997x cuDNN, one
# reading each): the card's two rates, or the kernel's gap? Calls 111-113 found that at d128
# both kernels read two rates set per process (full and causal 8K and 16K), so one reading can
# fall either way; the cell's ratio is the median over processes of same-process pairs.
# Eight processes of `longca kernel --kernels cuda,cudnn` (four with cudnn first), d64
# forward, full and causal at 8K, 16K and 32K, checked, settled; pair_cells' table last.
# Prediction (written before the run): the full mask's gap is the kernel's, not only the
# card's: full 8K median 0.97-0.99, 16K 0.97-1.00, 32K 0.98-1.00, cuda ahead in at most half
# of full's pairs; causal 8K-32K medians 0.99-1.03 (call 98e: 0.97-1.02 over two orders).
# If full's medians reach 1.0, the d64 forward's goal is met on the H100 by this reading and
# its misses are the card's.
# Bounded to 200 s (BUDGET); the table last; logs packed as OUT/t.tgz.
#   sh scripts/device/call117.sh OUT   (carry bin/longca.gz)
# Ran (thirty-third session) as call 119 on an H200, BUDGET=300, 53 s: call 117's by-card gave
# that H200 run-final's part 1, and this script its spare minutes. Outcome in docs/perf.md
# "Calls 117-120": full 0.967 / 0.943 / 0.981, cuda behind in 24 of 24 pairs; causal in range.
set -u
out=${1:?usage: call117.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-200} longca || exit 1
# the NVRTC compile outside the timed steps (call 113, without this, lost two steps to it)
warm sm90
F="--masks full,causal --seqlens 8K,16K,32K --head-dim 64 --passes fwd -w 5 -n 10"
steps=
for i in 0 1 2 3 4 5 6 7; do
	k=cuda,cudnn
	[ $((i % 2)) = 1 ] && k=cudnn,cuda
	step "p-$i" 40 kernel --kernels "$k" $F
	steps="$steps p-$i"
done
cat "$out/t/summary.txt"
echo "=== d64 forward, cuda (sm90, the default) over cudnn, same-process pairs (even steps cuda first, odd cudnn first)"
pair_cells $steps
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
