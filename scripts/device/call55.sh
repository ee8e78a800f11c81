#!/bin/sh
# Call 55 (prepared 2026-12-05, ninth session; not yet run): the two head-dim-64 designs of
# experiment sm90d64, each its own entry points (a pass's rows time one):
#   the backward at 128 queries a step (bwd90qq: two of the work list's 64-query tiles a step,
#     128-key blocks on two consumer warpgroups; the d128 backward's shape with the head
#     dimension and the step's queries swapped, FlashAttention-3's 128 x 128 at head dim 64);
#   the forward's three consumer warpgroups with the overlap within a turn (fwd90mo: the next
#     tile's softmax under this tile's P V; FlashAttention-3's head-dim-64 forward has both).
# 1. sm90d64's GPU tests (every mask, d64 and d128, fwd and bwd, deterministic;
#    TestHeadDim64Groups: GQA groups at odd lengths and fp16 at d64, where a backward step's
#    two items cross heads and an odd walk's last step is half masked);
# 2. the d64 backward, 64:8, checked: cudnn / sm90 / sm90d64 / sm90fk / sm90be / sm90 / sm90d64 /
#    sm90fk on full, causal, full_document, causal_document, sliding_window_causal at 8K-48K
#    (sm90be: two consumer warpgroups over 128-key blocks at 64 queries a step, sm90d64's
#    blocks: what the step's length alone does; sm90fk: sm90's kernel with a head's key tiles
#    always together, which the L2 model says the order rule should have chosen at d64 on
#    causal 16K-32K and the documents from 32K: full_document 48K 85 -> 3.2 GB);
# 3. the d64 forward, the same masks, cudnn / sm90 / sm90d64 / sm90 / sm90d64;
# 4. ncu's time, instructions and stalls of one full 32K d64 backward and forward launch,
#    sm90 and sm90d64; ncu's DRAM bytes of one d64 backward: full_document 48K sm90 / sm90d64 /
#    sm90fk (the L2 model: 85 / 5.1 / 3.2 GB read), causal 32K sm90 / sm90fk (18.2 / 1.8),
#    causal 48K sm90 / sm90d64 (31 / 5.7).
# Prediction (docs/perf.md "Next: call 55"): backward, sm90d64 over sm90 +4 to +8% on full and
# causal at 16K-48K (0.95 toward 0.99-1.03x cuDNN) if the step's fixed work bounds it, -5 to 0%
# if the third warpgroup's hiding of the elementwise work did, -3 to +5% at 8K, -2 to +4% on the
# documents and the window, over sm90be +8 to +15% on full and causal, instructions a FLOP
# -25 to -35%; forward, sm90d64 over sm90 +0 to +4% on full and causal, +2 to +5% on the
# documents and the window.
# Bounded to 560 s; the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call55.sh OUT      (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call55.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-560} longca cuda.test || exit 1
gpu_tests sm90d64 130
masks=full,causal,full_document,causal_document,sliding_window_causal
bruns="cudnn sm90 sm90d64 sm90fk sm90be sm90 sm90d64 sm90fk"
fruns="cudnn sm90 sm90d64 sm90 sm90d64"
# timed PREFIX PASS CAP N RUN...: the d64 pass over the masks at 8K-48K, a step a run (cudnn,
# or a cuda variant), -n N, each stopped at CAP seconds
timed() {
	_p=$1 _pass=$2 _cap=$3 _n=$4 _i=0
	shift 4
	for _v in "$@"; do
		_sel="--kernels cuda --variant $_v"
		[ "$_v" = cudnn ] && _sel="--kernels cudnn"
		step "$_p-$_i-$_v" $_cap kernel $_sel --head-dim 64 --masks $masks --seqlens 8K,16K,32K,48K --passes $_pass -w 2 -n $_n
		_i=$((_i + 1))
	done
}
timed b bwd 45 5 $bruns
timed f fwd 30 8 $fruns
for v in sm90 sm90d64; do
	NCU_DIM=64 ncu_stall $v full 32K
	NCU_DIM=64 NCU_PASS=fwd ncu_stall $v full 32K
done
for v in sm90 sm90d64 sm90fk; do NCU_DIM=64 ncu_mem $v full_document 48K; done
for v in sm90 sm90fk; do NCU_DIM=64 ncu_mem $v causal 32K; done
for v in sm90 sm90d64; do NCU_DIM=64 ncu_mem $v causal 48K; done
cat "$out/t/summary.txt"
echo "=== d64 backward TFLOP/s: mask seqlen, then" $bruns
join_runs b $bruns >"$out/t/b.table"
cat "$out/t/b.table"
compare "$out/t/b.table" "sm90/cudnn sm90d64/cudnn sm90fk/cudnn sm90be/cudnn sm90d64/sm90 sm90d64/sm90be sm90fk/sm90" $bruns
echo "=== d64 forward TFLOP/s: mask seqlen, then" $fruns
join_runs f $fruns >"$out/t/f.table"
cat "$out/t/f.table"
compare "$out/t/f.table" "sm90/cudnn sm90d64/cudnn sm90d64/sm90" $fruns
echo "=== one full 32K d64 launch under ncu: time, instructions, stalls"
stall_table
echo "=== one d64 backward launch: DRAM read / write, L2 hit rate, time"
mem_table
echo "=== the rows' variants (gsplit-N, persistent-fwd)"
row_variants b-1-sm90 b-2-sm90d64
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
