#!/bin/sh
# Call 54 (prepared 2026-12-04, seventh session; not yet run): sm90 with the backward's pairs
# within documents by docPairsPay (written after call 53 on the CPU; the kernel is the one
# sm90dp's tests checked in call 53, only the host's plan is new).
# 1. sm90's GPU tests (every mask, d64 and d128, fwd and bwd, the deterministic repeat);
# 2. the d128 backward on the document masks, 16K / 32K / 48K, interleaved:
#    sm90 (by the rule) / sm90np (never pairs) / sm90dp (always within documents) / cudnn / sm90.
#    Prediction (docs/perf.md "Call 53"): sm90 = sm90dp where the rule pairs (causal_document
#    32K / 48K +6 / +12% over sm90np, prefix_lm_document and causal_document_long 48K +10%,
#    share_question 48K +1%), = sm90np where it does not (16K everywhere, full_document);
#    the unmeasured cells it pairs: prefix_lm_document 32K +4 to +7% (like causal_document's),
#    block_causal_document 32K -2 to +1%.
# 3. experiment sm90ff (the backward's front: a block starts its walk where the last block
#    on its row stepped): its GPU tests, then sm90 / sm90ff / sm90kr / sm90ff / sm90 on the
#    unpaired masks at 32K and 48K, and ncu's DRAM bytes of one full 48K backward, sm90ff.
#    Prediction (the L2 model, kernels/cuda/l2model.go): if full 48K's unpaired blocks read
#    ~200 GB (speeds 2% apart; call 52's ncu tells), sm90ff reads ~15 GB and runs +3 to +6%
#    at 48K (full 0.97x cuDNN -> 1.0-1.03), +1 to +2% at 32K, full_document 48K +2 to +4%;
#    if they read ~13 GB, level there. prefix_lm_causal 48K (the prefix's full rows share a
#    front; 148 GB modelled -> 17, and 109 -> 14 at 0.5% spread): +3 to +5% either way (1.25x
#    Flex -> 1.30); causal_blockwise and the window level (no shared rows under the rule's
#    order). sm90kr (the rotation) between: 45 GB modelled on full 48K, 54 on
#    prefix_lm_causal 48K.
# Bounded to 480 s; the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call54.sh OUT      (carry bin/longca.gz bin/cuda.test.gz; 480 s)
set -u
out=${1:?usage: call54.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-480} longca cuda.test || exit 1
gpu_tests sm90 110
gpu_tests sm90ff 110
runs="sm90 sm90np sm90dp cudnn sm90"
n=0
for v in $runs; do
	sel="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	masks=causal_document,full_document,prefix_lm_document,block_causal_document,causal_document_long,share_question
	[ "$v" = cudnn ] && masks=causal_document,full_document
	step "d-$n-$v" 40 kernel $sel --masks $masks --seqlens 16K,32K,48K --passes bwd -w 2 -n 5
	n=$((n + 1))
done
n=0
for v in sm90 sm90ff sm90kr sm90ff sm90; do
	step "f-$n-$v" 40 kernel --kernels cuda --variant $v --masks full,full_document,prefix_lm_causal,causal_blockwise,sliding_window_causal --seqlens 32K,48K --passes bwd -w 2 -n 5
	n=$((n + 1))
done
ncu_mem sm90ff full 48K
cat "$out/t/summary.txt"
echo "=== d128 backward TFLOP/s: mask seqlen, then" $runs
join_runs d $runs
echo "=== the front, d128 backward TFLOP/s: mask seqlen, then sm90 sm90ff sm90kr sm90ff sm90"
join_runs f sm90 sm90ff sm90kr sm90ff sm90
echo "=== sm90ff, one full 48K backward: DRAM read / write, L2 hit rate, time"
mem_table
echo "=== the rows' variants (doc-pairs-bwd where sm90 paired within documents)"
bin/longca merge --csv "$out/t/d-0-sm90" >/dev/null 2>&1 &&
	python3 -c 'import csv,sys; r=list(csv.DictReader(open(sys.argv[1]))); [print(x["mask"], x["seqlen"], x["kernel_variant"]) for x in r]' "$out/t/d-0-sm90/merged.csv"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
