#!/bin/sh
# The first device call of the next session (written 2026-12-03): what the must-show
# tables of issues 20 and 19 still miss, from the repository root with bin/longca.gz
# carried (make device):
#   sh scripts/device/next-first.sh OUT
# 1. one rank through NCCL: usp, ring-p2p, loongtrain (the cells not reached at 16:05/16:31);
# 2. 8 ranks, --kernel cudnn: balanced (1x8, the batched THD copies, never run on a GPU),
#    usp, loongtrain, ring-p2p;
# 3. 8 ranks, --kernel cuda with today's kernel: loongtrain, usp, ring-p2p;
# 4. longca kernel: full and causal at 8K, 32K, 48K, fwd and bwd, cuda against cudnn.
# About 9 minutes, each part bounded; logs packed under OUT, the tables last.
set -u
out=${1:?usage: next-first.sh OUT}
mkdir -p "$out/k"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
[ -f bin/longca.gz ] && gunzip -c bin/longca.gz >bin/longca && chmod +x bin/longca
t0=$(date +%s)
OVH_METHODS=usp,ring-p2p,loongtrain OVH_TIMEOUT=130 sh spmd/cp/overhead.sh /tmp/ovh >"$out/overhead.txt" 2>&1
tar -C /tmp -czf "$out/overhead.tgz" ovh
CP_KERNELS=cudnn CP_SPLITS=1 CP_CUDNN_METHODS=balanced,usp,loongtrain,ring-p2p CP_BUDGET=190 \
	sh spmd/cp/balanced_gpu.sh /tmp/cpc >"$out/cp-cudnn.txt" 2>&1
tar -C /tmp -czf "$out/cp-cudnn.tgz" cpc
CP_METHODS=loongtrain,usp,ring-p2p CP_BUDGET=150 sh spmd/cp/balanced_mesh_gpu.sh /tmp/mesh >"$out/mesh.txt" 2>&1
tar -C /tmp -czf "$out/mesh.tgz" mesh
timeout -s INT -k 20 80 bin/longca kernel --kernels cuda,cudnn --masks full,causal --seqlens 8K,32K,48K --heads 64:8 \
	--passes fwd,bwd -w 3 -n 10 --out "$out/k/run" --run-id lengths >"$out/k/lengths.log" 2>&1
bin/longca report "$out/k/run" >"$out/k/lengths.report" 2>&1
tar -C "$out" -czf "$out/kernel.tgz" k
echo "# done at $(($(date +%s) - t0)) s"
echo "=== one rank, NCCL"; tail -8 "$out/overhead.txt"
echo "=== 8 ranks, cudnn"; tail -9 "$out/cp-cudnn.txt"
echo "=== 8 ranks, cuda"; tail -8 "$out/mesh.txt"
echo "=== kernel, cuda vs cudnn"; sed -n '/x fastest/,$p' "$out/k/lengths.report" | head -16
