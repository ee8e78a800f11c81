#!/bin/sh
# The d64 forward's two halves (prepared 2026-12-08 in the forty-fifth session, which was lent
# no GPU; docs/perf.md "Prepared: the d64 forward's halves"). At head dim 64 a score costs the
# multi-function unit what it costs the tensor cores, and sm90 and cuDNN alike run each about
# half busy; a toy model of the ring (three warpgroups, a FIFO tensor pipe, one MUFU a
# sub-partition) reaches the units' bound, so what the real tile waits on is not in it. This
# call times the tile without each half: sm90probe-noexp (no MUFU.EX2; the exponent's FFMA
# kept) and sm90probe-nomma (no wgmma; turns, waits and TMA loads kept), both WRONG BY DESIGN
# and timed with --no-check, beside sm90 and cudnn (checked), d64 full and causal 8K-32K
# forward, in two orders; then ncu's pipe shares of one full 16K launch of each.
# Prediction (written before any run): sm90probe-noexp at 1.10-1.30x sm90's rate,
# sm90probe-nomma at 1.4-2.0x; so sm90's time is well above the larger half's (each half
# alone far from the other's), the overlap is what is lost, and a lever is a schedule
# (which warpgroup's exponentials run under which products). If instead noexp is within 5%
# of sm90, the products' side (shapes, shared-memory operands, turns) is the bound and the
# exponentials are hidden already; if nomma is within 5%, the softmax's instructions are.
# Bounded to 330 s (BUDGET); the table and the pipes last; logs packed as OUT/t.tgz.
#   sh scripts/device/d64-halves.sh OUT   (carry bin/longca.gz; any card)
set -u
out=${1:?usage: d64-halves.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-330} longca || exit 1
probes="sm90probe-noexp sm90probe-nomma"
# the NVRTC compiles outside the timed steps (a module a variant)
warm sm90 $probes
# two orders, each kernel a process of its own; the probes unchecked (they are wrong by
# design), sm90 and cudnn checked as always
k=0
for v in cudnn sm90 $probes sm90probe-nomma sm90probe-noexp sm90 cudnn; do
	case $v in
	cudnn) sel="--kernels cudnn" ;;
	sm90) sel="--kernels cuda --variant sm90" ;;
	*) sel="--kernels cuda --variant $v --no-check" ;;
	esac
	step "h-$k-$v" 60 kernel $sel --head-dim 64 --masks full,causal --seqlens 8K,16K,32K --passes fwd -w 3 -n 10
	k=$((k + 1))
done
# ncu: time, clock, the tensor pipe's, the multi-function unit's and shared memory's shares,
# issue slots, instructions (a metric this ncu does not know reads n/a)
PIPES='gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum'
for v in sm90 $probes cudnn; do
	NCU_PASS=fwd NCU_DIM=64 ncu_one pipes "$PIPES" "$v" full 16K 40
done
cat "$out/t/summary.txt"
table h "d64 forward, TFLOP/s (the probes' are a wrong kernel's: only their time means anything)" \
	"sm90/cudnn sm90probe-noexp/sm90 sm90probe-nomma/sm90" cudnn sm90 $probes sm90probe-nomma sm90probe-noexp sm90 cudnn
echo "=== ncu, one d64 full 16K forward launch each"
for f in "$out"/t/ncu-pipes-*.log; do
	[ -f "$f" ] || continue
	echo "## $(basename "$f" .log)"
	grep -E 'gpu__time_duration|sm__cycles_elapsed|gmma_cycles|pipe_xu|pipe_shared|issue_active|inst_executed.sum' "$f" | awk '{print "  " $1, $(NF-1), $NF}'
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
