#!/bin/sh
# Call 104 (prepared 2026-12-06, twenty-ninth session; not yet run): any card.
# 1. sm90kl (the d64 forward KV-major where the launch's K and V take 24 MiB or more: 64:8
#    from 12K keys; LONGCA_FWD_KVMAJOR64_LONG): its forward GPU tests (the forward's entries,
#    every mask, windows, odd lengths and fp16, the d64 groups). Prediction: they pass (the
#    order only renumbers the items; sm90kv64's passed in call 99).
# 2. f: sm90 sm90kl sm90 sm90kl, d64 full and causal forward 8K-48K. Prediction: 8K level
#    (within 0.5%: the same code and order there), 16K-48K +1 to +3% (call 99's sm90kv64:
#    +2.3 / +1.2 / +1.2% at full 16K / 24K / 32K), causal as full or less.
# 3. o: the same four processes on the other ten masks at 16K and 32K (every one KV-major
#    under sm90kl). Prediction: level to +2% on the long-row masks (prefix_lm_causal,
#    causal_blockwise at 32K, sliding_window, global_sliding_window), -1 to +1% on the
#    documents and windows whose blocks read only nearby keys (their working set fits L2 in
#    either order). Promotion if the geomean over f's 16K-48K and o's cells is positive and
#    no cell is below -1%.
# 4. m: ncu, sm90kl's d64 full 16K forward: DRAM bytes read and L2 hit rate. Prediction:
#    under 0.4 GB (sm90 1.54 GB, cuDNN 0.17), hit rate above 95%.
# 5. p: the d128 persistence rule with the counter, 16K and 32K (persist-rule.sh,
#    sm90-persist against sm90-plain). The rule (persistent below 32 tiles a row) was fitted
#    against the static walk; prediction: with the counter persistent is level or ahead
#    (0 to +4%) up to about 48 tiles a row, behind (-1 to -5%) on full and causal at 32K
#    (128 x 176 wide tiles when not persistent).
# Bounded to 560 s (BUDGET); tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call104.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call104.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-560} longca cuda.test || exit 1
warm sm90 &
warm sm90kl &
wait
warm sm90-persist &
warm sm90-plain &
GPU_TESTS='TestForwardEntries64|TestMasks|TestWindows|TestOddLengthsAndFP16|TestHeadDim64Groups' gpu_tests sm90kl 90
wait
interleave f 45 "sm90 sm90kl sm90 sm90kl" --masks full,causal --head-dim 64 --seqlens 8K,16K,24K,32K,48K --passes fwd -w 3 -n 10
others=sliding_window,sliding_window_causal,full_document,causal_document,share_question,causal_blockwise,prefix_lm_causal,prefix_lm_document,global_sliding_window,block_causal_document
interleave o 45 "sm90 sm90kl sm90 sm90kl" --masks $others --head-dim 64 --seqlens 16K,32K --passes fwd -w 3 -n 8
NCU_PASS=fwd NCU_DIM=64 ncu_one mem-kl "$MEM_METRICS" sm90kl full 16K 40
left=$((budget - ($(date +%s) - t0)))
if [ "$left" -gt 150 ]; then
	PERSIST_SEQLENS="16K 32K" sh scripts/device/persist-rule.sh "$out/t/p" >"$out/t/p.table" 2>&1
	echo "# persist-rule 16K 32K done at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
else
	echo "# persist-rule skipped ($left s left)" >>"$out/t/summary.txt"
fi
cat "$out/t/summary.txt"
table f "d64 forward TFLOP/s, full and causal" sm90kl/sm90 sm90 sm90kl sm90 sm90kl
geo_line "$out/t/f.table" "sm90kl / sm90, full and causal"
table o "d64 forward TFLOP/s, the other masks" sm90kl/sm90 sm90 sm90kl sm90 sm90kl
geo_line "$out/t/o.table" "sm90kl / sm90, the other masks"
echo "=== m: sm90kl's d64 full 16K forward (ncu; call 99: sm90 1.54 GB at 84%, cuDNN 0.17 GB at 99%)"
mem_table
echo "=== p: the d128 persistence rule with the counter"
cat "$out/t/p.table" 2>/dev/null | tail -30
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
