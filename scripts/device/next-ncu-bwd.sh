#!/bin/sh
# Prepared 2026-12-04 (docs/perf.md "Next: what bounds the head-dim-64 backward"): Nsight
# Compute on the backward at head dim 64 and 128, sm90 and cuDNN, full 16K 64:8, from the
# repository root with bin/longca.gz carried (make device):
#   sh scripts/device/next-ncu-bwd.sh OUT
# The question: at d64 every step stages 2 x 64 x 64 fp32 dQ partials (one a warpgroup,
# 32 KB) for 5.2 MFLOP, four times d128's bytes per FLOP; at 372 TFLOP/s that is about
# 2.3 TB/s of bulk reduce-adds into L2. Does the L2 (reductions, throughput) bound it, or the
# tensor pipe's issue, or the warps' stalls? The same sections for cuDNN's d64 backward
# show what it does instead (its kernels' names and counts, its L2 traffic).
# Bounded to 300 s; the summary last; the logs packed as OUT/ncu-bwd.tgz.
set -u
out=${1:?usage: next-ncu-bwd.sh OUT}
mkdir -p "$out/n"
[ -x bin/longca ] || { gunzip -c bin/longca.gz >bin/longca && chmod +x bin/longca; }
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
t0=$(date +%s)
metrics=sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sectors_op_red.sum,lts__t_sectors_op_red.sum.per_second,lts__t_sectors_op_read.sum.per_second,lts__t_sectors_op_write.sum.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum
prof() { # NAME REGEX COUNT ARGS...
	name=$1 re=$2 cnt=$3
	shift 3
	left=$((300 - ($(date +%s) - t0)))
	[ "$left" -gt 20 ] || { echo "# $name skipped (time)" >>"$out/n/summary.txt"; return; }
	timeout -k 10 $((left < 90 ? left : 90)) ncu --clock-control none -k "regex:$re" -c "$cnt" \
		--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --metrics "$metrics" \
		bin/longca kernel --no-check -w 0 -n 1 --masks full --seqlens 16K --heads 64:8 --passes bwd --out "$out/n/run-$name" "$@" >"$out/n/$name.log" 2>&1
	echo "# $name rc=$? at $(($(date +%s) - t0)) s" >>"$out/n/summary.txt"
	grep -E '^  [a-z_0-9]+.*\(|Duration|gmma_cycles|lts__t_sectors_op_red|lts__t_sectors_op_read.sum.per|lts__t_sectors_op_write.sum.per|lts__throughput|L2 Cache Throughput|DRAM Throughput|Compute \(SM\) Throughput|Stall|Warp Cycles Per Issued' "$out/n/$name.log" | head -60 >>"$out/n/summary.txt"
}
prof sm90-d64 '^bwd90[a-z]*_(bf16|fp16)' 1 --kernels cuda --variant sm90 --head-dim 64
prof sm90-d128 '^bwd90[a-z]*_(bf16|fp16)' 1 --kernels cuda --variant sm90 --head-dim 128
prof cudnn-d64 '.' 10 --kernels cudnn --head-dim 64
prof cudnn-d128 '.' 10 --kernels cudnn --head-dim 128
cat "$out/n/summary.txt"
tar -C "$out" -czf "$out/ncu-bwd.tgz" n && rm -rf "$out/n"
