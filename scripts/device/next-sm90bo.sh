#!/bin/sh
# (Call 29 ran it; sm90bo, sm90bs and sm90sr were removed after it: docs/perf.md "Calls 29-32".)
# The next session's first device call (prepared 2026-12-04; docs/perf.md "Next: sm90bo"),
# from the repository root with bin/longca.gz and bin/cuda.test.gz carried (make device):
#   sh scripts/device/next-sm90bo.sh OUT
# 1. the experiments sm90bo's, sm90be's and sm90bs's GPU tests (every mask, d64 and d128,
#    fwd and bwd);
# 2. head dim 64 backward, sm90bo / sm90be / sm90bs / sm90 / cudnn, each its own folder: full,
#    causal, causal_document and sliding_window_causal at 16K and 48K, checked;
# 3. head dim 128 backward, the same masks, sm90be / sm90bs / sm90 / cudnn (sm90bo is sm90 there);
# 4. block-sparse backward, 32K, 128-token blocks, kept 0.2 / 0.5: sm90 (the rule's order for
#    uneven key tiles, heaviest first over all heads) against sm90fk (a head's key tiles
#    together): does the L2 reuse of Q/dO explain sparse's 0.75-0.78 of dense per area?
#    64-token blocks: sm90bs (a warpgroup skips its empty 64 x 64 squares) against sm90;
# 5. the experiment sm90s (the forward over 128 x 64 tiles): its GPU tests, then the
#    64-token block-sparse forward, 32K, kept 0.2 / 0.5, sm90s against sm90 (and full 16K
#    d128 forward: what the smaller tiles cost on a dense mask), and sm90sr (sm90s's tiles
#    only where the rule says they pay: the sparse maps as sm90s, full as sm90).
# Bounded to 540 s; the table last; logs packed under OUT.
set -u
out=${1:?usage: next-sm90bo.sh OUT}
mkdir -p "$out/t"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
t0=$(date +%s)
for v in sm90bo sm90be sm90bs; do
	STEP_TIMEOUT=100 sh kernels/cuda/gpu.sh "$out/t" test $v >/dev/null 2>&1
	echo "# tests $v done at $(($(date +%s) - t0)) s: $(grep -c 'bwd=' "$out/t/test-$v.log") checks, $(grep -c -- '--- FAIL' "$out/t/test-$v.log") failed tests" >>"$out/t/summary.txt"
	grep -E -- "--- FAIL|panic" "$out/t/test-$v.log" | head -5 >>"$out/t/summary.txt"
done
for c in 64:sm90bo 64:sm90be 64:sm90bs 64:sm90 64:cudnn 128:sm90be 128:sm90bs 128:sm90 128:cudnn; do
	d=${c%%:*} v=${c#*:}
	left=$((540 - ($(date +%s) - t0)))
	[ "$left" -gt 10 ] || break
	sel="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	masks=full,causal,causal_document,sliding_window_causal lens=16K,48K
	timeout -s INT -k 5 $((left < 45 ? left : 45)) bin/longca kernel $sel --head-dim $d \
		--masks $masks --seqlens $lens --heads 64:8 --passes bwd -w 3 -n 10 --out "$out/t/$v-$d" >"$out/t/t-$v-$d.log" 2>&1
	echo "# d$d $v rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
done
for v in sm90 sm90fk; do
	left=$((540 - ($(date +%s) - t0)))
	[ "$left" -gt 10 ] || break
	timeout -s INT -k 5 $((left < 50 ? left : 50)) bin/longca sparse --kernels cuda --variant $v --seqlens 32K --block 128 \
		--ratios 0.2,0.5 --heads 64:8 --passes bwd -w 2 -n 5 --out "$out/t/s-$v" >"$out/t/ts-$v.log" 2>&1
	echo "# sparse $v rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
done
for v in sm90bs sm90; do
	left=$((540 - ($(date +%s) - t0)))
	[ "$left" -gt 10 ] || break
	timeout -s INT -k 5 $((left < 40 ? left : 40)) bin/longca sparse --kernels cuda --variant $v --seqlens 32K --block 64 \
		--ratios 0.2,0.5 --heads 64:8 --passes bwd -w 2 -n 5 --out "$out/t/sb64-$v" >"$out/t/tsb64-$v.log" 2>&1
	echo "# sparse64 bwd $v rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
done
left=$((540 - ($(date +%s) - t0)))
if [ "$left" -gt 60 ]; then
	STEP_TIMEOUT=$((left < 100 ? left - 20 : 80)) sh kernels/cuda/gpu.sh "$out/t" test sm90s >/dev/null 2>&1
	echo "# tests sm90s done at $(($(date +%s) - t0)) s: $(grep -c 'bwd=' "$out/t/test-sm90s.log") checks, $(grep -c -- '--- FAIL' "$out/t/test-sm90s.log") failed tests" >>"$out/t/summary.txt"
fi
for v in sm90s sm90sr sm90; do
	left=$((540 - ($(date +%s) - t0)))
	[ "$left" -gt 10 ] || break
	timeout -s INT -k 5 $((left < 40 ? left : 40)) bin/longca sparse --kernels cuda --variant $v --seqlens 32K --block 64 \
		--ratios 0.2,0.5 --heads 64:8 --passes fwd -w 2 -n 5 --out "$out/t/s64-$v" >"$out/t/ts64-$v.log" 2>&1
	echo "# sparse64 $v rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
	left=$((540 - ($(date +%s) - t0)))
	[ "$left" -gt 10 ] || break
	timeout -s INT -k 5 $((left < 30 ? left : 30)) bin/longca kernel --kernels cuda --variant $v --masks full --seqlens 16K \
		--heads 64:8 --passes fwd -w 3 -n 10 --out "$out/t/dense-$v" >"$out/t/td-$v.log" 2>&1
done
cat "$out/t/summary.txt"
for c in 64:sm90bo 64:sm90be 64:sm90bs 64:sm90 64:cudnn 128:sm90be 128:sm90bs 128:sm90 128:cudnn; do
	d=${c%%:*} v=${c#*:}
	echo "=== d$d $v"
	grep -E '^  [a-z_]+ +[0-9]+ ' "$out/t/t-$v-$d.log"
done
for v in sm90 sm90fk; do
	echo "=== sparse $v"
	grep -E '^  [a-z_0-9.]+ +[0-9]+ ' "$out/t/ts-$v.log"
done
for v in sm90bs sm90; do
	echo "=== sparse 64 bwd, $v"
	grep -E '^  [a-z_0-9.]+ +[0-9]+ ' "$out/t/tsb64-$v.log"
done
for v in sm90s sm90sr sm90; do
	echo "=== sparse 64 / dense full 16K, $v"
	grep -hE '^  [a-z_0-9.]+ +[0-9]+ ' "$out/t/ts64-$v.log" "$out/t/td-$v.log"
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
