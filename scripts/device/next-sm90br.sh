#!/bin/sh
# Prepared 2026-12-04 (fifth session; docs/perf.md "Next: sm90br"): the experiment sm90br,
# the backward's dQ added by the consumer warpgroups' own vector reductions from registers
# (no shared-memory stage, proxy fence or writer), against sm90 and cuDNN, from the
# repository root with bin/longca.gz and bin/cuda.test.gz carried (make device):
#   sh scripts/device/next-sm90br.sh OUT [VARIANT]      (default sm90br)
# 1. its GPU tests (every mask, d64 and d128, fwd and bwd, the deterministic repeat);
# 2. the backward at d128 on the five masks cuDNN runs whole and at d64 on four, 8K-48K:
#    VARIANT / sm90 / cudnn / VARIANT (the clock's drift), 64:8, checked;
# 3. ncu on VARIANT's d128 backward, causal 16K: time, instructions, stall reasons (call 43's
#    sm90: 18.60 ms under ncu, cuDNN's 18.06).
# Bounded to 480 s; the tables last; the logs packed as OUT/t.tgz.
set -u
out=${1:?usage: next-sm90br.sh OUT [VARIANT]}
x=${2:-sm90br}
. scripts/device/lib.sh
call_start 480 longca cuda.test || exit 1
gpu_tests $x 120
n=0
for v in $x sm90 cudnn $x; do
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
		bin/longca kernel --kernels cuda --variant $x --no-check -w 0 -n 1 --masks causal --seqlens 16K --heads 64:8 \
		--passes bwd --out "$out/t/ncu-run" >"$out/t/ncu-$x.log" 2>&1
	echo "# ncu $x rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
fi
cat "$out/t/summary.txt"
for d in d128 d64; do
	echo "=== $d backward TFLOP/s: mask seqlen, then $x, sm90, cudnn, $x"
	join_runs $d $x sm90 cudnn $x
done
echo "=== ncu $x bwd90e, causal 16K d128 (call 43: sm90 18.60 ms, cuDNN 18.06)"
stalls "$out/t/ncu-$x.log"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
