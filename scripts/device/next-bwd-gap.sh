#!/bin/sh
# Prepared 2026-12-04 (third session) for the next one: where the backward's last gap to
# cuDNN is, measured before any new design (docs/perf.md "Next: where the backward's gap is").
#   sh scripts/device/next-bwd-gap.sh OUT     (bin/longca.gz carried: make device)
# 0. the last wave at d128: full's backward at 16K and 48K, where 1,024 and 3,072 equal
#    blocks fill 7.76 of 8 and 23.3 of 24 waves on 132 SMs, and at 16,896 and 50,688 tokens,
#    where 1,056 and 3,168 blocks fill 8 and 24 exactly; cuda and cudnn in one sweep;
# 1. causal against full at d128: the backward of both orders (sm90fk: key tiles together,
#    sm90fn: heaviest first; sm90 takes fn on causal) and cuDNN, full and causal 8K-48K:
#    is causal's extra 4-5% below full (0.91-0.93x cuDNN against 0.95-1.00x) the order?
# 2. ncu, one launch each, full 16K and causal 16K, d128 (sm90 and cuDNN's bprop): the
#    instruction counts and the stall reasons by name (is causal's gap the diagonal tiles'
#    extra instructions, or waiting?);
# 3. ncu --page source on the d64 backward (bwd90f, full 16K): the stall samples per SASS
#    instruction, the data call 36 left open (`wait` at twice cuDNN's, `long_scoreboard`
#    1.4x), printed as the 30 instructions with the most samples.
# Every timed case checked. Bounded to 500 s; the tables last; logs packed as OUT/t.tgz
# (at most 8 files come back: everything else is inside it).
set -u
out=${1:?usage: next-bwd-gap.sh OUT}
. scripts/device/lib.sh
call_start 500 longca || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader >"$out/t/gpu.txt" 2>&1
step waves 70 kernel --kernels cuda,cudnn --masks full --seqlens 16384,16896,49152,50688 --passes bwd -w 3 -n 10
for v in sm90fk sm90fn; do
	step "o-$v" 70 kernel --kernels cuda --variant $v --masks full,causal --seqlens 8K,16K,32K,48K --passes bwd -w 3 -n 10
done
step o-cudnn 60 kernel --kernels cudnn --masks full,causal --seqlens 8K,16K,32K,48K --passes bwd -w 3 -n 10
prof() { # NAME REGEX MASK HEADDIM ARGS...
	name=$1 re=$2 mask=$3 d=$4
	shift 4
	left=$((budget + 30 - ($(date +%s) - t0)))
	[ "$left" -gt 20 ] || { echo "# ncu $name skipped (time)" >>"$out/t/summary.txt"; return; }
	timeout -k 5 $((left < 60 ? left : 60)) ncu --clock-control none -k "regex:$re" -c 1 \
		--section SpeedOfLight --section WarpStateStats --section SchedulerStats --metrics "$STALL_METRICS" \
		bin/longca kernel --no-check -w 0 -n 1 --masks "$mask" --seqlens 16K --heads 64:8 --passes bwd --head-dim "$d" \
		--out "$out/t/ncu-run-$name" "$@" >"$out/t/ncu-$name.log" 2>&1
	echo "# ncu $name rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
}
prof sm90-full '^bwd90[a-z]*_bf16' full 128 --kernels cuda
prof sm90-causal '^bwd90[a-z]*_bf16' causal 128 --kernels cuda
prof cudnn-full 'bprop' full 128 --kernels cudnn
prof cudnn-causal 'bprop' causal 128 --kernels cudnn
left=$((budget + 40 - ($(date +%s) - t0)))
if [ "$left" -gt 30 ]; then
	timeout -k 5 $((left < 80 ? left : 80)) ncu --clock-control none -k 'regex:^bwd90t_bf16' -c 1 \
		--section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
		bin/longca kernel --kernels cuda --no-check -w 0 -n 1 --masks full --seqlens 16K --heads 64:8 --passes bwd \
		--head-dim 64 --variant sm90b3 --out "$out/t/ncu-src-run" >"$out/t/ncu-d64-sass.csv" 2>&1
	echo "# ncu d64 sass rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
fi
cat "$out/t/gpu.txt" "$out/t/summary.txt"
echo "=== backward TFLOP/s, d128: mask seqlen value (the waves: cuda, cudnn; the orders: sm90fk, sm90fn, cudnn)"
grep -hE '^  full +[0-9]+ ' "$out/t/waves.log" 2>/dev/null | awk '{print "waves", $1, $2, $(NF-1), $NF}'
for n in o-sm90fk o-sm90fn o-cudnn; do
	echo "## $n"
	grep -hE '^  [a-z_]+ +[0-9]+ ' "$out/t/$n.log" 2>/dev/null | awk '{print $1, $2, $NF}'
done
echo "=== ncu, d128 backward, 16K: instructions and stall reasons per issued instruction (>= 0.05)"
for n in sm90-full sm90-causal cudnn-full cudnn-causal; do
	echo "## $n"
	stalls "$out/t/ncu-$n.log"
done
echo "=== d64 backward: the SASS instructions with the most stall samples"
sass_top "$out/t/ncu-d64-sass.csv"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
