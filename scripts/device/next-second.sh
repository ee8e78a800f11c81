#!/bin/sh
# The second device call of the next session (written 2026-12-03 night), from the
# repository root with bin/longca.gz carried (make device):
#   sh scripts/device/next-second.sh OUT
# 1. issue 19's must-show: the six CP methods with --kernel cuda on call 13's kernel (sm90:
#    the backward's dQ in fragment order, the order rule), 8 ranks on one GPU, 8K tokens
#    per rank, the 4 CP masks, every row checked;
# 2. the two masks call 14's `longca run` did not reach (block_causal_document at 8K-48K,
#    global_sliding_window 48K), fwd and bwd, every kernel, every case checked;
# 3. issue 20's leftover: balanced with its plan's own mesh under --kernel cudnn beside
#    ulysses (only 1x8 ran with cudnn).
# (The persistence rule this call used to fit was fitted in call 13: docs/perf.md.)
# About 9 minutes, each part bounded; logs packed under OUT, the tables last.
set -u
out=${1:?usage: next-second.sh OUT}
mkdir -p "$out"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
[ -f bin/longca.gz ] && gunzip -c bin/longca.gz >bin/longca && chmod +x bin/longca
t0=$(date +%s)
rm -rf /tmp/cpc /tmp/mesh /tmp/rest
CP_METHODS=ulysses,balanced,ring-allgather,loongtrain,usp,ring-p2p CP_SPLITS=0 CP_BUDGET=220 \
	sh spmd/cp/balanced_mesh_gpu.sh /tmp/mesh >"$out/mesh.txt" 2>&1
tar -C /tmp -czf "$out/mesh.tgz" mesh
K="cuda,cudnn,torch:cudnn,torch:flash,torch:flex,torch:varlen"
timeout -s INT -k 20 150 bin/longca kernel --kernels $K --masks block_causal_document --seqlens 8K,16K,32K,48K --heads 64:8 \
	--passes fwd,bwd -w 3 -n 10 --out /tmp/rest/bcd --run-id rest-bcd >"$out/rest-bcd.log" 2>&1
timeout -s INT -k 20 60 bin/longca kernel --kernels $K --masks global_sliding_window --seqlens 48K --heads 64:8 \
	--passes fwd,bwd -w 3 -n 10 --out /tmp/rest/gsw --run-id rest-gsw >"$out/rest-gsw.log" 2>&1
tar -C /tmp -czf "$out/rest.tgz" rest
CP_KERNELS=cudnn CP_SPLITS=0 CP_CUDNN_METHODS=balanced,ulysses CP_BUDGET=80 \
	sh spmd/cp/balanced_gpu.sh /tmp/cpc >"$out/cp-cudnn.txt" 2>&1
tar -C /tmp -czf "$out/cp-cudnn.tgz" cpc
echo "# done at $(($(date +%s) - t0)) s"
echo "=== 8 ranks, cuda (call 13's kernel), the six methods"; tail -9 "$out/mesh.txt"
echo "=== the rest of call 14's suite (x fastest)"
for r in bcd gsw; do
	timeout -k 5 30 bin/longca report /tmp/rest/$r 2>/dev/null | sed -n '/x fastest/,$p' | head -14
done
echo "=== 8 ranks, cudnn, balanced's own mesh"; tail -5 "$out/cp-cudnn.txt"
