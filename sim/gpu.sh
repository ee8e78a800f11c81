#!/bin/sh
# longca simulate against a measurement on the GPU machine (docs/simulate.md, validation b):
# 8 simulated ranks on one H200 (longca cp --ranks 8 --kernel cuda, transfers as device
# copies), predicted with the machine preset h200-1gpu. Build here and carry bin/:
#   go build -ldflags '-s -w' -o bin/longca ./cmd/longca && gzip -kf bin/longca
# then, from the repository root on the GPU machine:
#   sh sim/gpu.sh OUTDIR
# Steps, each under `timeout` (at most 8 minutes in all, 7 without SIM_COMPARE_8K; step 2
# is most of it):
#   1. bin/longca kernel --kernels cuda on the shapes the CP steps take (full, causal and
#      documents at 2K..16K, 64:8, fwd and bwd): the kernel rates to calibrate from
#   2. bin/longca cp --ranks 8 --kernel cuda: every method x the 4 CP masks x fwd, bwd at
#      2K tokens per rank (SIM_TOKENS), one mask sample, -w 1 -n 3, not checked (these
#      cases were checked on this GPU before, docs/cp-gpu.md)
#   3. bin/longca simulate --compare: the prediction with the preset kernel model (the one
#      written in docs/simulate.md before this run), then calibrated to step 1's rows
#   4. with SIM_COMPARE_8K=DIR (rows of longca cp --ranks 8 --kernel cuda at 8K tokens per
#      rank, such as spmd/cp/gpu.sh's results/ folder): the same comparison at 8K
# Everything goes to OUTDIR; the last lines are the comparison summaries.
# SIM_KERNEL, SIM_HEADS, SIM_HEAD_DIM, SIM_SEQLENS (cuda, 64:8, 128, 2K,4K,8K,16K) only to
# try the script on a CPU.
set -u
out=${1:?usage: sh sim/gpu.sh OUTDIR}
mkdir -p "$out" || exit 1
if [ ! -x bin/longca ] && [ -f bin/longca.gz ]; then
	gunzip -kf bin/longca.gz && chmod +x bin/longca || exit 1
fi
[ -x bin/longca ] || { echo "sim/gpu.sh: no bin/longca (build it here, carry bin/)" >&2; exit 1; }
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc}
export NCCL_NVLS_ENABLE=0
tokens=${SIM_TOKENS:-2K}
kernel=${SIM_KERNEL:-cuda}
heads=${SIM_HEADS:-64:8}
hdim=${SIM_HEAD_DIM:-128}
seqlens=${SIM_SEQLENS:-2K,4K,8K,16K}
masks=full,causal,full_document_long,causal_document_long
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
status() { case $1 in 0) echo ok ;; 124 | 137) echo TIMEOUT ;; *) echo "FAIL($1)" ;; esac; }

timeout 120 bin/longca kernel --kernels "$kernel" --masks full,causal,full_document,causal_document \
	--seqlens "$seqlens" --heads "$heads" --head-dim "$hdim" --dtype bf16 --passes fwd,bwd \
	-w 2 -n 5 --no-check --out "$out/kernel" >"$out/kernel.log" 2>&1
note "1. longca kernel (calibration rows): $(status $?)"

timeout 240 bin/longca cp --ranks 8 --kernel "$kernel" --masks "$masks" --tokens-per-rank "$tokens" \
	--heads "$heads" --head-dim "$hdim" --dtype bf16 --passes fwd,bwd --samples 1 -w 1 -n 3 --no-check \
	--out "$out/cp" >"$out/cp.log" 2>&1
note "2. longca cp --ranks 8 at $tokens tokens per rank: $(status $?) ($(grep -c '"message":"cp"' "$out/cp.log") rows)"

compare() { # name, compare dir, tokens, extra simulate flags...
	name=$1 dir=$2 tok=$3
	shift 3
	timeout 30 bin/longca simulate --gpus 8 --machine h200-1gpu --tokens-per-rank "$tok" --masks "$masks" \
		--heads "$heads" --head-dim "$hdim" --compare "$dir" --out "$out/$name" "$@" >"$out/$name.txt" 2>&1
	rc=$?
	note "3. simulate $name: $(status $rc): $(grep '^# compared' "$out/$name.txt" || tail -1 "$out/$name.txt")"
}
compare sim-preset "$out/cp" "$tokens"
compare sim-calibrated "$out/cp" "$tokens" --kernel-rows "$out/kernel"
if [ -n "${SIM_COMPARE_8K:-}" ]; then
	compare sim-preset-8k "$SIM_COMPARE_8K" 8K
	compare sim-calibrated-8k "$SIM_COMPARE_8K" 8K --kernel-rows "$out/kernel"
fi

echo
echo "== measured against predicted (calibrated kernel model), $tokens tokens per rank"
sed -n '/^# measured/,$p' "$out/sim-calibrated.txt" | head -60
echo
echo "== summary"
cat "$summary"
