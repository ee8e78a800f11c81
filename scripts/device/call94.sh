#!/bin/sh
# Call 94 (prepared 2026-12-06, twenty-fifth session; not yet run): how long an idle the
# card's power controller needs (--settle), on either card.
# Call 93 (an H100 at its 700 W cap): timed in one process, the kernel timed second in a
# case read 5-7% lower (full 16K bwd: cuda / cuDNN 1.009-1.012 cuda first, 0.936-0.953 cuDNN
# first); each kernel in its own process after 2 s idle, 1.009-1.013 every round. Here both
# orders of cuda and cudnn in one process, at --settle 0, 250ms, 500ms, 1s and 2s, on full 16K
# bwd and full_document 32K fwd (-w 3 -n 10, checked, 64:8, d128), each row with settle_ms
# and its SM clock.
#   sh scripts/device/call94.sh OUT [LIMIT]     (carry bin/longca.gz)
# Predictions: at --settle 0 the order effect of call 93 (the second kernel 4-7% lower on
# full 16K bwd where the card is capped); from 1s on, the two orders' ratios within 2% of each
# other (full 16K bwd 1.00-1.02, full_document 32K fwd 1.03-1.09), the two kernels' clocks
# within 3%; settle_ms on every row equal to the flag. Unknown before it runs: whether 250 or
# 500 ms suffice (the smallest settle whose two orders agree within 2% becomes the one the
# device scripts pass).
set -u
out=${1:?usage: call94.sh OUT [LIMIT]}
. scripts/device/lib.sh
call_start "${2:-240}" longca || exit 1
warm sm90
C="-w 3 -n 10"
names=""
for s in 0 250ms 500ms 1s 2s; do
	for order in cuda,cudnn cudnn,cuda; do
		o=cuda1st
		[ "$order" = cudnn,cuda ] && o=cudnn1st
		step "s$s-$o-f16b" 40 kernel --kernels $order --masks full --seqlens 16K --passes bwd $C --settle $s
		step "s$s-$o-fd32f" 40 kernel --kernels $order --masks full_document --seqlens 32K --passes fwd $C --settle $s
		names="$names s$s-$o-f16b s$s-$o-fd32f"
	done
done
cat "$out/t/summary.txt"
echo "=== each step: kernel TFLOP/s @ mean SM clock (MHz), settle_ms, in timing order; cuda / cudnn"
clock_pairs $names
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
