#!/bin/sh
# Call 49 (2026-12-04, sixth session): experiment sm90hp, the backward's blocks walking two
# key tiles each (the heaviest with the lightest, the first down from its last query tile,
# the second up from its first, the group's heads inner), so that causal's blocks are as
# long as full's and walk the same query tiles together (call 48: sm90's causal 16K
# backward read 17.4 GB from DRAM, L2 hit rate 74%; cuDNN's 1.4 GB, 98%).
# 1. sm90hp's GPU tests (every mask, d64 and d128, fwd and bwd, the deterministic repeat);
# 2. the backward at d128 on the five masks cuDNN runs whole and at d64 on four, 8K-48K:
#    sm90hp / sm90 / cudnn / sm90hp (the clock's drift), 64:8, checked;
# 3. DRAM bytes and L2 hit rate of one backward launch: causal 16K and 32K, sm90hp, sm90
#    and cudnn (the model's prediction for 32K: sm90 about 70 GB read, sm90hp about 6).
# Bounded to 480 s; the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call49.sh OUT
set -u
out=${1:?usage: call49.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-480} longca cuda.test || exit 1
gpu_tests sm90hp 110
runs="sm90hp sm90 cudnn sm90hp"
n=0
for v in $runs; do
	sel="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	step "d128-$n-$v" 75 kernel $sel --masks full,causal,full_document,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K --passes bwd -w 3 -n 10
	step "d64-$n-$v" 35 kernel $sel --head-dim 64 --masks full,causal,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K --passes bwd -w 3 -n 10
	n=$((n + 1))
done
for c in "sm90hp causal 16K" "sm90hp causal 32K" "sm90 causal 32K" "cudnn causal 32K" "sm90hp full 16K" "sm90hp causal_document 16K" "sm90 causal_document 16K"; do
	set -- $c
	left=$((budget + 40 - ($(date +%s) - t0)))
	[ "$left" -gt 12 ] || { echo "# ncu mem $c skipped (time)" >>"$out/t/summary.txt"; continue; }
	re='^bwd90e_bf16' sel="--kernels cuda --variant $1"
	[ $1 = cudnn ] && re='bprop' sel="--kernels cudnn"
	timeout -k 5 $((left < 25 ? left : 25)) ncu --clock-control none -k "regex:$re" -c 1 \
		--metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum \
		bin/longca kernel $sel --no-check -w 0 -n 1 --masks $2 --seqlens $3 --heads 64:8 --passes bwd \
		--out "$out/t/ncu-mem-run-$1-$2-$3" >"$out/t/ncu-mem-$1-$2-$3.log" 2>&1
	echo "# ncu mem $c rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
done
cat "$out/t/summary.txt"
for d in d128 d64; do
	echo "=== $d backward TFLOP/s: mask seqlen, then" $runs
	join_runs $d $runs
done
echo "=== one backward launch, d128: DRAM read / write, L2 hit rate, time"
for f in "$out"/t/ncu-mem-*.log; do
	[ -f "$f" ] || continue
	echo "## $(basename "$f" .log)"
	grep -E 'dram__bytes|lts__t_sector_hit_rate|gpu__time_duration' "$f" | awk '{print "  " $1, $(NF-1), $NF}'
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
