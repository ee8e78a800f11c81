#!/bin/sh
# Call 58 (prepared 2026-12-05, tenth session; not yet run): the head-dim-64 forward's short
# rows, the cells still below cuDNN at head dim 64 after call 55 (full 8K / 16K 0.95x, causal
# 8K / 16K 0.94x): cuDNN runs full at 561-571 TFLOP/s at 8K-16K and 515-522 at 32K-48K, sm90
# (call 55's sm90d64 forward) 531-548 at 8K-16K and 514-519 at 32K-48K. Which side of the persistence rule pays there, and what ncu says
# the two kernels do differently on one full 16K launch (clock, issue, stalls, tensor pipe).
# 1. the d64 forward, 64:8, checked, cudnn / sm90 / sm90-persist / sm90-plain / sm90 /
#    sm90-persist / sm90-plain on full, causal, full_document, causal_document at 8K and 16K;
# 2. ncu, one full 16K d64 forward launch each of sm90 and cudnn: time, instructions, stall
#    reasons (ncu_stall), and the SM clock, IPC and busiest pipeline (ncu_sol).
# Prediction (docs/perf.md "Next: call 58"): persistent blocks +1 to +3% on full and causal at
#    8K (2,752 blocks of 192 queries on 132 SMs, 20.8 waves: the last wave's 0.85 costs ~1%), level
#    at 16K; ncu: both at about the same SM clock (one launch does not reach the power cap),
#    sm90 with more instructions per FLOP and longer `wait` stalls (cuDNN's rate falls 9%
#    between 16K and 32K, the power cap; sm90's 3-5%: less held by power at 8K-16K).
# Bounded to 300 s; the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call58.sh OUT      (carry bin/longca.gz)
set -u
out=${1:?usage: call58.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-300} longca || exit 1
warm sm90 sm90-persist sm90-plain
runs="cudnn sm90 sm90-persist sm90-plain sm90 sm90-persist sm90-plain"
n=0
for v in $runs; do
	k="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && k="--kernels cudnn"
	step "f-$n-$v" 30 kernel $k --head-dim 64 --masks full,causal,full_document,causal_document --seqlens 8K,16K --passes fwd -w 2 -n 5
	n=$((n + 1))
done
for v in sm90 cudnn; do NCU_PASS=fwd NCU_DIM=64 ncu_stall $v full 16K; done
for v in sm90 cudnn; do NCU_PASS=fwd NCU_DIM=64 ncu_sol $v full 16K; done
cat "$out/t/summary.txt"
echo "=== d64 forward TFLOP/s: mask seqlen, then" $runs
join_runs f $runs >"$out/t/f.table"
cat "$out/t/f.table"
compare "$out/t/f.table" "sm90/cudnn sm90-persist/cudnn sm90-plain/cudnn sm90-persist/sm90 sm90-plain/sm90" $runs
echo "=== the rows' variants (persistent-fwd where sm90's rule is persistent)"
row_variants f-1-sm90
echo "=== one full 16K d64 forward launch under ncu: time, instructions, stalls"
stall_table
echo "=== the same launch: SM clock, IPC, issue and the busiest pipeline"
sol_table
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
