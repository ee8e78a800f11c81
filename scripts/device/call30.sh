#!/bin/sh
# Call 30 (2026-12-04, second session): the data for two of sm90's rules, after call 29
# (next-sm90bo.sh) found sm90fk's order 30% ahead of the default's on 128-token block-sparse
# backward and sm90s's 128 x 64 forward tiles ahead at kept 0.5 as well as 0.2:
#   sh scripts/device/call30.sh OUT     (bin/longca.gz carried: make device)
# 1. backward order: sm90fk (a head's key tiles together) against sm90fn (heaviest key
#    tiles first over all heads) on every mask at 16K, d128, and on block-sparse maps
#    (uniform 64/128-token blocks and variable 256-token blocks, 32K, kept 0.1-0.8), with
#    sm90be (call 29's backward winner at d128) on the twelve masks;
# 2. forward tiles: sm90s (128 x 64) against sm90 (128 x 128) on 64-token maps at kept
#    0.1-0.8, 128-token and variable-block maps at 0.2/0.5;
# 3. Flex on the same sparse maps (the peer's numbers in the same call), if time is left.
# Every case checked. Bounded to 520 s; the table last; logs packed under OUT.
set -u
out=${1:?usage: call30.sh OUT}
mkdir -p "$out/t"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
[ -x bin/longca ] || { gunzip -c bin/longca.gz >bin/longca && chmod +x bin/longca; }
t0=$(date +%s)
masks=full,causal,full_document,causal_document,sliding_window_causal,sliding_window,share_question,causal_blockwise,prefix_lm_causal,prefix_lm_document,global_sliding_window,block_causal_document
# step NAME CAP ARGS...: one bounded longca run, logged as t/NAME.log
step() {
	name=$1 cap=$2
	shift 2
	left=$((520 - ($(date +%s) - t0)))
	[ "$left" -gt 10 ] || { echo "# $name skipped (time)" >>"$out/t/summary.txt"; return; }
	timeout -s INT -k 5 $((left < cap ? left : cap)) bin/longca "$@" --heads 64:8 --out "$out/t/$name" >"$out/t/$name.log" 2>&1
	echo "# $name rc=$? at $(($(date +%s) - t0)) s: $(grep '^# Cases' "$out/t/$name.log" | sed 's/Avg.*//')" >>"$out/t/summary.txt"
}
for v in sm90fk sm90fn sm90be; do
	step "m-$v" 60 kernel --kernels cuda --variant $v --masks $masks --seqlens 16K --passes bwd -w 3 -n 10
done
for v in sm90fk sm90fn; do
	step "u-$v" 45 sparse --kernels cuda --variant $v --seqlens 32K --block 64,128 --ratios 0.1,0.2,0.5,0.8 --passes bwd -w 2 -n 5
	step "v-$v" 30 sparse --kernels cuda --variant $v --seqlens 32K --avg-block 256 --ratios 0.2,0.5 --passes bwd -w 2 -n 5
done
for v in sm90s sm90; do
	step "f64-$v" 40 sparse --kernels cuda --variant $v --seqlens 32K --block 64 --ratios 0.1,0.2,0.3,0.5,0.8 --passes fwd -w 2 -n 5
	step "f128-$v" 30 sparse --kernels cuda --variant $v --seqlens 32K --block 128 --avg-block 256 --ratios 0.2,0.5 --passes fwd -w 2 -n 5
done
step "flex" 150 sparse --kernels torch:flex --seqlens 32K --block 64,128 --ratios 0.2,0.5 --passes fwd,bwd -w 2 -n 5
cat "$out/t/summary.txt"
rows() { grep -hE '^  [a-z_0-9.]+ +[0-9]+ ' "$@" 2>/dev/null | awk '{print $1, $2, $4, $NF}'; }
for n in m-sm90fk m-sm90fn m-sm90be u-sm90fk u-sm90fn v-sm90fk v-sm90fn f64-sm90s f64-sm90 f128-sm90s f128-sm90 flex; do
	echo "=== $n"
	rows "$out/t/$n.log"
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
