#!/bin/sh
# RAN 2026-12-05 on an H100 at ada1f67 (docs/perf.md "Calls 61-63 on an H100"); its experiments
# were promoted into sm90 or removed since (32497d1, 4fdd6ad): to rerun it, check out ada1f67.
# Call 63 (prepared 2026-12-05, twelfth session, with no device lent; not yet run):
# experiments sm90p and sm90pr, the head-dim-64 forward over 192 x 192 tiles with each
# consumer warpgroup's P stored by stmatrix and read by P V's wgmma from shared memory
# (FlashAttention-3's tile at head dim 64 without a causal mask: freeing P's 48 registers a
# thread lets the three consumer warpgroups hold 96 scores a thread within their 160), and
# the same with the entries read a turn ahead (sm90fr's LONGCA_FWD_RA). Offline (ptxas 12.4):
# fwd90q 2,808 instructions, 12 STSM a tile, no serialised wgmma, 44 bytes of spill (10 local
# loads and stores a tile in the loop; 5 with LONGCA_FWD_RA); sm90's 68 functions
# byte-identical. The 192 x 192 lists visit 0.993-1.008x the keys of the 192 x 128 ones on
# full and causal (square tiles follow causal's diagonal), 0.97-1.03x on the documents.
# 1. sm90p-all's GPU tests (sm90p with 192 x 192 tiles whatever keys they visit: every mask at
#    head dim 64 with the persistent entry fwd90qp on the short tests, fwd90q on TestLongRows'
#    full and causal 8K), sm90, sm90p and sm90pr compiled meanwhile (sm90p's module is
#    sm90p-all's);
# 2. the d64 forward, 64:8, checked: cudnn / sm90 / sm90p / sm90pr, twice, on full, causal,
#    full_document, causal_document at 8K / 16K / 32K / 48K (192 x 192 tiles where they visit
#    at most 3% more keys than 192 x 128: every one of these cells; rows say psm-fwd).
# Prediction (docs/perf.md "Next: call 63"): sm90p +3 to +8% on full and causal at 8K-16K
# (0.90-0.95x cuDNN there), +1 to +5% at 32K-48K, the documents -3 to +3%; sm90pr a further
# 0 to +2% (fewer spills, the entries read ahead).
# Bounded to 480 s; the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call63.sh OUT      (carry bin/longca.gz bin/cuda.test.gz; the call's timeout 600)
set -u
out=${1:?usage: call63.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-480} longca cuda.test || exit 1
warm sm90 &
warm sm90pr &
gpu_tests sm90p-all 200
wait
runs="cudnn sm90 sm90p sm90pr cudnn sm90 sm90p sm90pr"
interleave p 35 "$runs" --head-dim 64 --masks full,causal,full_document,causal_document --seqlens 8K,16K,32K,48K --passes fwd -w 2 -n 5
cat "$out/t/summary.txt"
echo "=== which sm90p rows ran over 192 x 192 tiles (psm-fwd)"
row_variants p-2-sm90p
table p "d64 forward TFLOP/s" "sm90/cudnn sm90p/cudnn sm90pr/cudnn sm90p/sm90 sm90pr/sm90 sm90pr/sm90p" $runs
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
