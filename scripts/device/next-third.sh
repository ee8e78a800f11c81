#!/bin/sh
# The third device call of the next session (written 2026-12-03 night): issue 19's
# must-show tables with the defaults the first call leaves (make the winners default and
# rebuild before it), from the repository root with bin/longca.gz carried (make device):
#   sh scripts/device/next-third.sh OUT
# 1. head dim 64, every peer, the five masks cuDNN runs, 8K-48K, fwd and bwd (call 12's
#    table stopped at 22 of its 40 cases: each length is its own step here, so a bound cuts
#    the longest lengths, not the masks);
# 2. block-sparse, 32K, 128- and 64-token blocks, kept 0.2 and 0.5: cuda and torch:flex on
#    the same maps.
# Every case checked. About 9 minutes, bounded to 560 s; the tables last.
set -u
out=${1:?usage: next-third.sh OUT}
mkdir -p "$out/t"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
[ -f bin/longca.gz ] && gunzip -c bin/longca.gz >bin/longca && chmod +x bin/longca
t0=$(date +%s)
L=bin/longca
bound() {
	left=$((560 - 20 - ($(date +%s) - t0)))
	[ "$left" -lt "$1" ] && echo $((left > 5 ? left : 0)) || echo "$1"
}
K=cuda,cudnn,torch:cudnn,torch:flash,torch:flex,torch:varlen
timeout -s INT -k 20 "$(bound 160)" $L sparse --kernels cuda,torch:flex --seqlens 32K --block 128,64 --ratios 0.2,0.5 \
	--heads 64:8 --passes fwd,bwd -w 2 -n 5 --out "$out/t/sparse" --run-id sparse >"$out/t/sparse.log" 2>&1
echo "# sparse rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
for s in 8K 16K 32K 48K; do
	n=$(bound 120)
	[ "$n" -gt 0 ] || { echo "# d64 $s skipped (no time left)" >>"$out/t/summary.txt"; continue; }
	timeout -s INT -k 20 "$n" $L kernel --kernels $K --head-dim 64 \
		--masks full,causal,full_document,causal_document,sliding_window_causal --seqlens "$s" --heads 64:8 \
		--passes fwd,bwd -w 3 -n 10 --out "$out/t/d64" --run-id "d64-$s" >"$out/t/d64-$s.log" 2>&1
	echo "# d64 $s rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
done
echo "# done at $(($(date +%s) - t0)) s"
cat "$out/t/summary.txt"
echo "=== block-sparse, 32K (x fastest)"
timeout -k 5 30 $L report "$out/t/sparse" 2>/dev/null | sed -n '/x fastest/,$p' | head -14
echo "=== head dim 64, every peer (x fastest)"
timeout -k 5 30 $L report "$out/t/d64" 2>/dev/null | sed -n '/x fastest/,$p' | head -48
tar -C "$out" -czf "$out/all.tgz" t && rm -rf "$out/t"
ls "$out"
