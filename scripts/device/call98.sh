#!/bin/sh
# Call 98 (prepared 2026-12-06, twenty-sixth session; not yet run): any card. Two probes of the
# d64 forward's gap to cuDNN on short full and causal rows (0.940 / 0.948 at 8K in both timing
# orders, call 95), from the design study in docs/perf.md ("The d64 forward's gap: a study"),
# before any new kernel code:
# 1. p: the power cap's share. full and causal 32K / 48K, cuda and cudnn, both orders, -w 1 -n 2
#    with --settle 2s, so that every row is timed short and rested (at 1,980 MHz on an H100)
#    rather than at the cap, where call 91's rows had cuda clocked 1.8-3.7% above cuDNN.
#    Prediction, if the cap hides a per-clock gap: cuda / cuDNN 0.95-0.97 on all four cells;
#    if the gap is fixed per-item cost only: 0.985-1.0.
# 2. q: the static persistent forward (sm90-persist) against sm90 (plain at these rows), d64
#    full and causal 8K / 16K, settled (the default), interleaved twice with cudnn. Prediction:
#    full 8K +1 to +2%, full 16K +0.5 to +1%, causal 8K -3 to -9% (the static walk's
#    imbalance), causal 16K -1 to -4%. Full 8K under +0.5% rules out the dynamic persistent
#    forward (the study's sm90dy) as worth writing.
# Bounded to 240 s (BUDGET); tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call98.sh OUT   (carry bin/longca.gz)
set -u
out=${1:?usage: call98.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-240} longca || exit 1
warm sm90 sm90-persist
for order in cuda,cudnn cudnn,cuda; do
	step "p-${order%%,*}1st" 60 kernel --kernels $order --masks full,causal --head-dim 64 --seqlens 32K,48K --passes fwd -w 1 -n 2 --settle 2s
done
runs="cudnn sm90 sm90-persist cudnn sm90 sm90-persist"
interleave q 30 "$runs" --masks full,causal --head-dim 64 --seqlens 8K,16K --passes fwd -w 3 -n 10
cat "$out/t/summary.txt"
for order in cuda,cudnn cudnn,cuda; do
	echo "=== p: $order timed in that order, rested (--settle 2s, -n 2); TFLOP/s columns in that order"
	grep -E '^  (full|causal) ' "$out/t/p-${order%%,*}1st.log"
	goal_line "$out/t/p-${order%%,*}1st" fwd cudnn 1.0 full,causal
done
table q "d64 forward TFLOP/s, settled" "sm90-persist/sm90 sm90/cudnn" $runs
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
