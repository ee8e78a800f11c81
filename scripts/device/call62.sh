#!/bin/sh
# RAN 2026-12-05 on an H100 at ada1f67 (docs/perf.md "Calls 61-63 on an H100"); its experiments
# were promoted into sm90 or removed since (32497d1, 4fdd6ad): to rerun it, check out ada1f67.
# Call 62 (prepared 2026-12-05, twelfth session, with no device lent; not yet run):
# experiment sm90n, the head-dim-128 forward over 128 x 176 tiles where it is not
# persistent (long rows: full, causal, prefix_lm_causal, global_sliding_window, the long
# documents), FlashAttention-3's tile at head dim 128 without a causal mask: a turn's
# products 1.375x as long (1,408 tensor clocks a warpgroup against 1,024) for the same
# hand-over, row-maximum shuffles and rescale, so that one warpgroup's softmax (about 700
# MUFU clocks and 300 of fixed latency a tile) fits under the other's products with room
# to spare. Offline (ptxas 12.4): fwd90n 2,784 instructions, no spill, 38 HGMMA (S by
# 64x176x16), sm90's 68 functions byte-identical to before.
# 1. the GPU tests of sm90n-plain (sm90n never persistent: its wide forward serves every
#    head-dim-128 forward of the tests, every mask, odd lengths, fp16, CP windows, block-
#    sparse maps; fwd and bwd against the CPU reference), sm90 and sm90n compiled
#    meanwhile;
# 2. the d128 forward, 64:8, checked: cudnn / sm90 / sm90n-plain, twice, on full, causal,
#    full_document, prefix_lm_causal, global_sliding_window at 8K / 16K / 32K / 48K.
#    sm90n-plain, not sm90n: on 19 of these 20 cells sm90n's rule takes the wide forward,
#    never persistent, which is sm90n-plain's code, and sm90n-plain's module is sm90n's
#    (the same defines); on the 20th, full_document 16K (0.965x cuDNN in the eleventh
#    session; persistent, so sm90n runs sm90's code there), sm90n-plain times the other side
#    of the rule, the wide forward not persistent, at no cost;
# 3. which rows ran wide (the rows' kernel_variant: "wide-fwd");
# 4. ncu's SASS pages of single forward launches: cuDNN's at head dim 64 (full 16K) and 128
#    (full 32K), sm90's and sm90n's at 128 (full 32K), their executed instructions by opcode
#    (op_mix) beside call 60's of sm90's d64 forward (7.29 thread instructions a score: FMNMX
#    1.10, FADD 1.06, FFMA 1.04, MUFU.EX2 1.04, F2FP 0.51, uniform-datapath 1.23): what cuDNN
#    spends a score at d64, where sm90 is 0.90-0.95x on the 8K-16K rows, and its tile (the
#    shape of its HGMMA).
# Prediction (docs/perf.md "Next: call 62"): sm90n (sm90n-plain's rows where its rule takes
# the wide forward) +2 to +5% on full, +1 to +4% on causal
# and prefix_lm_causal (less at 8K, where 6.8% of causal's wide tiles are partial against
# 3.1%), full_document and global_sliding_window -2 to +3%; persistent cells unchanged (the
# same code).
# Bounded to 560 s; the tables last; logs packed as OUT/t.tgz. LEAN=1 (about 250 s) times
# the rows once, without the GPU tests or ncu.
#   sh scripts/device/call62.sh OUT      (carry bin/longca.gz bin/cuda.test.gz; the call's timeout 600)
set -u
out=${1:?usage: call62.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-560} longca cuda.test || exit 1
runs="cudnn sm90 sm90n-plain cudnn sm90 sm90n-plain"
if [ "${LEAN:-0}" = 1 ]; then
	# LEAN=1: a short device window (about 250 s): the rows once, each checked against the
	# CPU reference as every kernel row is; no GPU tests (a promotion needs them after),
	# no ncu. MASKS narrows the masks (full,causal for about 150 s).
	runs="cudnn sm90 sm90n-plain"
	warm sm90 & warm sm90n-plain & wait
	interleave n 60 "$runs" --masks "${MASKS:-full,causal,full_document,prefix_lm_causal,global_sliding_window}" --seqlens 8K,16K,32K,48K --passes fwd -w 2 -n 5
else
	warm sm90 &
	warm sm90n &
	gpu_tests sm90n-plain 200
	wait
	interleave n 50 "$runs" --masks full,causal,full_document,prefix_lm_causal,global_sliding_window --seqlens 8K,16K,32K,48K --passes fwd -w 2 -n 5
	ncu_sass cudnn full 16K 64
	ncu_sass cudnn full 32K 128
	ncu_sass sm90 full 32K 128
	ncu_sass sm90n full 32K 128
fi
cat "$out/t/summary.txt"
[ "${LEAN:-0}" = 1 ] || for f in cudnn-full-16K-fwd-d64:17179869184 cudnn-full-32K-fwd:68719476736 sm90-full-32K-fwd:68719476736 sm90n-full-32K-fwd:68719476736; do
	echo "=== executed instructions by opcode, ${f%%:*} (thread instructions a score last)"
	op_mix "$out/t/ncu-sass-${f%%:*}.log" "${f##*:}"
done
echo "=== which sm90n-plain rows ran wide (all should)"
row_variants n-2-sm90n-plain
table n "d128 forward TFLOP/s" "sm90/cudnn sm90n-plain/cudnn sm90n-plain/sm90" $runs
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
