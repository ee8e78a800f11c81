#!/bin/sh
# Call 25 (2026-12-04, the first of the session), from the repository root with
# bin/longca.gz and bin/cuda.test.gz carried (make device; gzip -kf bin/cuda.test):
#   sh scripts/device/call25.sh OUT
# 1. GPU tests (every mask, d64 and d128, fwd and bwd) of the two experiments: sm90o (the
#    forward's exponentials under its own P V, FlashAttention-3's order within a
#    warpgroup) and sm90m (head dim 64 on three consumer warpgroups, 192 x 128 tiles);
# 2. forward, checked then timed, each variant its own folder: head dim 64 sm90m / sm90o /
#    sm90 / cudnn, head dim 128 sm90o / sm90 / cudnn; full, causal, causal_document and
#    sliding_window_causal at 16K and 48K.
# Bounded to 540 s; the table last; logs packed under OUT.
set -u
out=${1:?usage: call25.sh OUT}
mkdir -p "$out/t"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
t0=$(date +%s)
for v in sm90o sm90m; do
	STEP_TIMEOUT=100 sh kernels/cuda/gpu.sh "$out/t" test $v >/dev/null 2>&1
	echo "# tests $v done at $(($(date +%s) - t0)) s: $(grep -c 'bwd=' "$out/t/test-$v.log") checks, $(grep -c -- '--- FAIL' "$out/t/test-$v.log") failed tests" >>"$out/t/summary.txt"
	grep -E -- "--- FAIL|panic|error" "$out/t/test-$v.log" | head -5 >>"$out/t/summary.txt"
done
for c in 64:sm90m 64:sm90o 64:sm90 64:cudnn 128:sm90o 128:sm90 128:cudnn; do
	d=${c%%:*} v=${c#*:}
	left=$((540 - ($(date +%s) - t0)))
	[ "$left" -gt 10 ] || break
	sel="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	timeout -s INT -k 5 $((left < 55 ? left : 55)) bin/longca kernel $sel --head-dim $d \
		--masks full,causal,causal_document,sliding_window_causal --seqlens 16K,48K --heads 64:8 --passes fwd \
		-w 3 -n 10 --out "$out/t/$v-$d" >"$out/t/t-$v-$d.log" 2>&1
	echo "# d$d $v rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
done
cat "$out/t/summary.txt"
for c in 64:sm90m 64:sm90o 64:sm90 64:cudnn 128:sm90o 128:sm90 128:cudnn; do
	d=${c%%:*} v=${c#*:}
	echo "=== d$d $v"
	grep -E '^  [a-z_]+ +[0-9]+ ' "$out/t/t-$v-$d.log"
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
