#!/bin/sh
# Call 52 (prepared 2026-12-04, sixth session; not yet run): does the key-tile pairs' code
# cost the blocks it leaves unpaired? Call 51's `longca run` had full's d128 backward at
# 0.96-1.00x cuDNN where call 45's had 0.99-1.00 (different calls; sm90np, the same code
# never pairing, measured level with sm90 on full in call 50). Interleaved, 64:8, checked,
# the backward at d128 on the five masks cuDNN runs whole and at d64 on four, 8K-48K:
#   sm90 (pairs by rule) / c47 (commit 0f6a536's sm90, bin/longca-c47) / sm90-unp (compiled
#   without the pairs) / cudnn / sm90 / c47
# Prediction: level within 1% on every unpaired cell (full, the documents, the window, d64);
# if c47 or sm90-unp leads by 2% or more, the pairs move to their own entry point.
# Needs bin/longca-c47.gz (sh scripts/device/build-c47.sh) carried beside bin/longca.gz.
# Bounded to 480 s; the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call52.sh OUT
set -u
out=${1:?usage: call52.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-480} longca longca-c47 || exit 1
runs="sm90 c47 sm90-unp cudnn sm90 c47"
n=0
for v in $runs; do
	sel="--kernels cuda --variant $v" bin=bin/longca
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	[ "$v" = c47 ] && sel="--kernels cuda --variant sm90" bin=bin/longca-c47
	LONGCA_BIN=$bin step "d128-$n-$v" 60 kernel $sel --masks full,causal,full_document,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K --passes bwd -w 3 -n 10
	LONGCA_BIN=$bin step "d64-$n-$v" 30 kernel $sel --head-dim 64 --masks full,causal,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K --passes bwd -w 3 -n 10
	n=$((n + 1))
done
# 2. the order against the L2 model on the masks below 1.3x Flex or 1.0x cuDNN: sm90 (the
#    balance rule), sm90fk (a head's key tiles together: the model's fewer DRAM bytes, e.g.
#    share_question 48K 86 GB against 141) and sm90fn, backward d128 at 16K and 48K
n=0
for v in sm90 sm90fk sm90fn; do
	LONGCA_BIN=bin/longca step "o-$n-$v" 40 kernel --kernels cuda --variant $v --masks causal_document,share_question,prefix_lm_causal,prefix_lm_document,causal_blockwise --seqlens 16K,48K --passes bwd -w 2 -n 5
	n=$((n + 1))
done
#    (full's rotation, sm90kr, moved to call54.sh beside sm90ff's front)
# 3. DRAM bytes of one backward launch where the L2 model (kernels/cuda/l2model.go) is not yet
#    calibrated: full 32K and 48K (modelled 20.6 and 219 GB read with blocks' speeds within
#    2%, 6.3 and 12.7 within 0.5%: which is it?), cuDNN's full 48K, causal_document 32K,
#    prefix_lm_causal 48K (Flex 1.25x)
NCU_PASS=bwd ncu_mem sm90 full 32K
ncu_mem sm90 full 48K
ncu_mem cudnn full 48K
ncu_mem sm90np causal_document 32K
ncu_mem sm90 prefix_lm_causal 48K
# causal 48K paired: the L2 model says 58 GB (32K: 5.9 modelled, 5.15 measured), a cliff
ncu_mem sm90 causal 48K
# the forward's traffic, never measured: causal 32K, cuda and cuDNN
NCU_PASS=fwd ncu_mem sm90 causal 32K
NCU_PASS=fwd ncu_mem cudnn causal 32K
cat "$out/t/summary.txt"
for d in d128 d64; do
	echo "=== $d backward TFLOP/s: mask seqlen, then" $runs
	join_runs $d $runs
done
echo "=== the order, d128 backward TFLOP/s: mask seqlen, then sm90 sm90fk sm90fn"
join_runs o sm90 sm90fk sm90fn
echo "=== one backward launch, d128: DRAM read / write, L2 hit rate, time"
mem_table
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
