#!/bin/sh
# The second device call of the next session (written 2026-12-03 evening), from the
# repository root with bin/longca.gz carried (make device):
#   sh scripts/device/next-second.sh OUT
# 1. scripts/device/persist-rule.sh: both sides of sm90's persistence rule on every mask and
#    length (about 4 minutes);
# 2. issue 20's leftovers: balanced with its plan's own mesh under --kernel cudnn beside
#    ulysses (only 1x8 ran with cudnn), and the six methods with --kernel cuda on today's
#    kernel (sm90 with call 11's backward), 8 ranks on one GPU, 8K tokens per rank, the 4 CP masks.
# About 9 minutes, each part bounded; logs packed under OUT, the tables last.
set -u
out=${1:?usage: next-second.sh OUT}
mkdir -p "$out"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
[ -f bin/longca.gz ] && gunzip -c bin/longca.gz >bin/longca && chmod +x bin/longca
t0=$(date +%s)
rm -rf /tmp/persist /tmp/cpc /tmp/mesh
timeout -k 10 300 sh scripts/device/persist-rule.sh /tmp/persist >"$out/persist.txt" 2>&1
tar -C /tmp -czf "$out/persist.tgz" persist
CP_KERNELS=cudnn CP_SPLITS=0 CP_CUDNN_METHODS=balanced,ulysses CP_BUDGET=80 \
	sh spmd/cp/balanced_gpu.sh /tmp/cpc >"$out/cp-cudnn.txt" 2>&1
tar -C /tmp -czf "$out/cp-cudnn.tgz" cpc
CP_METHODS=ulysses,balanced,ring-allgather,loongtrain,usp,ring-p2p CP_SPLITS=0 CP_BUDGET=200 \
	sh spmd/cp/balanced_mesh_gpu.sh /tmp/mesh >"$out/mesh.txt" 2>&1
tar -C /tmp -czf "$out/mesh.tgz" mesh
echo "# done at $(($(date +%s) - t0)) s"
echo "=== the persistence rule (forward, 64:8, d128)"; tail -60 "$out/persist.txt"
echo "=== 8 ranks, cudnn, balanced's own mesh"; tail -5 "$out/cp-cudnn.txt"
echo "=== 8 ranks, cuda (the backward of call 11), the six methods"; tail -9 "$out/mesh.txt"
