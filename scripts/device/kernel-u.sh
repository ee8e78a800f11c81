#!/bin/sh
# Issue 19, the experiment sm90u against sm90 in one call (docs/perf.md, call of 16:xx):
# from the repository root with bin/longca.gz and bin/cuda.test.gz carried (make device):
#   sh scripts/device/kernel-u.sh OUT
# 1. the GPU tests of sm90u (every mask fwd+bwd against the CPU reference, odd lengths,
#    windows, per-head masks, long rows, the deterministic backward bitwise);
# 2. longca kernel at 16K, 64:8, d128 on full, causal, causal_document and
#    sliding_window_causal for sm90, sm90u and the native cudnn (each its own sweep:
#    --variant is the cuda kernel's), head dim 64 full/causal for sm90 and sm90u;
# 3. ncu of sm90u's backward (full 16K): stall reasons by name, tensor pipe.
# About 3 minutes; the table last; logs packed as OUT/kernel-u.tgz.
set -u
out=${1:?usage: kernel-u.sh OUT}
mkdir -p "$out/u"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
for f in longca cuda.test; do
	[ -f "bin/$f.gz" ] && gunzip -c "bin/$f.gz" >"bin/$f" && chmod +x "bin/$f"
done
L=bin/longca
t0=$(date +%s)
stamp() { echo "# [$(($(date +%s) - t0)) s] $*" | tee -a "$out/u/summary.txt"; }
STEP_TIMEOUT=100 sh kernels/cuda/gpu.sh "$out/u" test sm90u 'TestMasks|TestOddLengths|TestWindows|TestHeadMasks|TestLongRows|TestDeterministic' >/dev/null 2>&1
stamp "$(grep '^# test sm90u ' "$out/u/summary.txt" | tail -1)"
grep -h 'deterministic: dq' "$out/u/test-sm90u.log" | head -1 | tee -a "$out/u/summary.txt"
masks=full,causal,causal_document,sliding_window_causal
common="--seqlens 16K --heads 64:8 --passes fwd,bwd -w 3 -n 10"
for v in sm90 sm90u; do
	timeout 90 $L kernel --kernels cuda --variant "$v" --masks $masks $common --out "$out/u/run-$v" >"$out/u/time-$v.log" 2>&1
	stamp "kernel $v rc=$?"
done
timeout 90 $L kernel --kernels cudnn --masks $masks $common --out "$out/u/run-cudnn" >"$out/u/time-cudnn.log" 2>&1
stamp "kernel cudnn rc=$?"
for v in sm90 sm90u; do
	timeout 60 $L kernel --kernels cuda --variant "$v" --masks full,causal --head-dim 64 $common --out "$out/u/run-d64-$v" >"$out/u/time-d64-$v.log" 2>&1
	stamp "kernel d64 $v rc=$?"
done
timeout 60 ncu --clock-control none -k 'regex:^bwd90u_bf16' -c 1 --section SpeedOfLight --section WarpStateStats \
	--metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum' \
	$L kernel --kernels cuda --variant sm90u --no-check -w 0 -n 1 --masks full --seqlens 16K --heads 64:8 --passes bwd \
	--out "$out/u/ncu-run" >"$out/u/ncu-bwd-u.log" 2>&1
stamp "ncu sm90u rc=$?"
tar -C "$out" -czf "$out/kernel-u.tgz" u
echo "=== TFLOP/s, 16K, 64:8, d128 unless said (mask pass value)"
for f in "$out"/u/time-*.log; do
	echo "## $(basename "$f" .log)"
	grep -E '^  [a-z_]+ +[0-9]' "$f" | awk '{printf "%-24s %-4s", $1, $4; for (i = 7; i <= NF; i++) printf " %s", $i; printf "\n"}' | head -12
	grep -E '^# Cases' "$f"
done
echo "=== ncu sm90u bwd full 16K"
grep -E 'issue_stalled_(wait|long_scoreboard|selected|short_scoreboard|barrier|math|dispatch|not_selected)|inst_executed.sum|Duration|No Eligible|Warp Cycles Per Issued' "$out/u/ncu-bwd-u.log" | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | head -16
cat "$out/u/summary.txt"
