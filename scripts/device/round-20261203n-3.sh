#!/bin/sh
# Third call of the session of 2026-12-03 (night): sm90 with call 13's backward (dQ in
# fragment order; the key tiles of a head together on uniform masks, heaviest first
# otherwise) as the default. From the repository root with bin/longca.gz and
# bin/cuda.test.gz carried:
#   sh scripts/device/round-20261203n-3.sh OUT
# 1. the GPU tests its parts did not pass in call 13 as sm90fk/sm90fn (per-head masks,
#    long rows, the support table), bounded to 45 s;
# 2. `longca run --suite gpu` (scripts/device/run-final.sh), stopped at 585 s into the call.
set -u
out=${1:?usage: round-20261203n-3.sh OUT}
mkdir -p "$out/k"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
for f in longca cuda.test; do
	[ -f "bin/$f.gz" ] && gunzip -c "bin/$f.gz" >"bin/$f" && chmod +x "bin/$f"
done
t0=$(date +%s)
STEP_TIMEOUT=45 sh kernels/cuda/gpu.sh "$out/k" test sm90 'TestCompile|TestHeadMasks|TestLongRows|TestSupports' >/dev/null 2>&1
cat "$out/k/summary.txt"
tar -C "$out" -czf "$out/tests.tgz" k && rm -rf "$out/k"
sh scripts/device/run-final.sh "$out" $((585 - ($(date +%s) - t0)))
gzip -f "$out/run.log"
ls "$out"
