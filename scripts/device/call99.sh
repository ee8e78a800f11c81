#!/bin/sh
# Call 99 (prepared 2026-12-06, twenty-seventh session; not yet run): any card. Why the d64
# forward on full 16K reads two rates from one process to the next. Calls 98b-98g timed sm90
# (and sm90dy, now sm90) there at 493-555 TFLOP/s, settled, at the same SM clock (1,965-1,980
# MHz): 511 / 512 / 515 / 517 / 522 / 527 in some processes, 550 / 551 / 555 in others; cuDNN
# 530-571. Within a process the rate holds (the median of 10 repetitions). What differs from
# one process to the next is where the buffers land (physical pages, so L2 slices and the
# two L2 partitions) and which blocks share an SM's turn; not the code or the clock.
# 1. a: ten processes, sm90 and cudnn alternating (five each), d64 full 8K / 16K / 24K / 32K
#    forward, -w 3 -n 20, --gpu-state. Prediction: sm90 at 16K in both modes (spread 6% or
#    more over its five processes), 8K and 32K within 2% from one process to the next;
#    cuDNN's spread at 16K under sm90's.
# 2. m: ncu, one launch each of five sm90 processes and two cudnn at full 16K: DRAM bytes
#    read, L2 hit rate, time. Prediction, if L2 placement is the cause: the slow launches read
#    2x or more the fast ones' DRAM bytes (call 69 read 1.54 GB at d64 full 16K, cuDNN 0.17);
#    if the DRAM bytes are level and the times still split, the cause is elsewhere (which
#    items share an SM).
# 3. k: sm90kv64 (the d64 forward's items a KV head's together, as sm90's d128 forward's since
#    call 69: the blocks drawing from the counter at once read one or two KV heads' K and V;
#    compiled offline without a spill, not yet run) against sm90, four processes each
#    alternating, full 8K-32K, then its GPU tests. Prediction, if (2) finds L2: sm90kv64 in
#    sm90's fast mode at 16K in all four processes (spread under 2%), level with sm90's best
#    at 8K and 32K (within 1%), and no test fails. If (2) finds no L2 difference: sm90kv64
#    within sm90's spread. Promotion only with a second run on the other masks (call 100).
# 4. s: ncu's SASS pages of one full 8K d64 forward launch, sm90 (now with the counter) and
#    cuDNN, their executed instructions by opcode a score (op_mix): call 98f counted 1.0005e9
#    warp instructions against cuDNN's 0.937e9 (+6.8%); call 60 had sm90 at 7.29 thread
#    instructions a score, call 62 cuDNN at 7.01 (full 16K). Prediction: sm90 7.3-7.6, cuDNN
#    6.9-7.1, the difference in the uniform datapath and integer work (the tile's fixed
#    costs over 128 keys; cuDNN's Q K^T tile is 256 keys), not in FMNMX / FADD / FFMA / MUFU.
# 5. t: sm90ts (the d64 forward's rows' sums of P by the tensor cores: P V over 72 columns,
#    8 of them a tile of ones; prepared this session, compiled offline; not yet run): its GPU
#    tests first (the forward's entries, every mask, windows, odd lengths and fp16, the
#    occupancy), then timed against sm90 twice, interleaved, d64 forward on the five goal
#    masks at 8K and 16K. Prediction: the tests pass; full and causal +1 to +4% (the
#    softmax's 64 FADDs a thread a tile gone, about 14% of call 98f's instructions, for 1/16
#    more tensor work), the document and window cells -1 to +3%. If it loses everywhere,
#    the likeliest cause is the wait for P V now free to rise above the exponentials (its
#    pin depended on the sums: offline, ptxas 12.4 issues it ahead of the exponentials).
#    sm90tp is sm90ts with that wait pinned again, by a store fed by a tree of 32 FFMAs over
#    the exponentials (main loop 688 SASS instructions against sm90's 715 and sm90ts' 653):
#    its tests (the forward's entries, every mask), then timed in the same interleave.
#    Prediction: sm90tp at or above sm90ts on full and causal (+0 to +2% over it).
#    Promotion of either needs every mask (call 100).
# Bounded to 550 s (BUDGET); tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call99.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call99.sh OUT}
. scripts/device/lib.sh
# spread TABLE: for each row of a join_runs table whose columns alternate two runs (odd, even),
# each one's lowest and highest TFLOP/s and the spread (max / min - 1)
spread() {
awk '{s = c = ""; for (i = 3; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { if (i % 2) s = s " " $i; else c = c " " $i }
	printf "%s %s %s | %s\n", $1, $2, spread(s), spread(c) }
	function spread(l,   n, a, i, lo, hi) { n = split(l, a, " "); if (!n) return "-"; lo = hi = a[1] + 0
		for (i = 2; i <= n; i++) { if (a[i] + 0 < lo) lo = a[i] + 0; if (a[i] + 0 > hi) hi = a[i] + 0 }
		return sprintf("%.1f-%.1f (%+.1f%%)", lo, hi, 100 * (hi / lo - 1)) }' "$1"
}

call_start ${BUDGET:-550} longca cuda.test || exit 1
warm sm90 &
warm sm90kv64 &
warm sm90ts &
warm sm90tp &
wait
interleave a 30 "sm90 cudnn sm90 cudnn sm90 cudnn sm90 cudnn sm90 cudnn" --masks full --head-dim 64 --seqlens 8K,16K,24K,32K --passes fwd -w 3 -n 20 --gpu-state
for i in 1 2 3 4 5; do NCU_PASS=fwd NCU_DIM=64 ncu_one "mem-p$i" "$MEM_METRICS" sm90 full 16K 40; done
for i in 1 2; do NCU_PASS=fwd NCU_DIM=64 ncu_one "mem-p$i" "$MEM_METRICS" cudnn full 16K 40; done
interleave k 30 "sm90 sm90kv64 sm90 sm90kv64 sm90 sm90kv64 sm90 sm90kv64" --masks full --head-dim 64 --seqlens 8K,16K,24K,32K --passes fwd -w 3 -n 20
GPU_TESTS='TestForwardEntries64|TestMasks|TestWindows|TestOddLengthsAndFP16|TestHeadDim64Groups|TestForwardOccupancy' gpu_tests sm90ts 90
GPU_TESTS='TestForwardEntries64|TestMasks' gpu_tests sm90tp 60
interleave t 30 "sm90 sm90ts sm90tp sm90 sm90ts sm90tp" --masks full,causal,full_document,causal_document,sliding_window_causal --head-dim 64 --seqlens 8K,16K --passes fwd -w 3 -n 10
GPU_TESTS='TestForwardEntries64|TestMasks|TestWindows' gpu_tests sm90kv64 90
ncu_sass sm90 full 8K 64 60
ncu_sass cudnn full 8K 64 60
cat "$out/t/summary.txt"
table a "d64 full forward TFLOP/s, one process a column" "sm90/cudnn" sm90 cudnn sm90 cudnn sm90 cudnn sm90 cudnn sm90 cudnn
echo "=== a: each kernel's spread over its five processes (max / min - 1)"
spread "$out/t/a.table"
table k "d64 full forward TFLOP/s, one process a column" "sm90kv64/sm90" sm90 sm90kv64 sm90 sm90kv64 sm90 sm90kv64 sm90 sm90kv64
echo "=== k: each variant's spread over its four processes (max / min - 1; sm90, then sm90kv64)"
spread "$out/t/k.table"
table t "d64 forward TFLOP/s, settled" "sm90ts/sm90 sm90tp/sm90 sm90tp/sm90ts" sm90 sm90ts sm90tp sm90 sm90ts sm90tp
echo "=== m: one launch of full 16K's d64 forward, a process each (ncu)"
mem_table
for k in sm90 cudnn; do # scores: 8,192^2 pairs x 64 query heads
	echo "=== s: $k's full 8K d64 forward, executed instructions by opcode (op_mix)"
	op_mix "$out/t/ncu-sass-$k-full-8K-fwd-d64.log" 4294967296
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
