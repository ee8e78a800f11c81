#!/bin/sh
# One or two backward experiments in one call, against sm90 and cuDNN, from the repository
# root with bin/longca.gz and bin/cuda.test.gz carried (make device):
#   sh scripts/device/next-bwd-pair.sh OUT A [B]
# (call 44 ran it as `... OUT sm90bg sm90bw`; the next session's: `... OUT sm90br`)
# 1. the variants' GPU tests (every mask, d64 and d128, fwd and bwd, the deterministic repeat);
# 2. the backward at d128 on the five masks cuDNN runs whole and at d64 on four, 8K-48K:
#    A [B] / sm90 / cudnn / A [B] (the clock's drift), 64:8, checked;
# 3. with the time left, ncu on A's d128 backward, causal 16K: time, instructions, stall
#    reasons (call 43's sm90: 18.60 ms under ncu, cuDNN's 18.06).
# Bounded to 540 s with two variants, 480 with one; the tables last; logs packed as OUT/t.tgz.
set -u
out=${1:?usage: next-bwd-pair.sh OUT A [B]}
a=${2:?usage: next-bwd-pair.sh OUT A [B]} b=${3:-}
. scripts/device/lib.sh
call_start $([ -n "$b" ] && echo 540 || echo 480) longca cuda.test || exit 1
for v in $a $b; do gpu_tests $v 110; done
runs="$a $b sm90 cudnn $a $b"
n=0
for v in $runs; do
	sel="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	step "d128-$n-$v" 75 kernel $sel --masks full,causal,full_document,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K --passes bwd -w 3 -n 10
	step "d64-$n-$v" 35 kernel $sel --head-dim 64 --masks full,causal,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K --passes bwd -w 3 -n 10
	n=$((n + 1))
done
left=$((budget + 30 - ($(date +%s) - t0)))
if [ "$left" -gt 15 ]; then
	timeout -k 5 $((left < 30 ? left : 30)) ncu --clock-control none -k 'regex:^bwd90e_bf16' -c 1 \
		--section SpeedOfLight --section WarpStateStats --section SchedulerStats --metrics "$STALL_METRICS" \
		bin/longca kernel --kernels cuda --variant $a --no-check -w 0 -n 1 --masks causal --seqlens 16K --heads 64:8 \
		--passes bwd --out "$out/t/ncu-run" >"$out/t/ncu-$a.log" 2>&1
	echo "# ncu $a rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
fi
cat "$out/t/summary.txt"
for d in d128 d64; do
	echo "=== $d backward TFLOP/s: mask seqlen, then" $runs
	join_runs $d $runs
done
echo "=== ncu $a bwd90e, causal 16K d128 (call 43: sm90 18.60 ms, cuDNN 18.06)"
stalls "$out/t/ncu-$a.log"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
