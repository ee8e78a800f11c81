#!/bin/sh
# Call 56 (prepared 2026-12-05, ninth session; not yet run): the backward with two dQ stages
# a consumer warpgroup, experiment sm90w2 (a warpgroup stages a step's dQ while the writer's
# bulk reduction still reads the last step's; the writer hands a stage back once the next
# step's reductions are issued), at both head dims.
# 1. sm90w2's GPU tests (every mask, d64 and d128, fwd and bwd, deterministic);
# 2. the backward, 64:8, checked, interleaved sm90 / sm90w2 / sm90 / sm90w2: d128 on full,
#    causal, full_document, causal_document, prefix_lm_causal at 16K-48K; d64 on full, causal
#    at 8K-48K;
# 3. ncu's stall samples by reason of one causal 16K d128 backward launch, sm90 and sm90w2.
# Prediction (docs/perf.md "Next: call 56"): +0.5 to +2.5% on every cell (the hand-off's wait
# for its stage, about 5% of call 47's stall samples, mostly gone), the most at d64 (three
# warpgroups share the one writer).
# Bounded to 400 s; the tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call56.sh OUT      (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call56.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-400} longca cuda.test || exit 1
gpu_tests sm90w2 130
runs="sm90 sm90w2 sm90 sm90w2"
n=0
for v in $runs; do
	step "w-$n-$v" 50 kernel --kernels cuda --variant $v --masks full,causal,full_document,causal_document,prefix_lm_causal --seqlens 16K,32K,48K --passes bwd -w 2 -n 5
	step "v-$n-$v" 25 kernel --kernels cuda --variant $v --head-dim 64 --masks full,causal --seqlens 8K,16K,32K,48K --passes bwd -w 2 -n 5
	n=$((n + 1))
done
for v in sm90 sm90w2; do
	_left=$((budget + 40 - ($(date +%s) - t0)))
	[ "$_left" -gt 15 ] || { echo "# ncu $v skipped (time)" >>"$out/t/summary.txt"; continue; }
	timeout -k 5 $((_left < 30 ? _left : 30)) ncu --clock-control none -k 'regex:^bwd90e_bf16' -c 1 --metrics "$STALL_METRICS" \
		bin/longca kernel --kernels cuda --variant $v --no-check -w 0 -n 1 --masks causal --seqlens 16K --heads 64:8 --passes bwd \
		--out "$out/t/ncu-run-$v" >"$out/t/ncu-$v.log" 2>&1
	echo "# ncu $v rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
done
cat "$out/t/summary.txt"
for dim in w v; do
	echo "=== backward TFLOP/s ($([ $dim = w ] && echo d128 || echo d64)): mask seqlen, then" $runs ", and sm90w2 over sm90 (the means of their two runs)"
	join_runs $dim $runs | awk '{a = ($3 + $5) / 2; b = ($4 + $6) / 2; printf "%s %+.1f%%\n", $0, (a > 0 ? 100 * (b / a - 1) : 0)}'
done
echo "=== one causal 16K d128 backward launch under ncu (sm90, then sm90w2)"
for v in sm90 sm90w2; do echo "## $v"; stalls "$out/t/ncu-$v.log"; done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
