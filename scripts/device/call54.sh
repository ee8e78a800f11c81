#!/bin/sh
# Call 54 (prepared 2026-12-04, seventh session, rewritten in the eighth; not yet run): two
# experiments on the d128 backward's DRAM traffic, both designed with the L2 model
# (kernels/cuda/l2model.go), beside sm90 with the document pairs' rule (docPairsPay, written
# after call 53: the kernel is the one sm90dp's tests checked, only the host's plan is new).
#   sm90ff: an unpaired block starts its walk where the last block on its row stepped
#           (sched bit 2, the front).
#   sm90g2: the group split at head dim 128 too, always 2 parts, a head's key tiles together
#           (a block walks 4 of a KV head's 8 query heads: half the tiles in flight).
#   sm90fk: a head's key tiles together without the split (what the split adds to the order).
#   sm90-unp: sm90 compiled without the pairs' code (does that code cost unpaired blocks?
#           call 51's full 0.96-1.00x cuDNN against call 45's 0.99-1.00; call 52's question).
# 1. sm90ff's and sm90g2's GPU tests (every mask, d64 and d128, fwd and bwd, deterministic);
# 2. the d128 backward, interleaved, sm90 / sm90ff / sm90g2 / sm90fk / sm90 / sm90ff / sm90g2
#    on full, full_document, prefix_lm_causal, causal_blockwise, causal, share_question,
#    causal_document at 16K / 32K / 48K; sm90-unp / sm90 / sm90-unp on full and full_document;
# 3. ncu's DRAM bytes of one backward: sm90 and sm90ff full 48K (the model: 218 GB at 2% speed
#    spread, 12.7 at 0.5%; 15.5 with the front), sm90 and sm90g2 causal_blockwise 32K (44 and
#    3.9 modelled), sm90 and sm90g2 causal 48K (paired: 58 unsplit, 16 split).
# Prediction (the model's bytes and tails with call 53's fit, time = 0.9 x tail + 0.4 x DRAM
# time saved; docs/perf.md "Next: call 54"):
#   sm90ff: full 48K +4.5% (if the spread is 2%; level at 0.5%), prefix_lm_causal 48K +4.6%,
#     full_document 48K +1.5%, full 32K +0.7%; every paired cell (causal, the documents' pairs)
#     identical (the front is off there).
#   sm90g2: full 48K +5%, prefix_lm_causal 16K / 48K +2 / +5%, causal_blockwise 16K / 32K /
#     48K +3 / +4 / +1%, causal 48K +1.6%, share_question 48K +2%, causal_document 16K / 32K
#     +1.5%; losses where the half-length blocks' tail grows: share_question 16K / 32K -8 / -4%.
#   sm90fk: between sm90 and sm90g2 on causal_blockwise 32K (44 -> 24 GB), level elsewhere.
#   sm90-unp: level within 1% (if it leads by 2% or more on full, the pairs get their own
#     entry point).
# Bounded to 540 s; the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call54.sh OUT      (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call54.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-540} longca cuda.test || exit 1
gpu_tests sm90ff 125
gpu_tests sm90g2 125
runs="sm90 sm90ff sm90g2 sm90fk sm90 sm90ff sm90g2"
n=0
for v in $runs; do
	step "f-$n-$v" 45 kernel --kernels cuda --variant $v --masks full,full_document,prefix_lm_causal,causal_blockwise,causal,share_question,causal_document --seqlens 16K,32K,48K --passes bwd -w 2 -n 5
	n=$((n + 1))
done
n=0
for v in sm90-unp sm90 sm90-unp; do
	step "u-$n-$v" 25 kernel --kernels cuda --variant $v --masks full,full_document --seqlens 16K,32K,48K --passes bwd -w 2 -n 5
	n=$((n + 1))
done
ncu_mem sm90 full 48K
ncu_mem sm90ff full 48K
ncu_mem sm90 causal_blockwise 32K
ncu_mem sm90g2 causal_blockwise 32K
ncu_mem sm90 causal 48K
ncu_mem sm90g2 causal 48K
cat "$out/t/summary.txt"
echo "=== d128 backward TFLOP/s: mask seqlen, then" $runs
join_runs f $runs >"$out/t/f.table"
cat "$out/t/f.table"
echo "=== each experiment over sm90 (the mean of its runs over the mean of sm90's two)"
compare "$out/t/f.table" "sm90ff/sm90 sm90g2/sm90 sm90fk/sm90" $runs
echo "=== the pairs' code, d128 backward TFLOP/s: mask seqlen, then sm90-unp sm90 sm90-unp"
join_runs u sm90-unp sm90 sm90-unp
echo "=== one d128 backward launch: DRAM read / write, L2 hit rate, time"
mem_table
echo "=== the rows' variants (sm90, sm90ff, sm90g2: front-bwd, gsplit-2, pairs-bwd, doc-pairs-bwd)"
row_variants f-0-sm90 f-1-sm90ff f-2-sm90g2
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
