#!/bin/sh
# Call 19 (session of 2026-12-04 morning; docs/perf.md "Call 19"), from the repository root
# with bin/longca.gz and bin/cuda.test.gz carried (make device; gzip -kf bin/cuda.test):
#   sh scripts/device/call19.sh OUT
# 1. the GPU tests of sm90 at commit a5eb0b9 (dead entry points removed; no launch changed);
# 2. issue 19's must-show at head dim 64: every peer, the five masks cuDNN runs, 8K-48K,
#    fwd and bwd, each length its own bounded step (a bound cuts lengths, not masks);
# 3. ring-p2p's document CP rows (call 16's CP bound stopped before them): --kernel cuda,
#    8 ranks on one GPU, 8K a rank, full_document_long and causal_document_long, checked.
# Bounded to 585 s; the tables last; logs packed under OUT.
set -u
out=${1:?usage: call19.sh OUT}
mkdir -p "$out/k"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
for f in longca cuda.test; do
	[ -f "bin/$f.gz" ] && gunzip -c "bin/$f.gz" >"bin/$f" && chmod +x "bin/$f"
done
t0=$(date +%s)
L=bin/longca
S=$out/k/summary.txt
bound() {
	left=$((585 - 15 - ($(date +%s) - t0)))
	[ "$left" -lt "$1" ] && echo $((left > 5 ? left : 0)) || echo "$1"
}
STEP_TIMEOUT=$(bound 110) sh kernels/cuda/gpu.sh "$out/k" test sm90 >/dev/null 2>&1
echo "# tests done at $(($(date +%s) - t0)) s" >>"$S"
K=cuda,cudnn,torch:cudnn,torch:flash,torch:flex,torch:varlen
for s in 8K 16K 32K 48K; do
	n=$(bound 110)
	[ "$n" -gt 20 ] || { echo "# d64 $s skipped (no time left)" >>"$S"; continue; }
	timeout -s INT -k 20 "$n" $L kernel --kernels $K --head-dim 64 \
		--masks full,causal,full_document,causal_document,sliding_window_causal --seqlens "$s" --heads 64:8 \
		--passes fwd,bwd -w 3 -n 10 --out "$out/k/d64" --run-id "d64-$s" >"$out/k/d64-$s.log" 2>&1
	echo "# d64 $s rc=$? at $(($(date +%s) - t0)) s" >>"$S"
done
rm -rf /tmp/mesh
n=$(bound 120)
if [ "$n" -gt 30 ]; then
	CP_METHODS=ring-p2p CP_SPLITS=0 CP_MASKS=full_document_long,causal_document_long CP_BUDGET=$((n - 15)) \
		sh spmd/cp/balanced_mesh_gpu.sh /tmp/mesh >"$out/mesh.txt" 2>&1
	echo "# cp rc=$? at $(($(date +%s) - t0)) s" >>"$S"
	tar -C /tmp -czf "$out/mesh.tgz" mesh
else
	echo "# cp skipped (no time left)" >>"$S"
fi
echo "# done at $(($(date +%s) - t0)) s" >>"$S"
cat "$S"
echo "=== head dim 64, every peer (x fastest)"
timeout -k 5 30 $L report "$out/k/d64" 2>/dev/null | sed -n '/x fastest/,$p' | head -50
echo "=== ring-p2p documents"
grep -E '^  ring-p2p|^# Cases|cp_efficiency|^ring-p2p' "$out/mesh.txt" | head -12
tar -C "$out" -czf "$out/k.tgz" k && rm -rf "$out/k"
ls "$out"
