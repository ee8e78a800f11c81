#!/bin/sh
# Call 26 (2026-12-04): the new default (call 25's winners: sm90o's forward at head dim 128,
# sm90m's at head dim 64), from the repository root with bin/longca.gz and bin/cuda.test.gz
# carried (make device; gzip -kf bin/cuda.test):
#   sh scripts/device/call26.sh OUT
# 1. its GPU tests (every mask, d64 and d128, fwd and bwd);
# 2. cuda against the native cudnn, fwd and bwd, on the five masks cuDNN runs whole, 8K-48K,
#    head dims 128 and 64, each case checked then timed.
# Bounded to 420 s; the table last; logs packed under OUT.
set -u
out=${1:?usage: call26.sh OUT}
mkdir -p "$out/t"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
t0=$(date +%s)
STEP_TIMEOUT=100 sh kernels/cuda/gpu.sh "$out/t" test sm90 >/dev/null 2>&1
echo "# tests sm90 done at $(($(date +%s) - t0)) s: $(grep -c 'bwd=' "$out/t/test-sm90.log") checks, $(grep -c -- '--- FAIL' "$out/t/test-sm90.log") failed tests" >>"$out/t/summary.txt"
grep -E -- "--- FAIL|panic" "$out/t/test-sm90.log" | head -5 >>"$out/t/summary.txt"
for d in 128 64; do
	left=$((420 - ($(date +%s) - t0)))
	[ "$left" -gt 10 ] || break
	timeout -s INT -k 5 $((left < 170 ? left : 170)) bin/longca kernel --kernels cuda,cudnn --head-dim $d \
		--masks full,causal,full_document,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K \
		--heads 64:8 --passes fwd,bwd -w 2 -n 6 --out "$out/t/d$d" >"$out/t/t-d$d.log" 2>&1
	echo "# d$d rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
done
cat "$out/t/summary.txt"
for d in 128 64; do
	echo "=== d$d"
	grep -E '^  [a-z_]+ +[0-9]+ |^# Cases' "$out/t/t-d$d.log"
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
