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
#    imbalance), causal 16K -1 to -4%.
# 3. sm90dy (prepared with the study, compiled offline by NVRTC and ptxas 12.4 without a spill,
#    not yet run): its GPU tests first (TestForwardEntries64 with the counter's walk on a full
#    grid and on 3 blocks, TestMasks), then timed in q beside sm90 and sm90-persist, and on
#    full_document 32K (a list the counter takes too). Prediction against sm90: full and
#    causal 8K +1 to +2.5%, 16K +0.5 to +1.5%, full_document 32K within 1%. Promotion (into
#    sm90): the tests pass, the mean over the cells gains, no cell loses 1%.
# Bounded to 330 s (BUDGET); tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call98.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call98.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-330} longca cuda.test || exit 1
for v in sm90 sm90-persist sm90dy; do warm $v & done
wait
GPU_TESTS='TestForwardEntries64|TestMasks' gpu_tests sm90dy 120
for order in cuda,cudnn cudnn,cuda; do
	step "p-${order%%,*}1st" 60 kernel --kernels $order --masks full,causal --head-dim 64 --seqlens 32K,48K --passes fwd -w 1 -n 2 --settle 2s
done
runs="cudnn sm90 sm90-persist sm90dy cudnn sm90 sm90-persist sm90dy"
interleave q 30 "$runs" --masks full,causal --head-dim 64 --seqlens 8K,16K --passes fwd -w 3 -n 10
interleave r 20 "sm90 sm90dy sm90 sm90dy" --masks full_document --head-dim 64 --seqlens 32K --passes fwd -w 3 -n 10
cat "$out/t/summary.txt"
for order in cuda,cudnn cudnn,cuda; do
	echo "=== p: $order timed in that order, rested (--settle 2s, -n 2); TFLOP/s columns in that order"
	grep -E '^  (full|causal) ' "$out/t/p-${order%%,*}1st.log"
	goal_line "$out/t/p-${order%%,*}1st" fwd cudnn 1.0 full,causal
done
echo "=== the forward's plan, row by row (persistent-fwd, dyn-fwd)"
row_variants q-3-sm90dy
table q "d64 forward TFLOP/s, settled" "sm90-persist/sm90 sm90dy/sm90 sm90/cudnn" $runs
table r "d64 full_document 32K forward TFLOP/s" "sm90dy/sm90" sm90 sm90dy sm90 sm90dy
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
