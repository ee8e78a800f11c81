#!/bin/sh
# The balanced-mesh round on the GPU machine (docs/cp-gpu.md, "balanced: the mesh U x B"):
# balanced on each of its meshes U x 8/U (--cp-ulysses 8,1,4,2: U ranks split the heads,
# 8/U split the sequence by area; 8x1 is Ulysses on balanced's own path) beside the five
# methods (usp and loongtrain 2x4, loongtrain in 2 windows), 8 simulated ranks on one GPU,
# 8K tokens per rank, the 4 CP masks x fwd,bwd, --kernel cuda, every case checked, the
# kernel alone measured in the same run; one process (balanced_gpu.sh with its settings
# below), the table of cp_efficiency (fwd / bwd per method, mesh and mask) last. Before
# it, what the plan chooses by itself per mask (--cp-ulysses 0, DefaultMeshModel: the
# prediction). Build here with `make cp-device`, carry bin/cp-device.tgz, and there:
#   sh spmd/cp/balanced_mesh_gpu.sh OUTDIR
# Bounded at CP_BUDGET seconds (default 225) for the sweep: the methods run in the order
# of CP_METHODS (ulysses first, the best of the five on full and full_document_long and
# the yardstick; then balanced's meshes in the order of CP_SPLITS: 8x1 and 1x8, the plan's
# choices, then 4x2 and 2x4; then ring-allgather, loongtrain, usp, ring-p2p); rows are
# kept as they are measured, so a cut sweep loses only the last. The last call took 9-17 s
# a case (4 a method-mesh): 225 s reach about ulysses and balanced's four meshes. Without
# --overlap (the transfers are not timed apart) to save time: each timed case runs once.
set -u
out=${1:-/tmp/longca-balanced-mesh}
masks=${CP_MASKS:-full,causal,full_document_long,causal_document_long}
if [ ! -x bin/longca ] && [ -f bin/cp-device.tgz ]; then
	tar -C bin -xzf bin/cp-device.tgz || exit 1
fi
choice=$(bin/longca cp --ranks 8 --methods balanced --tokens-per-rank "${CP_TOKENS:-8K}" --masks "$masks" \
	--heads "${CP_HEADS:-64:8}" --head-dim "${CP_HEAD_DIM:-128}" --passes fwd,bwd --samples 1 --dry-run 2>&1 | grep '^  balanced')
CP_KERNELS=${CP_KERNELS:-cuda} CP_SPLITS=${CP_SPLITS:-8,1,4,2} CP_OVERLAP=${CP_OVERLAP-} \
	CP_METHODS=${CP_METHODS:-ulysses,balanced,ring-allgather,loongtrain,usp,ring-p2p} \
	CP_BUDGET=${CP_BUDGET:-225} CP_CUDA_TIME=${CP_BUDGET:-225} CP_MASKS="$masks" sh spmd/cp/balanced_gpu.sh "$out" >"$out.txt" 2>&1
rc=$?
mv "$out.txt" "$out/balanced_gpu.txt" 2>/dev/null || true
sed '/^# ---- cp_efficiency/,$d' "$out/balanced_gpu.txt"
echo "# ---- balanced's own choice per mask (--cp-ulysses 0: the plan's model; mesh UxB-block-stages)"
echo "$choice" | tee "$out/choice.txt"
sed -n '/^# ---- cp_efficiency/,$p' "$out/balanced_gpu.txt"
exit $rc
