#!/bin/sh
# Prepared 2026-12-04 (docs/perf.md "Next: the next session's calls", 2): the head-dim-64
# backward, from the repository root with bin/longca.gz and bin/cuda.test.gz carried (make
# device):
#   sh scripts/device/next-d64bwd.sh OUT
# 1. the experiment sm90bq's GPU tests (every mask, d64 and d128, fwd and bwd, deterministic);
# 2. d64 backward, sm90bq / sm90 / cudnn: full, causal, causal_document and
#    sliding_window_causal at 16K and 48K, 64:8, checked (call 29's table);
# 3. Nsight Compute on the backward at head dim 64 (sm90, sm90bq, cuDNN) and 128 (sm90,
#    cuDNN), full 16K 64:8.
# The question: at d64 every step stages 2 x 64 x 64 fp32 dQ partials (one a warpgroup,
# 32 KB) for 5.2 MFLOP, four times d128's bytes per FLOP; at 372 TFLOP/s that is about
# 2.3 TB/s of bulk reduce-adds into L2. Does the L2 (reductions, throughput) bound it, or the
# tensor pipe's issue, or the warps' stalls? The same sections for cuDNN's d64 backward
# show what it does instead (its kernels' names and counts, its L2 traffic). sm90bq adds the
# two warpgroups' partials in shared memory first: half the reductions.
# Bounded to 540 s; the summary last; the logs packed as OUT/d64bwd.tgz.
set -u
out=${1:?usage: next-ncu-bwd.sh OUT}
mkdir -p "$out/n"
for f in longca cuda.test; do
	[ -x bin/$f ] || { gunzip -c bin/$f.gz >bin/$f && chmod +x bin/$f; }
done
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
t0=$(date +%s)
STEP_TIMEOUT=110 sh kernels/cuda/gpu.sh "$out/n" test sm90bq >/dev/null 2>&1
echo "# tests sm90bq done at $(($(date +%s) - t0)) s: $(grep -c 'bwd=' "$out/n/test-sm90bq.log") checks, $(grep -c -- '--- FAIL' "$out/n/test-sm90bq.log") failed tests" >>"$out/n/summary.txt"
grep -E -- "--- FAIL|panic" "$out/n/test-sm90bq.log" | head -5 >>"$out/n/summary.txt"
for v in sm90bq sm90 cudnn sm90bq; do # sm90bq twice: first and last, the clock's drift
	left=$((540 - ($(date +%s) - t0)))
	[ "$left" -gt 200 ] || break # leave the profiles their time
	sel="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	n=$(ls "$out/n" | grep -c '^t-')
	timeout -s INT -k 5 45 bin/longca kernel $sel --head-dim 64 --masks full,causal,causal_document,sliding_window_causal \
		--seqlens 16K,48K --heads 64:8 --passes bwd -w 3 -n 10 --out "$out/n/t$n-$v" >"$out/n/t-$n-$v.log" 2>&1
	echo "# d64 bwd $v rc=$? at $(($(date +%s) - t0)) s" >>"$out/n/summary.txt"
done
metrics=sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sectors_op_red.sum,lts__t_sectors_op_red.sum.per_second,lts__t_sectors_op_read.sum.per_second,lts__t_sectors_op_write.sum.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum
prof() { # NAME REGEX COUNT ARGS...
	name=$1 re=$2 cnt=$3
	shift 3
	left=$((540 - ($(date +%s) - t0)))
	[ "$left" -gt 20 ] || { echo "# $name skipped (time)" >>"$out/n/summary.txt"; return; }
	timeout -k 10 $((left < 70 ? left : 70)) ncu --clock-control none -k "regex:$re" -c "$cnt" \
		--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --metrics "$metrics" \
		bin/longca kernel --no-check -w 0 -n 1 --masks full --seqlens 16K --heads 64:8 --passes bwd --out "$out/n/run-$name" "$@" >"$out/n/$name.log" 2>&1
	echo "# $name rc=$? at $(($(date +%s) - t0)) s" >>"$out/n/summary.txt"
	grep -E '^  [a-z_0-9]+.*\(|Duration|gmma_cycles|lts__t_sectors_op_red|lts__t_sectors_op_read.sum.per|lts__t_sectors_op_write.sum.per|lts__throughput|L2 Cache Throughput|DRAM Throughput|Compute \(SM\) Throughput|Stall|Warp Cycles Per Issued' "$out/n/$name.log" | head -60 >>"$out/n/summary.txt"
}
prof sm90-d64 '^bwd90[a-z]*_(bf16|fp16)' 1 --kernels cuda --variant sm90 --head-dim 64
prof sm90bq-d64 '^bwd90[a-z]*_(bf16|fp16)' 1 --kernels cuda --variant sm90bq --head-dim 64
prof sm90-d128 '^bwd90[a-z]*_(bf16|fp16)' 1 --kernels cuda --variant sm90 --head-dim 128
prof cudnn-d64 '.' 10 --kernels cudnn --head-dim 64
prof cudnn-d128 '.' 10 --kernels cudnn --head-dim 128
cat "$out/n/summary.txt"
for f in "$out"/n/t-*.log; do
	echo "=== $(basename "$f" .log)"
	grep -E '^  [a-z_]+ +[0-9]+ ' "$f" | awk '{print $1, $2, $NF}'
done
tar -C "$out" -czf "$out/d64bwd.tgz" n && rm -rf "$out/n"
