#!/bin/sh
# The last device call of the session of 2026-12-03 (issues 20 and 19), from the
# repository root with bin/longca.gz and bin/cuda.test.gz carried (make device):
#   sh scripts/device/final-20261203.sh OUT
# 1. spmd/cp/balanced_mesh_gpu.sh: balanced on its meshes U x 8/U beside the five methods,
#    8 ranks on one GPU, --kernel cuda, the 4 CP masks, every row checked (CP_BUDGET s);
# 2. the sm90q experiment: its GPU tests (every mask fwd+bwd, windows, the deterministic
#    backward), then the backward at 16K, 64:8, d128 on four masks for sm90, sm90q and the
#    native cudnn (the forward is the same code in sm90 and sm90q);
# 3. spmd/cp/overhead.sh for the methods the call of 16:05 did not reach at one rank.
# About 8 minutes. Each part's log and rows packed under OUT; the tables printed last.
set -u
out=${1:?usage: final-20261203.sh OUT}
mkdir -p "$out/k"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
for f in longca cuda.test; do
	[ -f "bin/$f.gz" ] && gunzip -c "bin/$f.gz" >"bin/$f" && chmod +x "bin/$f"
done
t0=$(date +%s)
CP_SPLITS=${CP_SPLITS:-8,1,2} CP_BUDGET=${CP_BUDGET:-250} sh spmd/cp/balanced_mesh_gpu.sh /tmp/mesh >"$out/mesh.txt" 2>&1
echo "# mesh round done at $(($(date +%s) - t0)) s" >>"$out/mesh.txt"
tar -C /tmp -czf "$out/mesh.tgz" mesh

L=bin/longca
STEP_TIMEOUT=75 sh kernels/cuda/gpu.sh "$out/k" test sm90q 'TestMasks|TestWindows|TestDeterministic|TestOddLengths' >/dev/null 2>&1
ok=$?
grep -h 'deterministic: dq' "$out/k/test-sm90q.log" | head -1 >>"$out/k/summary.txt"
masks=full,causal,causal_document,sliding_window_causal
common="--seqlens 16K --heads 64:8 --passes bwd -w 3 -n 10"
vs="sm90"
[ "$ok" = 0 ] && vs="sm90 sm90q"
for v in $vs; do
	timeout 60 $L kernel --kernels cuda --variant "$v" --masks $masks $common --out "$out/k/run-$v" >"$out/k/time-$v.log" 2>&1
	echo "# kernel $v rc=$? at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
done
timeout 60 $L kernel --kernels cudnn --masks $masks $common --out "$out/k/run-cudnn" >"$out/k/time-cudnn.log" 2>&1
echo "# kernel cudnn rc=$? at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
tar -C "$out" -czf "$out/kernel.tgz" k

OVH_METHODS=${OVH_METHODS:-ring-allgather,ulysses,ring-p2p,usp} OVH_TIMEOUT=${OVH_TIMEOUT:-110} sh spmd/cp/overhead.sh /tmp/ovh >"$out/overhead.txt" 2>&1
echo "# overhead done at $(($(date +%s) - t0)) s" >>"$out/overhead.txt"
tar -C /tmp -czf "$out/overhead.tgz" ovh

echo "=== CP mesh round (cuda, 8 ranks)"
sed -n '/^# ---- balanced.s own choice/,$p' "$out/mesh.txt" | tail -30
echo "=== kernel backward, 16K, 64:8, d128 (mask pass TFLOP/s)"
for f in "$out"/k/time-*.log; do
	echo "## $(basename "$f" .log)"
	grep -E '^  [a-z_]+ +[0-9]' "$f" | awk '{printf "%-24s %-4s", $1, $4; for (i = 7; i <= NF; i++) printf " %s", $i; printf "\n"}' | head -8
done
cat "$out/k/summary.txt"
echo "=== one rank, NCCL"
tail -10 "$out/overhead.txt"
