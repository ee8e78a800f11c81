#!/bin/sh
# The second device call of the next session (written 2026-12-03 night), from the
# repository root with bin/longca.gz carried (make device):
#   sh scripts/device/next-second.sh OUT
# 1. issue 19's must-show: the six CP methods with --kernel cuda on call 13's kernel (sm90:
#    the backward's dQ in fragment order, the order rule), 8 ranks on one GPU, 8K tokens
#    per rank, the 4 CP masks, every row checked;
# 2. issue 20's leftover: balanced with its plan's own mesh under --kernel cudnn beside
#    ulysses (only 1x8 ran with cudnn).
# (The persistence rule this call used to fit was fitted in call 13: docs/perf.md.)
# About 6 minutes, each part bounded; logs packed under OUT, the tables last.
set -u
out=${1:?usage: next-second.sh OUT}
mkdir -p "$out"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
[ -f bin/longca.gz ] && gunzip -c bin/longca.gz >bin/longca && chmod +x bin/longca
t0=$(date +%s)
rm -rf /tmp/cpc /tmp/mesh
CP_METHODS=ulysses,balanced,ring-allgather,loongtrain,usp,ring-p2p CP_SPLITS=0 CP_BUDGET=220 \
	sh spmd/cp/balanced_mesh_gpu.sh /tmp/mesh >"$out/mesh.txt" 2>&1
tar -C /tmp -czf "$out/mesh.tgz" mesh
CP_KERNELS=cudnn CP_SPLITS=0 CP_CUDNN_METHODS=balanced,ulysses CP_BUDGET=80 \
	sh spmd/cp/balanced_gpu.sh /tmp/cpc >"$out/cp-cudnn.txt" 2>&1
tar -C /tmp -czf "$out/cp-cudnn.tgz" cpc
echo "# done at $(($(date +%s) - t0)) s"
echo "=== 8 ranks, cuda (call 13's kernel), the six methods"; tail -9 "$out/mesh.txt"
echo "=== 8 ranks, cudnn, balanced's own mesh"; tail -5 "$out/cp-cudnn.txt"
