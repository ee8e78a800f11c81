#!/bin/sh
# Call 36 (2026-12-04, third session): issue 19's tables with the final defaults, the
# parts that `longca run` (call 33, head dim 128) does not cover, in one call:
#   sh scripts/device/call36.sh OUT     (bin/longca.gz carried: make device)
# 1. head dim 64, every peer but torch:efficient, the five masks cuDNN runs natively,
#    8K-48K, fwd and bwd (the d64 table was last taken in calls 19-23, before today's
#    defaults);
# 2. block-sparse 32K, 64- and 128-token blocks, kept 0.2 / 0.5, cuda and torch:flex in the
#    same sweep, fwd and bwd, plus dense full 32K cuda (the "80% of dense per kept area");
# 3. ncu on the d64 backward (sm90's bwd90f and cuDNN's bprop, full 16K): the stall
#    reasons by name and the scheduler, which call 34 (L2 and reductions only) left open.
# Every timed case checked. Bounded to 440 s; the tables last; logs packed as OUT/t.tgz.
set -u
out=${1:?usage: call36.sh OUT}
mkdir -p "$out/t"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
[ -x bin/longca ] || { gunzip -c bin/longca.gz >bin/longca && chmod +x bin/longca; }
t0=$(date +%s)
budget=${CALL_BUDGET:-440}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader >"$out/t/gpu.txt" 2>&1
step() { # NAME CAP ARGS...: a longca sweep stopped with SIGINT at its cap or the budget, rows kept
	name=$1 cap=$2
	shift 2
	left=$((budget - ($(date +%s) - t0)))
	[ "$left" -gt 15 ] || { echo "# $name skipped (time)" >>"$out/t/summary.txt"; return; }
	timeout -s INT -k 10 $((left < cap ? left : cap)) bin/longca "$@" --heads 64:8 --out "$out/t/$name" --run-id "$name" >"$out/t/$name.log" 2>&1
	echo "# $name rc=$? at $(($(date +%s) - t0)) s: $(grep '^# Cases' "$out/t/$name.log" | sed 's/Avg.*//')" >>"$out/t/summary.txt"
}
step d64 220 kernel --kernels cuda,cudnn,torch:cudnn,torch:flash,torch:flex,torch:varlen \
	--masks full,causal,full_document,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K \
	--head-dim 64 --passes fwd,bwd -w 3 -n 10
step sparse 120 sparse --kernels cuda,torch:flex --seqlens 32K --block 128,64 --ratios 0.2,0.5 --passes fwd,bwd -w 2 -n 5
step dense 25 kernel --kernels cuda --masks full --seqlens 32K --passes fwd,bwd -w 2 -n 5
M='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum,smsp__cycles_active.avg,gpu__time_duration.sum'
prof() { # NAME REGEX COUNT ARGS...
	name=$1 re=$2 cnt=$3
	shift 3
	left=$((budget + 30 - ($(date +%s) - t0)))
	[ "$left" -gt 20 ] || { echo "# ncu $name skipped (time)" >>"$out/t/summary.txt"; return; }
	timeout -k 5 $((left < 60 ? left : 60)) ncu --clock-control none -k "regex:$re" -c "$cnt" \
		--section SpeedOfLight --section WarpStateStats --section SchedulerStats --metrics "$M" \
		bin/longca kernel --no-check -w 0 -n 1 --masks full --seqlens 16K --heads 64:8 --passes bwd --head-dim 64 \
		--out "$out/t/ncu-run-$name" "$@" >"$out/t/ncu-$name.log" 2>&1
	echo "# ncu $name rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
}
prof sm90 '^bwd90[a-z]*_bf16' 1 --kernels cuda
prof cudnn 'bprop' 1 --kernels cudnn
for r in d64 sparse dense; do
	bin/longca merge "$out/t/$r" --out "$out/t/$r.arrow" >/dev/null 2>&1
	bin/longca report "$out/t/$r.arrow" >"$out/t/$r.report.txt" 2>&1
done
tar -C "$out" -czf "$out/t.tgz" t
cat "$out/t/gpu.txt" "$out/t/summary.txt"
echo "=== ncu, d64 backward, full 16K: stall reasons per issued instruction (>= 0.05)"
for n in sm90 cudnn; do
	echo "## $n"
	grep -E '^  [a-zA-Z_].*\(|issue_stalled_.*ratio|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Eligible Warps|Active Warps Per|Duration|Compute \(SM\)' "$out/t/ncu-$n.log" |
		awk '{v=$NF; $NF=""; sub(/smsp__average_warps_issue_stalled_/, "stall_"); sub(/_per_issue_active.ratio/, ""); print $0 v}' |
		awk '$NF+0 >= 0.05 || !/stall_/' | cut -c1-110 | head -30
done
for r in d64 sparse dense; do
	echo "=== $r"
	sed -n '/^# mask/,$p' "$out/t/$r.report.txt" | head -60
done
