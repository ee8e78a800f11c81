#!/bin/sh
# Call 40 (2026-12-04, fourth session; docs/perf.md "Calls 37-42"): the experiment sm90bs,
# the backward's dS^T stored by stmatrix (4 a thread instead of 16 32-bit stores), against
# sm90 (since call 38: bwd90e at d128, bwd90t at d64, the block order by the scheduler
# model), from the repository root with bin/longca.gz and bin/cuda.test.gz carried:
#   sh scripts/device/next-stsm.sh OUT
# 1. sm90bs's GPU tests (every mask, d64 and d128, fwd and bwd, the deterministic repeat);
# 2. backward d128 on the five masks cuDNN runs whole and d64 on four, 8K-48K, sm90bs /
#    sm90 / sm90bs again (the clock's drift), cudnn beside them, 64:8, checked;
# 3. ncu on sm90bs's d128 backward (full 16K): the MIO-throttle stall against call 39's
#    0.60 cycles an instruction (cuDNN 0.05).
# Bounded to 330 s; the tables last; the logs packed as OUT/t.tgz.
set -u
out=${1:?usage: next-stsm.sh OUT}
. scripts/device/lib.sh
call_start 330 longca cuda.test || exit 1
STEP_TIMEOUT=120 sh kernels/cuda/gpu.sh "$out/t" test sm90bs >/dev/null 2>&1
echo "# tests sm90bs done at $(($(date +%s) - t0)) s: $(grep -c 'bwd=' "$out/t/test-sm90bs.log") checks, $(grep -c -- '--- FAIL' "$out/t/test-sm90bs.log") failed tests" >>"$out/t/summary.txt"
grep -E -- "--- FAIL|panic|Skip" "$out/t/test-sm90bs.log" | head -8 >>"$out/t/summary.txt"
n=0
for v in sm90bs sm90 cudnn sm90bs; do
	sel="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	step "d128-$n-$v" 60 kernel $sel --masks full,causal,full_document,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K --passes bwd -w 3 -n 10
	step "d64-$n-$v" 30 kernel $sel --head-dim 64 --masks full,causal,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K --passes bwd -w 3 -n 10
	n=$((n + 1))
done
left=$((budget - ($(date +%s) - t0)))
if [ "$left" -gt 20 ]; then
	timeout -k 5 $((left < 40 ? left : 40)) ncu --clock-control none -k 'regex:^bwd90e_bf16' -c 1 \
		--section SpeedOfLight --section WarpStateStats --section SchedulerStats --metrics "$STALL_METRICS" \
		bin/longca kernel --kernels cuda --variant sm90bs --no-check -w 0 -n 1 --masks full --seqlens 16K --heads 64:8 \
		--passes bwd --out "$out/t/ncu-run" >"$out/t/ncu-sm90bs.log" 2>&1
	echo "# ncu sm90bs rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
fi
cat "$out/t/summary.txt"
for d in d128 d64; do
	echo "=== $d backward TFLOP/s: mask seqlen, then sm90bs, sm90, cudnn, sm90bs"
	for f in "$out"/t/$d-*.log; do
		grep -hE '^  [a-z_]+ +[0-9]+ ' "$f" 2>/dev/null | awk '{print $1 "@" $2, $NF}' | sort >"$f.v"
	done
	join -a 1 -e - -o auto "$out/t/$d-0-sm90bs.log.v" "$out/t/$d-1-sm90.log.v" 2>/dev/null | join -a 1 -e - -o auto - "$out/t/$d-2-cudnn.log.v" 2>/dev/null |
		join -a 1 -e - -o auto - "$out/t/$d-3-sm90bs.log.v" 2>/dev/null | tr '@' ' ' | sort -k1,1 -k2,2n
done
echo "=== ncu bwd90e sm90bs, full 16K d128 (call 39: sm90 37.56 ms, 7.37 cycles an instruction, mio_throttle 0.60; cudnn 35.39, 6.70, 0.05)"
stalls "$out/t/ncu-sm90bs.log"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
