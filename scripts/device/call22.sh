#!/bin/sh
# Call 22 (session of 2026-12-04 morning; docs/perf.md "Call 22"), with bin/longca.gz carried:
# 1. head dim 64 forward, sm90 beside sm90-persist and sm90-plain (the persistence rule was
#    fitted at head dim 128; cuDNN's d64 forward runs a persistent grid of 132 blocks): full
#    and causal 16K and 48K, causal_document and sliding_window_causal 16K, checked;
# 2. Nsight Compute on the head-dim-128 forward, full 16K: sm90 and cudnn, the same metrics
#    as call 21 (instructions, issue, pipes).
#   sh scripts/device/call22.sh OUT
set -u
out=${1:?usage: call22.sh OUT}
mkdir -p "$out/p"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
[ -f bin/longca.gz ] && gunzip -c bin/longca.gz >bin/longca && chmod +x bin/longca
t0=$(date +%s)
L=bin/longca
for v in sm90 sm90-persist sm90-plain; do
	timeout -s INT -k 10 40 $L kernel --kernels cuda --variant $v --head-dim 64 --masks full,causal --seqlens 16K,48K --heads 64:8 \
		--passes fwd -w 3 -n 10 --out "$out/p/$v" >"$out/p/t-$v.log" 2>&1
	timeout -s INT -k 10 30 $L kernel --kernels cuda --variant $v --head-dim 64 --masks causal_document,sliding_window_causal --seqlens 16K \
		--heads 64:8 --passes fwd -w 3 -n 10 --out "$out/p/$v" >>"$out/p/t-$v.log" 2>&1
	echo "# $v at $(($(date +%s) - t0)) s" >>"$out/p/summary.txt"
done
M=sm__inst_executed_pipe_alu.sum,sm__inst_executed_pipe_fma.sum,sm__inst_executed_pipe_xu.sum,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active
for k in sm90 cudnn; do
	sel="--kernels cuda --variant sm90" re='^fwd'
	[ $k = cudnn ] && sel="--kernels cudnn" re='sdpa|fmha|fort|attn|flash'
	timeout -k 10 100 ncu --clock-control none -k "regex:$re" -c 1 --metrics "$M" --section SpeedOfLight --section InstructionStats \
		$L kernel --no-check -w 0 -n 1 --head-dim 128 --masks full --seqlens 16K --heads 64:8 --passes fwd $sel --out "$out/p/n-$k" \
		>"$out/p/ncu128-$k.log" 2>&1
	echo "# ncu d128 $k exit $? at $(($(date +%s) - t0)) s" >>"$out/p/summary.txt"
done
cat "$out/p/summary.txt"
echo "=== head dim 64 forward TFLOP/s: kernel variant mask seqlen"
for v in sm90 sm90-persist sm90-plain; do
	grep -h '"message":"case"' "$out/p/t-$v.log" | awk -v v=$v '{ m = $0; sub(/.*"mask":"/, "", m); sub(/".*/, "", m); l = $0; sub(/.*"seqlen":/, "", l); sub(/,.*/, "", l); t = "-"; if (match($0, /"tflops":[0-9.]+/)) t = sprintf("%.1f", substr($0, RSTART+9, RLENGTH-9)); s = $0; sub(/.*"status":"/, "", s); sub(/".*/, "", s); print m, l, v, (s == "ok" ? t : s) }'
done | sort
for k in sm90 cudnn; do
	echo "=== ncu d128 $k"
	grep -E '^  [a-z_0-9]+.*\(|Duration|pipe_xu|pipe_fma|pipe_alu|inst_executed.sum|issue_active|Executed Ipc Active' "$out/p/ncu128-$k.log" | head -12
done
tar -C "$out" -czf "$out/p.tgz" p && rm -rf "$out/p"
