#!/bin/sh
# One device call's kernel round (issue 19), from the repository root on the GPU machine,
# with bin/longca(.gz) and bin/cuda.test(.gz) carried (make device):
#   sh scripts/device/kernel-round.sh OUT [VARIANTS]
# For each variant (default: sm90 sm90s sm90n): the GPU tests of the new ones (every mask
# fwd+bwd against the CPU reference), then `longca kernel` at 16K, GQA 64:8, d128 on four
# masks, fwd and bwd, every case checked, beside the native cudnn kernel timed in the same
# call; head dim 64 for the last variant and cudnn; block-sparse at 32K; one ncu profile of
# the last variant's backward. Logs and merged results under OUT (packed), a table last.
set -u
out=${1:?usage: kernel-round.sh OUT [VARIANTS]}
vars=${2:-sm90 sm90s sm90n}
mkdir -p "$out/k"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
for f in longca cuda.test; do
	[ -x "bin/$f" ] || { [ -f "bin/$f.gz" ] && gunzip -c "bin/$f.gz" >"bin/$f" && chmod +x "bin/$f"; }
done
L=bin/longca
masks=full,causal,causal_document,sliding_window_causal
common="--heads 64:8 --passes fwd,bwd -w 2 -n 5"
last=$(echo $vars | awk '{print $NF}')
t0=$(date +%s)
stamp() { echo "# [$(($(date +%s) - t0)) s] $*" | tee -a "$out/k/summary.txt"; }
for v in $vars; do
	[ "$v" = sm90 ] && continue
	STEP_TIMEOUT=100 sh kernels/cuda/gpu.sh "$out/k" test "$v" 'TestMasks|TestOddLengths|TestWindows|TestHeadMasks|TestLongRows' >/dev/null 2>&1
	stamp "test $v: $(grep "^# test $v" "$out/k/summary.txt" | tail -1)"
done
STEP_TIMEOUT=80 sh kernels/cuda/gpu.sh "$out/k" test sm80 'TestMasks' >/dev/null 2>&1
stamp "test sm80: $(grep "^# test sm80" "$out/k/summary.txt" | tail -1)"
STEP_TIMEOUT=60 sh kernels/cuda/gpu.sh "$out/k" resources >/dev/null 2>&1
bin/cuda.test -test.run '^TestCompile$' -test.v -variant "$last" >"$out/k/resources-$last.log" 2>&1
stamp "resources done"
for v in $vars; do
	timeout 150 $L kernel --kernels cuda --variant "$v" --masks $masks --seqlens 16K $common --out "$out/k/run-$v" >"$out/k/time-$v.log" 2>&1
	stamp "kernel $v rc=$?"
done
timeout 120 $L kernel --kernels cudnn --masks $masks --seqlens 16K $common --out "$out/k/run-cudnn" >"$out/k/time-cudnn.log" 2>&1
stamp "kernel cudnn rc=$?"
timeout 90 $L kernel --kernels cuda,cudnn --variant "$last" --masks full,causal --seqlens 16K --head-dim 64 $common --out "$out/k/run-d64" >"$out/k/time-d64.log" 2>&1
stamp "kernel d64 rc=$?"
timeout 120 $L sparse --kernels cuda --variant "$last" --seqlens 32K --block 64,128 --ratios 0.2,0.5 $common --out "$out/k/run-sparse" >"$out/k/time-sparse.log" 2>&1
stamp "sparse rc=$?"
NCU_COUNT=4 STEP_TIMEOUT=90 sh kernels/cuda/gpu.sh "$out/k" ncu "$last" --masks full --seqlens 16K --heads 64:8 --passes bwd >/dev/null 2>&1
stamp "ncu done"
tar -C "$out" -czf "$out/kernel-round.tgz" k
echo "=== kernel round: TFLOP/s (fwd / bwd), 16K, 64:8, d128 unless said"
for f in "$out"/k/time-*.log; do
	echo "## $(basename "$f" .log)"
	grep -E '^  [a-z_]+ +[0-9]' "$f" | awk '{printf "%-26s %-4s %s\n", $1, $4, $(NF)}' | head -24
done
grep -E 'regs|FAIL|passed' "$out/k/summary.txt" | head -20
