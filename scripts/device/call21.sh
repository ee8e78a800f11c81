#!/bin/sh
# Call 21 (session of 2026-12-04 morning; docs/perf.md "Call 21"), from the repository root
# with bin/longca.gz carried: what bounds the head-dim-64 forward (call 20: a polynomial
# exponential on 1 pair in 8 cost 15%, so not the multi-function unit alone). Nsight Compute
# on full 16K, head dim 64, 64:8: sm90 and sm90x4 forward, sm90 backward, and cudnn's
# forward kernel: pipe use (tensor, FMA, ALU, XU = MUFU), issue-slot use, instructions
# executed by kind, stall reasons. The table last; the reports packed under OUT.
#   sh scripts/device/call21.sh OUT
set -u
out=${1:?usage: call21.sh OUT}
mkdir -p "$out/n"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
[ -f bin/longca.gz ] && gunzip -c bin/longca.gz >bin/longca && chmod +x bin/longca
t0=$(date +%s)
M=sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.sum,sm__inst_executed_pipe_alu.sum,sm__inst_executed_pipe_xu.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_fmaheavy_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fmalite_cycles_active.avg.pct_of_peak_sustained_active
prof() { # name kernel-regex longca-args...
	name=$1 re=$2
	shift 2
	for m in "$M" sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active; do
		rm -rf "$out/n/run-$name"
		timeout -k 10 120 ncu --clock-control none -k "regex:$re" -c 1 --metrics "$m" \
			--section SpeedOfLight --section WarpStateStats --section InstructionStats --section ComputeWorkloadAnalysis \
			bin/longca kernel --no-check -w 0 -n 1 --head-dim 64 --masks full --seqlens 16K --heads 64:8 --out "$out/n/run-$name" "$@" \
			>"$out/n/ncu-$name.log" 2>&1
		rc=$?
		echo "# $name exit $rc at $(($(date +%s) - t0)) s (metrics: ${#m} chars)" >>"$out/n/summary.txt"
		grep -qiE 'failed to find metric|invalid metric|unknown metric' "$out/n/ncu-$name.log" || break
	done
}
prof fwd-sm90 '^fwd' --kernels cuda --variant sm90 --passes fwd
prof fwd-sm90x4 '^fwd' --kernels cuda --variant sm90x4 --passes fwd
prof bwd-sm90 '^bwd90f' --kernels cuda --variant sm90 --passes bwd
prof fwd-cudnn 'sdpa|fmha|fort|attn|flash' --kernels cudnn --passes fwd
cat "$out/n/summary.txt"
for f in "$out"/n/ncu-*.log; do
	echo "=== $(basename "$f" .log)"
	grep -E '^  [a-z_0-9]+.*\(|Duration|gmma_cycles|pipe_xu|pipe_fma|pipe_alu|inst_executed.sum|issue_active|Issue Slots Busy|Executed Ipc Active|Registers Per|Stall [A-Z]|Warp Cycles Per Issued' "$f" | head -40
done
tar -C "$out" -czf "$out/n.tgz" n && rm -rf "$out/n"
