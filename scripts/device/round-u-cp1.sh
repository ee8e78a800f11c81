#!/bin/sh
# One device call of 2026-12-03 (issues 19 and 20), from the repository root with
# bin/longca.gz and bin/cuda.test.gz carried (make device):
#   sh scripts/device/round-u-cp1.sh OUT
# 1. scripts/device/kernel-u.sh: sm90u's GPU tests and timings beside sm90 and cudnn;
# 2. spmd/cp/overhead.sh: every CP method at one rank through NCCL (mpirun -np 1);
# 3. spmd/cp/balanced_gpu.sh with cudnn: the six methods at 8 ranks, balanced's THD layout.
# About 8.5 minutes. Each part's log under OUT; its summary printed last.
set -u
out=${1:?usage: round-u-cp1.sh OUT}
mkdir -p "$out"
t0=$(date +%s)
sh scripts/device/kernel-u.sh "$out" >"$out/kernel-u.txt" 2>&1
echo "# kernel-u done at $(($(date +%s) - t0)) s" >>"$out/kernel-u.txt"
OVH_TIMEOUT=90 sh spmd/cp/overhead.sh /tmp/ovh >"$out/overhead.txt" 2>&1
echo "# overhead done at $(($(date +%s) - t0)) s" >>"$out/overhead.txt"
tar -C /tmp -czf "$out/overhead.tgz" ovh
CP_KERNELS=cudnn CP_SPLITS=1 CP_CUDNN_METHODS=balanced,ulysses,ring-allgather,ring-p2p,usp,loongtrain CP_BUDGET=${CP_BUDGET:-200} \
	sh spmd/cp/balanced_gpu.sh /tmp/cpc >"$out/cp-cudnn.txt" 2>&1
echo "# cp cudnn done at $(($(date +%s) - t0)) s" >>"$out/cp-cudnn.txt"
tar -C /tmp -czf "$out/cp-cudnn.tgz" cpc
sed -n '/^=== TFLOP/,$p' "$out/kernel-u.txt" | head -60
tail -12 "$out/overhead.txt"
tail -30 "$out/cp-cudnn.txt"
