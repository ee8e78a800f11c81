#!/bin/sh
# Ran as call 43 (2026-12-04 18:12 UTC; docs/perf.md "Calls 43-46"); sm90u, sm90ur and sm90bg are removed since (sm90u's forward and sm90bg's d64 split are sm90's default): a record of the call.
# Prepared 2026-12-04 (fourth session; docs/perf.md "Next: the uniform warpgroup index"):
# the experiment sm90u, the warpgroup index read through a warp shuffle so that the wgmma
# descriptors' bases live in uniform registers (3-11% fewer instructions offline), against
# sm90 and cuDNN, from the repository root with bin/longca.gz and bin/cuda.test.gz carried
# (make device):
#   sh scripts/device/next-sm90u.sh OUT [VARIANT]
# VARIANT (default sm90u): sm90ur (sm90u with the backward's row statistics as 8-byte pairs)
# or sm90bg (the backward's group split on short rows) are timed the same way, each in a call
# of its own (the pass kernels' ncu, step 4, is skipped for them).
# 1. sm90u's GPU tests (every mask, d64 and d128, fwd and bwd, the deterministic repeat);
# 2. forward and backward, d128 on the five masks cuDNN runs whole and d64 on four, 8K-48K,
#    sm90u / sm90 / cudnn / sm90u again (the clock's drift), 64:8, checked;
# 3. ncu on sm90u's d128 backward and forward (full 16K): instructions and stalls against
#    call 40's backward (10.55 G instructions, 35.57 ms);
# 4. every kernel of one backward pass (the forward it needs, bwd90_pre, the backward,
#    dq90_convert; cuDNN's likewise) with its time, full and causal 16K d128, sm90 and cudnn:
#    how much of causal's pass is fixed work ("Next: sm90u", item 3).
# Bounded to 540 s; the tables last; the logs packed as OUT/t.tgz.
set -u
out=${1:?usage: next-sm90u.sh OUT [VARIANT]}
x=${2:-sm90u}
. scripts/device/lib.sh
call_start 540 longca cuda.test || exit 1
gpu_tests $x 120
n=0
for v in $x sm90 cudnn $x; do
	sel="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	step "d128-$n-$v" 90 kernel $sel --masks full,causal,full_document,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K --passes fwd,bwd -w 3 -n 10
	step "d64-$n-$v" 50 kernel $sel --head-dim 64 --masks full,causal,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K --passes fwd,bwd -w 3 -n 10
	n=$((n + 1))
done
for p in bwd fwd; do
	left=$((budget - ($(date +%s) - t0)))
	[ "$left" -gt 15 ] || { echo "# ncu $x $p skipped (time)" >>"$out/t/summary.txt"; continue; }
	re='^bwd90e_bf16'
	[ $p = fwd ] && re='^fwd90o_bf16'
	timeout -k 5 $((left < 30 ? left : 30)) ncu --clock-control none -k "regex:$re" -c 1 \
		--section SpeedOfLight --section WarpStateStats --section SchedulerStats --metrics "$STALL_METRICS" \
		bin/longca kernel --kernels cuda --variant $x --no-check -w 0 -n 1 --masks full --seqlens 16K --heads 64:8 \
		--passes $p --out "$out/t/ncu-run-$p" >"$out/t/ncu-$x-$p.log" 2>&1
	echo "# ncu $x $p rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
done
for k in cuda cudnn; do
	[ "$x" = sm90u ] || break
	for m in full causal; do
		left=$((budget + 20 - ($(date +%s) - t0)))
		[ "$left" -gt 15 ] || { echo "# ncu pass $k $m skipped (time)" >>"$out/t/summary.txt"; continue; }
		timeout -k 5 $((left < 30 ? left : 30)) ncu --clock-control none -c 16 --section SpeedOfLight \
			bin/longca kernel --kernels $k --no-check -w 0 -n 1 --masks $m --seqlens 16K --heads 64:8 --passes bwd \
			--out "$out/t/ncu-pass-run-$k-$m" >"$out/t/ncu-pass-$k-$m.log" 2>&1
		echo "# ncu pass $k $m rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
	done
done
cat "$out/t/summary.txt"
for d in d128 d64; do
	echo "=== $d TFLOP/s: mask seqlen pass, then $x, sm90, cudnn, $x"
	JOIN_PASS=1 join_runs $d $x sm90 cudnn $x | sort -k3,3 -s
done
for p in bwd fwd; do
	echo "=== ncu $x $p, full 16K d128 (call 40, sm90's backward: 10.55 G instructions, 35.57 ms, 7.67 cycles an issued instruction)"
	stalls "$out/t/ncu-$x-$p.log"
done
echo "=== every kernel ncu saw in one backward pass (the forward first), 16K d128: name, time, unit"
for f in "$out"/t/ncu-pass-*.log; do
	[ -f "$f" ] || continue
	echo "## $(basename "$f" .log)"
	awk '/^  [A-Za-z_].*\(/ {name=$1} /Duration/ {print name, $NF, $(NF-1)}' "$f" | head -16
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
