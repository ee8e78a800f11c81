#!/bin/sh
# Call 24 (session of 2026-12-04 morning; docs/perf.md "Call 24"), with bin/longca.gz and
# bin/cuda.test.gz carried: the experiment sm90w (head dim 64 forward over 256-key tiles).
# 1. its GPU tests (every mask, d64 and d128, fwd and bwd; d128 runs sm90's code);
# 2. head dim 64 forward, sm90 / sm90w / cudnn: full and causal 16K and 48K,
#    causal_document and sliding_window_causal 16K, checked.
# Bounded to 200 s (the session's last device minutes).
#   sh scripts/device/call24.sh OUT
set -u
out=${1:?usage: call24.sh OUT}
mkdir -p "$out/w"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
t0=$(date +%s)
STEP_TIMEOUT=100 sh kernels/cuda/gpu.sh "$out/w" test sm90w >/dev/null 2>&1
echo "# tests done at $(($(date +%s) - t0)) s" >>"$out/w/summary.txt"
grep -E "fwd90w|error|spill" "$out/w/test-sm90w.log" | head -8 >>"$out/w/summary.txt"
for v in sm90w sm90 cudnn; do
	left=$((200 - ($(date +%s) - t0)))
	[ "$left" -gt 8 ] || break
	sel="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	timeout -s INT -k 5 $((left < 40 ? left : 40)) bin/longca kernel $sel --head-dim 64 --masks full,causal,causal_document,sliding_window_causal \
		--seqlens 16K,48K --heads 64:8 --passes fwd -w 3 -n 10 --out "$out/w/$v" >"$out/w/t-$v.log" 2>&1
	echo "# $v rc=$? at $(($(date +%s) - t0)) s" >>"$out/w/summary.txt"
done
cat "$out/w/summary.txt"
for v in sm90w sm90 cudnn; do
	echo "=== $v"
	grep -E '^  [a-z_]+ +[0-9]+ ' "$out/w/t-$v.log"
done
tar -C "$out" -czf "$out/w.tgz" w && rm -rf "$out/w"
