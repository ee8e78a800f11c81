#!/bin/sh
# Call 31 (2026-12-04, second session): the new default sm90 (calls 29-30's winners: the
# early backward at head dim 128, 128 x 64 forward tiles where keyTile64Pays says so, the
# backward's key tiles together where their loads are even) against sm90-c29 (the default
# before), in the same call:
#   sh scripts/device/call31.sh OUT     (bin/longca.gz, bin/cuda.test.gz carried: make device)
# 1. sm90's GPU tests (every mask, d64 and d128, fwd and bwd, block-sparse with the tile rule
#    asserted);
# 2. backward, the twelve masks at 16K, d128: sm90 and sm90-c29;
# 3. block-sparse 32K, 64- and 128-token blocks, kept 0.2 / 0.5, fwd and bwd, d128: both;
# 4. block-sparse 64-token at d64 (the 128 x 64 forward there was only tested, never timed);
# 5. full and causal 16K forward d128: both (the forward the rule leaves alone).
# Every case checked. Bounded to 480 s; the table last; logs packed under OUT.
set -u
out=${1:?usage: call31.sh OUT}
mkdir -p "$out/t"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
for f in longca cuda.test; do
	[ -x bin/$f ] || { gunzip -c bin/$f.gz >bin/$f && chmod +x bin/$f; }
done
t0=$(date +%s)
STEP_TIMEOUT=110 sh kernels/cuda/gpu.sh "$out/t" test sm90 >/dev/null 2>&1
echo "# tests sm90 done at $(($(date +%s) - t0)) s: $(grep -c 'bwd=' "$out/t/test-sm90.log") checks, $(grep -c -- '--- FAIL' "$out/t/test-sm90.log") failed tests" >>"$out/t/summary.txt"
grep -E -- "--- FAIL|panic|block-sparse" "$out/t/test-sm90.log" | head -12 >>"$out/t/summary.txt"
masks=full,causal,full_document,causal_document,sliding_window_causal,sliding_window,share_question,causal_blockwise,prefix_lm_causal,prefix_lm_document,global_sliding_window,block_causal_document
step() {
	name=$1 cap=$2
	shift 2
	left=$((480 - ($(date +%s) - t0)))
	[ "$left" -gt 10 ] || { echo "# $name skipped (time)" >>"$out/t/summary.txt"; return; }
	timeout -s INT -k 5 $((left < cap ? left : cap)) bin/longca "$@" --heads 64:8 --out "$out/t/$name" >"$out/t/$name.log" 2>&1
	echo "# $name rc=$? at $(($(date +%s) - t0)) s: $(grep '^# Cases' "$out/t/$name.log" | sed 's/Avg.*//')" >>"$out/t/summary.txt"
}
for v in sm90 sm90-c29; do
	step "m-$v" 60 kernel --kernels cuda --variant $v --masks $masks --seqlens 16K --passes bwd -w 3 -n 10
done
for v in sm90 sm90-c29; do
	step "s-$v" 50 sparse --kernels cuda --variant $v --seqlens 32K --block 64,128 --ratios 0.2,0.5 --passes fwd,bwd -w 2 -n 5
	step "s64-$v" 30 sparse --kernels cuda --variant $v --seqlens 32K --block 64 --ratios 0.2,0.5 --head-dim 64 --passes fwd,bwd -w 2 -n 5
	step "d-$v" 25 kernel --kernels cuda --variant $v --masks full,causal --seqlens 16K --passes fwd -w 3 -n 10
done
cat "$out/t/summary.txt"
rows() { grep -hE '^  [a-z_0-9.]+ +[0-9]+ ' "$@" 2>/dev/null | awk '{print $1, $2, $4, $NF}'; }
for n in m-sm90 m-sm90-c29 s-sm90 s-sm90-c29 s64-sm90 s64-sm90-c29 d-sm90 d-sm90-c29; do
	echo "=== $n"
	rows "$out/t/$n.log"
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
