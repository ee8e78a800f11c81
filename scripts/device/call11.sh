#!/bin/sh
# Device call 11 (session of 2026-12-03 evening), from the repository root with
# bin/longca.gz and bin/cuda.test.gz carried (make device):
#   sh scripts/device/call11.sh OUT
# 1. the backward experiments sm90r (dK issued after dQ, dQ staged while dK runs) and sm90t
#    (sm90r with three Q/dO stages): their GPU tests (every mask fwd+bwd, windows, odd
#    lengths, the deterministic backward), then the backward at 16K, 64:8, d128 on four masks
#    for sm90, each variant that passed, and the native cudnn;
# 2. issue 20: the one-rank NCCL cell not reached (loongtrain, causal_document_long), and
#    balanced with the plan's own mesh beside ulysses and ring-allgather in one run
#    (8 ranks, --kernel cuda, the 4 CP masks).
# About 6 minutes; logs packed under OUT, the tables last.
set -u
out=${1:?usage: call11.sh OUT}
mkdir -p "$out/k"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
for f in longca cuda.test; do
	[ -f "bin/$f.gz" ] && gunzip -c "bin/$f.gz" >"bin/$f" && chmod +x "bin/$f"
done
t0=$(date +%s)
L=bin/longca
vs="sm90"
for v in sm90r sm90t; do
	STEP_TIMEOUT=80 sh kernels/cuda/gpu.sh "$out/k" test "$v" 'TestMasks|TestWindows|TestDeterministic|TestOddLengths' >/dev/null 2>&1 && vs="$vs $v"
	grep -h 'deterministic: dq' "$out/k/test-$v.log" | head -1 >>"$out/k/summary.txt"
	echo "# tests $v done at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
done
masks=full,causal,causal_document,sliding_window_causal
common="--seqlens 16K --heads 64:8 --passes bwd -w 3 -n 10"
for v in $vs; do
	timeout 60 $L kernel --kernels cuda --variant "$v" --masks $masks $common --out "$out/k/run-$v" >"$out/k/time-$v.log" 2>&1
	echo "# kernel $v rc=$? at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
done
timeout 60 $L kernel --kernels cudnn --masks $masks $common --out "$out/k/run-cudnn" >"$out/k/time-cudnn.log" 2>&1
echo "# kernel cudnn rc=$? at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
tar -C "$out" -czf "$out/kernel.tgz" k

OVH_METHODS=loongtrain OVH_MASKS=causal_document_long OVH_TIMEOUT=60 sh spmd/cp/overhead.sh /tmp/ovh >"$out/overhead.txt" 2>&1
tar -C /tmp -czf "$out/overhead.tgz" ovh
CP_METHODS=ulysses,balanced,ring-allgather CP_SPLITS=0 CP_BUDGET=140 sh spmd/cp/balanced_mesh_gpu.sh /tmp/mesh >"$out/mesh.txt" 2>&1
tar -C /tmp -czf "$out/mesh.tgz" mesh
echo "# done at $(($(date +%s) - t0)) s"
echo "=== kernel backward, 16K, 64:8, d128 (mask pass TFLOP/s)"
for f in "$out"/k/time-*.log; do
	echo "## $(basename "$f" .log)"
	grep -E '^  [a-z_]+ +[0-9]' "$f" | awk '{printf "%-24s %-4s", $1, $4; for (i = 7; i <= NF; i++) printf " %s", $i; printf "\n"}' | head -8
done
cat "$out/k/summary.txt"
echo "=== one rank, NCCL"; tail -6 "$out/overhead.txt"
echo "=== 8 ranks, cuda, balanced (plan's mesh) beside ulysses and ring-allgather"; tail -8 "$out/mesh.txt"
