#!/bin/sh
# The kernel part of the last device call of the session (issue 19), from the repository
# root with bin/longca(.gz) and bin/cuda.test(.gz) carried (make device):
#   sh scripts/device/kernel-final.sh OUT
# GPU tests of the default sm90 (every mask fwd+bwd against the CPU reference, odd
# lengths, windows, per-head masks, long rows; the deterministic backward with dq/dk/dv
# bitwise equal over runs); then `longca kernel` at 16K, 64:8, d128 on four masks for
# sm90 and the native cudnn, the deterministic backward's cost, head dim 64 against cudnn.
# (Call 5 also timed the experiments sm90a and sm90o, removed since.) About 120 s. A table
# last; logs packed as OUT/kernel-final.tgz.
set -u
out=${1:?usage: kernel-final.sh OUT}
mkdir -p "$out/k"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
for f in longca cuda.test; do
	[ -x "bin/$f" ] || { [ -f "bin/$f.gz" ] && gunzip -c "bin/$f.gz" >"bin/$f" && chmod +x "bin/$f"; }
done
L=bin/longca
t0=$(date +%s)
stamp() { echo "# [$(($(date +%s) - t0)) s] $*" | tee -a "$out/k/summary.txt"; }
STEP_TIMEOUT=90 sh kernels/cuda/gpu.sh "$out/k" test sm90 'TestMasks|TestOddLengths|TestWindows|TestHeadMasks|TestLongRows|TestDeterministic' >/dev/null 2>&1
stamp "$(grep '^# test sm90 ' "$out/k/summary.txt" | tail -1)"
grep -h 'deterministic: dq' "$out/k/test-sm90.log" | head -1 | tee -a "$out/k/summary.txt"
masks=full,causal,causal_document,sliding_window_causal
common="--seqlens 16K --heads 64:8 --passes fwd,bwd -w 3 -n 10"
for v in sm90; do
	timeout 100 $L kernel --kernels cuda --variant "$v" --masks $masks $common --out "$out/k/run-$v" >"$out/k/time-$v.log" 2>&1
	stamp "kernel $v rc=$?"
done
timeout 100 $L kernel --kernels cudnn --masks $masks $common --out "$out/k/run-cudnn" >"$out/k/time-cudnn.log" 2>&1
stamp "kernel cudnn rc=$?"
timeout 60 $L kernel --kernels cuda --deterministic --masks full,causal,causal_document --seqlens 16K --heads 64:8 --passes bwd -w 3 -n 10 --out "$out/k/run-det" >"$out/k/time-det.log" 2>&1
stamp "kernel deterministic rc=$?"
timeout 60 $L kernel --kernels cuda,cudnn --masks full,causal --head-dim 64 $common --out "$out/k/run-d64" >"$out/k/time-d64.log" 2>&1
stamp "kernel d64 rc=$?"
tar -C "$out" -czf "$out/kernel-final.tgz" k
echo "=== kernel final: TFLOP/s, 16K, 64:8, d128 unless said (mask pass value[s])"
for f in "$out"/k/time-*.log; do
	echo "## $(basename "$f" .log)"
	grep -E '^  [a-z_]+ +[0-9]' "$f" | awk '{printf "%-24s %-4s", $1, $4; for (i = 7; i <= NF; i++) printf " %s", $i; printf "\n"}' | head -12
done
grep -E '^# test|deterministic: dq' "$out/k/summary.txt"
