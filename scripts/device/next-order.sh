#!/bin/sh
# Prepared 2026-12-04 (third session; docs/perf.md "Next: where the backward's gap is", 4):
# the experiment sm90bm, the backward's block order chosen by a model of the block
# scheduler instead of the key tiles' coefficient of variation, from the repository root
# with bin/longca.gz and bin/cuda.test.gz carried (make device):
#   sh scripts/device/next-order.sh OUT
# 1. sm90bm's GPU tests of every mask (the order changes no arithmetic: sm90fk and sm90fn,
#    its two sides, passed every test in call 30);
# 2. backward d128, sm90bm / sm90 / sm90bm again (the clock's drift), the nine masks where
#    the two orders differ at some length (16 cells of 48), 8K-48K, checked.
# Bounded to 480 s; the table last; the logs packed as OUT/t.tgz.
set -u
out=${1:?usage: next-order.sh OUT}
. scripts/device/lib.sh
call_start 480 longca cuda.test || exit 1
STEP_TIMEOUT=90 sh kernels/cuda/gpu.sh "$out/t" test sm90bm '^TestMasks$' >/dev/null 2>&1
echo "# tests sm90bm (TestMasks) done at $(($(date +%s) - t0)) s: $(grep -c 'bwd=' "$out/t/test-sm90bm.log") checks, $(grep -c -- '--- FAIL' "$out/t/test-sm90bm.log") failed tests" >>"$out/t/summary.txt"
masks=causal,full_document,causal_document,sliding_window,causal_blockwise,prefix_lm_causal,prefix_lm_document,global_sliding_window,block_causal_document
n=0
for v in sm90bm sm90 sm90bm; do
	step "o$n-$v" 125 kernel --kernels cuda --variant $v --masks $masks --seqlens 8K,16K,32K,48K --passes bwd -w 3 -n 10
	n=$((n + 1))
done
cat "$out/t/summary.txt"
echo "=== backward TFLOP/s, d128: mask seqlen, then each run's value (sm90bm, sm90, sm90bm)"
for f in "$out"/t/o0-sm90bm.log "$out"/t/o1-sm90.log "$out"/t/o2-sm90bm.log; do
	grep -hE '^  [a-z_]+ +[0-9]+ ' "$f" 2>/dev/null | awk '{print $1 "@" $2, $NF}' | sort >"$f.v"
done
join -a 1 -e - -o auto "$out/t/o0-sm90bm.log.v" "$out/t/o1-sm90.log.v" 2>/dev/null | join -a 1 -e - -o auto - "$out/t/o2-sm90bm.log.v" 2>/dev/null | tr '@' ' '
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
