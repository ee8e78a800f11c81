#!/bin/sh
# Call 53 (prepared 2026-12-04, sixth session; not yet run): experiment sm90dp, the backward's
# key tiles paired within documents (endAlignedPairs: two tiles whose walks end at the same
# query tile, heaviest with lightest, the key tiles of a head together) wherever the rows
# vary at head dim 128. The L2 model: causal_document 16K / 32K / 48K 9.0 / 28 / 68 GB read
# from DRAM by the rule's order -> 1.9 / 5.3 / 8.5 paired, its modelled pass 17% longer at
# 16K (the tail), 7% at 32K, level at 48K. Prediction: causal_document and
# prefix_lm_document +3 to +8% at 32K-48K, -5 to +2% at 16K; causal as sm90 (the same pairs).
# 1. sm90dp's GPU tests (every mask, d64 and d128, fwd and bwd, the deterministic repeat);
# 2. the d128 backward, 16K-48K, on the masks whose rows vary: sm90dp / sm90 / cudnn / sm90dp;
# 3. DRAM bytes of one causal_document 32K backward, sm90dp (sm90's: call 52).
# Bounded to 330 s; the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call53.sh OUT
set -u
out=${1:?usage: call53.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-330} longca cuda.test || exit 1
gpu_tests sm90dp 110
runs="sm90dp sm90 cudnn sm90dp"
n=0 m=0
for v in $runs; do
	sel="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	step "d128-$n-$v" 50 kernel $sel --masks causal,causal_document,full_document --seqlens 16K,32K,48K --passes bwd -w 3 -n 10
	if [ "$v" != cudnn ]; then
		step "x-$m-$v" 40 kernel $sel --masks prefix_lm_document,causal_document_long,block_causal_document,prefix_lm_causal,share_question --seqlens 16K,48K --passes bwd -w 2 -n 5
		m=$((m + 1))
	fi
	n=$((n + 1))
done
ncu_mem sm90dp causal_document 32K
cat "$out/t/summary.txt"
echo "=== d128 backward TFLOP/s: mask seqlen, then" $runs
join_runs d128 $runs
echo "=== the other masks whose rows vary: sm90dp sm90 sm90dp"
join_runs x sm90dp sm90 sm90dp
echo "=== sm90dp, one causal_document 32K backward: DRAM read / write, L2 hit rate, time"
mem_table
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
