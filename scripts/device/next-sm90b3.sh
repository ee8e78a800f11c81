#!/bin/sh
# Prepared 2026-12-04 (third session; docs/perf.md "Next: where the backward's gap is", 3):
# the experiment sm90b3, the head-dim-64 backward over 192-key blocks with three consumer
# warpgroups (the move that took the d64 forward from 0.76-0.84x to 0.91-1.00x cuDNN), from
# the repository root with bin/longca.gz and bin/cuda.test.gz carried (make device):
#   sh scripts/device/next-sm90b3.sh OUT
# 1. sm90b3's GPU tests (every mask, d64 and d128, fwd and bwd, odd lengths, windows, the
#    deterministic backward's bitwise repeat: bwd90td for the first time);
# 2. d64 backward, sm90b3 / sm90 / cudnn / sm90b3 again (the clock's drift): full, causal,
#    causal_document and sliding_window_causal at 8K-48K, 64:8, checked;
# 3. ncu on bwd90t (full 16K d64): time, instructions, stall reasons, against call 36's
#    bwd90f (28.0 ms, 6.35 cycles an instruction) and cuDNN's (22.1 ms, 5.26).
# Bounded to 500 s; the tables last; the logs packed as OUT/t.tgz.
set -u
out=${1:?usage: next-sm90b3.sh OUT}
. scripts/device/lib.sh
call_start 500 longca cuda.test || exit 1
STEP_TIMEOUT=120 sh kernels/cuda/gpu.sh "$out/t" test sm90b3 >/dev/null 2>&1
echo "# tests sm90b3 done at $(($(date +%s) - t0)) s: $(grep -c 'bwd=' "$out/t/test-sm90b3.log") checks, $(grep -c -- '--- FAIL' "$out/t/test-sm90b3.log") failed tests" >>"$out/t/summary.txt"
grep -E -- "--- FAIL|panic|Skip" "$out/t/test-sm90b3.log" | head -8 >>"$out/t/summary.txt"
n=0
for v in sm90b3 sm90 cudnn sm90b3; do
	left=$((budget - 60 - ($(date +%s) - t0)))
	[ "$left" -gt 20 ] || { echo "# d64 bwd $v skipped (time)" >>"$out/t/summary.txt"; continue; }
	sel="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	timeout -s INT -k 5 $((left < 75 ? left : 75)) bin/longca kernel $sel --head-dim 64 \
		--masks full,causal,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K --heads 64:8 --passes bwd \
		-w 3 -n 10 --out "$out/t/b$n-$v" --run-id "b$n-$v" >"$out/t/b$n-$v.log" 2>&1
	echo "# d64 bwd $v rc=$? at $(($(date +%s) - t0)) s: $(grep '^# Cases' "$out/t/b$n-$v.log" | sed 's/Avg.*//')" >>"$out/t/summary.txt"
	n=$((n + 1))
done
left=$((budget - ($(date +%s) - t0)))
if [ "$left" -gt 25 ]; then
	timeout -k 5 $((left < 60 ? left : 60)) ncu --clock-control none -k 'regex:^bwd90t_bf16' -c 1 \
		--section SpeedOfLight --section WarpStateStats --section SchedulerStats \
		--metrics "$STALL_METRICS" \
		bin/longca kernel --kernels cuda --variant sm90b3 --no-check -w 0 -n 1 --masks full --seqlens 16K --heads 64:8 \
		--passes bwd --head-dim 64 --out "$out/t/ncu-run" >"$out/t/ncu-sm90b3.log" 2>&1
	echo "# ncu sm90b3 rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
fi
cat "$out/t/summary.txt"
echo "=== d64 backward TFLOP/s: mask seqlen value, per run (sm90b3 first and last)"
for f in "$out"/t/b*.log; do
	echo "## $(basename "$f" .log)"
	grep -hE '^  [a-z_]+ +[0-9]+ ' "$f" | awk '{print $1, $2, $NF}'
done
echo "=== ncu bwd90t, full 16K d64 (call 36: bwd90f 28.02 ms, 6.35 cycles an instruction; cudnn 22.09 ms, 5.26)"
stalls "$out/t/ncu-sm90b3.log"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
