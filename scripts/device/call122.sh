#!/bin/sh
# Call 122 (prepared 2026-12-07, forty-third session): sm90ru, the forward's K/V ring positions
# on unsigned values and each stage's K and V descriptors one add from stage 0's
# (LONGCA_FWD_RING_U). Offline (ptxas 12.4) fwd90mopd's overlapped loop goes 715 -> 711
# instructions a tile (uniform 95 -> 91): ptxas rematerialises the loop-invariant descriptor
# bases each tile under uniform-register pressure, so most of the 1.36 uniform and integer
# instructions a score of call 99 stay. Any card.
# 1. sm90ru's forward GPU tests (every mask, both head dims, fp16, the entries forced);
# 2. d64 full and causal 8K-32K forward, sm90 / sm90ru / cudnn twice each, interleaved,
#    settled (-w 3 -n 10); 3. d128 full and causal 8K-16K forward, sm90 / sm90ru twice each.
# Prediction (before any run): sm90ru over sm90 at d64 -0.5 to +1.0% a cell (4 of about 480
# instructions a warp's tile executed), d128 level (+-0.5%). Promotion rule (written before):
# the d64 geomean +0.5% or more, no d64 or d128 cell below -1%, the d128 geomean -0.2% or more;
# else removed and recorded.
#   sh scripts/device/call122.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call122.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-330} longca cuda.test || exit 1
warm sm90 &
warm sm90ru &
wait
GPU_TESTS='TestMasks|TestOddLengthsAndFP16|TestHeadDim64Groups|TestWindows|TestLongRows|TestForwardEntries64|TestForwardEntries128' gpu_tests sm90ru 120
interleave e 40 "sm90 sm90ru cudnn sm90 sm90ru cudnn" --masks full,causal --head-dim 64 --seqlens 8K,16K,32K --passes fwd -w 3 -n 10
interleave d 30 "sm90 sm90ru sm90 sm90ru" --masks full,causal --head-dim 128 --seqlens 8K,16K --passes fwd -w 3 -n 10
cat "$out/t/summary.txt"
table e "d64 forward TFLOP/s, settled" sm90ru/sm90 sm90 sm90ru cudnn sm90 sm90ru cudnn
table d "d128 forward TFLOP/s, settled" sm90ru/sm90 sm90 sm90ru sm90 sm90ru
python3 - "$out/t/e.table" "$out/t/d.table" <<'PY'
import math, sys
for path, cols in ((sys.argv[1], (2, 3, 5, 6, 4, 7)), (sys.argv[2], (2, 3, 4, 5, None, None))):
    g, rc, ru = [], [], []
    for l in open(path):
        f = l.split()
        try:
            a, b, c, d = (float(f[i]) for i in cols[:4])
        except (ValueError, IndexError):
            continue
        r = ((b + d) / 2) / ((a + c) / 2)
        g.append(r)
        if cols[4] is not None:
            try:
                cu = (float(f[cols[4]]) + float(f[cols[5]])) / 2
                print("# %s %s: sm90 %.3f, sm90ru %.3f of cudnn; sm90ru/sm90 %+.2f%%" % (f[0], f[1], (a + c) / 2 / cu, (b + d) / 2 / cu, 100 * (r - 1)))
            except (ValueError, IndexError):
                pass
    if g:
        print("# %s sm90ru / sm90 over %d cells: geomean %+.2f%%, lowest %+.2f%%, highest %+.2f%%" % (
            path.split("/")[-1], len(g), 100 * (math.exp(sum(map(math.log, g)) / len(g)) - 1), 100 * (min(g) - 1), 100 * (max(g) - 1)))
PY
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
