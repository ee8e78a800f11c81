#!/bin/sh
# The CP part of the session's last device calls (issue 20), from the repository root with
# bin/cp-device.tgz carried (make cp-device: longca and the CP GPU checks):
#   sh scripts/device/cp-final.sh OUT
# 1. spmd/cp/overhead.sh: one rank through NCCL under mpirun, every method x the 4 CP
#    masks x fwd,bwd at 8K tokens, checked, with the kernel alone (OVH_TIMEOUT, default here
#    150 s: with the 250 ms settle, call 98a's 110 s stopped after 22 of its 48 rows);
# 2. spmd/cp/balanced_gpu.sh: 8 ranks on one GPU, the six methods x 4 CP masks x fwd,bwd at
#    8K tokens per rank, checked, --overlap --baseline measure, --kernel cuda then cudnn
#    (bounded: CP_BUDGET, default here 370 s, the cuda pass CP_CUDA_TIME 250 s of it: call 98a's
#    cuda pass took 235 s for its 48 rows; with 420 s the call ended 1 s short of the 600 s limit),
#    cut to what CP_TOTAL (default 570 s) leaves after step 1.
# Tables last; each step's logs and merged rows packed as OUT/cp-final.tgz.
set -u
out=${1:?usage: cp-final.sh OUT}
mkdir -p "$out"
if [ ! -x bin/longca ] && [ -f bin/cp-device.tgz ]; then
	tar -C bin -xzf bin/cp-device.tgz || exit 1
fi
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
t0=$(date +%s)
# (each status is taken on its own line: under bash, a $(...) earlier in the echo's word resets $?)
OVH_TIMEOUT=${OVH_TIMEOUT:-150} sh spmd/cp/overhead.sh "$out/ovh" >"$out/ovh.txt" 2>&1
rc=$?
echo "# [$(($(date +%s) - t0)) s] overhead.sh rc=$rc"
# the CP step gets what the call has left (CP_TOTAL, default 570 s, less 15 s for the pack):
# the one-rank step can take 80 s past OVH_TIMEOUT (mpirun's start, the first compile), and a
# call that ran past the device's 600 s lost its pack (thirty-eighth session, call A)
budget=${CP_BUDGET:-370}
left=$((${CP_TOTAL:-570} - ($(date +%s) - t0) - 15))
[ "$left" -lt "$budget" ] && budget=$left
[ "$budget" -lt 1 ] && budget=1
echo "# CP budget ${budget} s"
CP_BUDGET=$budget CP_CUDA_TIME=${CP_CUDA_TIME:-250} sh spmd/cp/balanced_gpu.sh "$out/bal" >"$out/bal.txt" 2>&1
rc=$?
echo "# [$(($(date +%s) - t0)) s] balanced_gpu.sh rc=$rc"
tar -C "$out" -czf "$out/cp-final.tgz" ovh bal ovh.txt bal.txt 2>/dev/null
rm -rf "$out/ovh" "$out/bal"
echo "=== one rank through NCCL (overhead.sh), last lines"
tail -30 "$out/ovh.txt"
echo "=== 8 ranks on one GPU (balanced_gpu.sh), last lines"
tail -45 "$out/bal.txt"
