#!/bin/sh
# Call 100 (prepared 2026-12-06, twenty-seventh session; not yet run): any card. The promotion
# check of a d64 forward experiment that won its goal cells in call99.sh (sm90ts, sm90tp or
# sm90kv64): VARIANT against sm90 on every mask, as call 98d did sm90dy before its promotion.
# 1. VARIANT's whole GPU test list (kernels/cuda/gpu_test.go), so that a promotion rests on
#    every check the default passes (call 98g: 242 checks);
# 2. four processes interleaved, sm90 VARIANT sm90 VARIANT, d64 forward, the 12 masks at 8K /
#    16K / 32K, settled (the default), checked; then each cell's VARIANT / sm90 (the means of
#    the pairs) and their geomean, lowest and highest.
# Promotion rule (docs/perf.md): the tests pass, the geomean gains, no cell loses 1%.
# Bounded to 420 s (BUDGET); tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call100.sh OUT VARIANT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call100.sh OUT VARIANT}
v=${2:?usage: call100.sh OUT VARIANT}
. scripts/device/lib.sh
call_start ${BUDGET:-420} longca cuda.test || exit 1
warm sm90 &
warm "$v" &
wait
gpu_tests "$v" 200
interleave p 60 "sm90 $v sm90 $v" --masks all --head-dim 64 --seqlens 8K,16K,32K --passes fwd -w 3 -n 8
cat "$out/t/summary.txt"
table p "d64 forward TFLOP/s, settled, 12 masks" "$v/sm90" sm90 "$v" sm90 "$v"
geo_line "$out/t/p.table" "$v / sm90"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
