#!/bin/sh
# Call 95 (2026-12-06, twenty-sixth session): the head-dim-64 forward misses of call 91 (full
# 0.94-0.995, causal 0.94-0.98, causal_document 48K 0.946 on the H100, no clock gap between
# the kernels) timed again with --settle 250ms (call 94: from 250 ms the two timing orders agree
# within 2% on full 16K bwd). cuda and cudnn only, forward only, the five cuDNN masks, 8K-48K,
# 64:8, d64, checked, -w 3 -n 10; then the same with cudnn timed first.
#   sh scripts/device/call95.sh OUT [LIMIT]     (carry bin/longca.gz)
# Prediction: the kernel's own gap stays (call 91 read no clock difference): full 0.95-1.0,
# causal 0.95-0.99, the same cells below 1.0 in both orders within 2%.
set -u
out=${1:?usage: call95.sh OUT [LIMIT]}
. scripts/device/lib.sh
call_start "${2:-300}" longca || exit 1
M=full,causal,full_document,causal_document,sliding_window_causal
for order in cuda,cudnn cudnn,cuda; do
	step "d64f-${order%%,*}1st" 140 kernel --kernels $order --masks $M --head-dim 64 --seqlens 8K,16K,32K,48K --passes fwd -w 3 -n 10 --settle 250ms
done
cat "$out/t/summary.txt"
for order in cuda,cudnn cudnn,cuda; do
	echo "=== $order timed in that order: cuda / cudnn per case"
	bin/longca report "$out/t/d64f-${order%%,*}1st" --against cudnn 2>&1 | grep -E '^ *(full|causal|sliding)' | head -40
	goal_line "$out/t/d64f-${order%%,*}1st" fwd cudnn 1.0 $M
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
