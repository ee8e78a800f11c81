#!/bin/sh
# The first device call of the next session (written 2026-12-03 night, after calls 12-14),
# from the repository root with bin/longca.gz and bin/cuda.test.gz carried (make device;
# gzip -kf bin/cuda.test):
#   sh scripts/device/next-first.sh OUT
# 1. GPU tests: sm90 (call 13's backward) in full, then the experiments sm90l (the
#    forward's lean softmax), sm90q (the forward's next Q K^T before this tile's P V, the
#    softmax under P V), sm90lq (both), sm90c (dQ's conversion through shared memory) and
#    sm90b (the partial tiles' bits by interval arithmetic) on the usual subset
#    (docs/perf.md "Next: sm90l, sm90q, sm90c, sm90b", predictions written before they ran);
# 2. the forward of sm90 and the forward experiments beside cudnn: full and causal at
#    8K-48K, causal_document and sliding_window_causal at 16K, interleaved length by length;
# 3. the backward of sm90, sm90c and sm90r beside cudnn at 16K on the masks where the
#    conversion weighs most (sliding_window_causal, sliding_window, causal_document,
#    block_causal_document) and full;
# 4. sm90b beside sm90 on the masks with most partial tiles at 16K, fwd and bwd, and on
#    64-token block-sparse maps at 32K beside torch:flex (longca sparse).
# (The two masks call 14's `longca run` did not reach run in next-second.sh.)
# nvidia-smi samples the clock and power meanwhile (the H200 runs at its 700 W cap in the
# timed loops: docs/perf.md call 12). About 8 minutes, bounded to 540 s; the tables last.
set -u
out=${1:?usage: next-first.sh OUT}
mkdir -p "$out/k"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
for f in longca cuda.test; do
	[ -f "bin/$f.gz" ] && gunzip -c "bin/$f.gz" >"bin/$f" && chmod +x "bin/$f"
done
t0=$(date +%s)
L=bin/longca
# bound N: N seconds, or what is left before 540 s into the call less 25, whichever is less
bound() {
	left=$((540 - 25 - ($(date +%s) - t0)))
	[ "$left" -lt "$1" ] && echo $((left > 5 ? left : 0)) || echo "$1"
}
run() { # run N CMD...: CMD bounded by bound N, skipped when nothing is left
	n=$(bound "$1")
	shift
	[ "$n" -gt 0 ] || { echo "# skipped (no time left): $*" >>"$out/k/summary.txt"; return 124; }
	timeout -s INT -k 10 "$n" "$@"
}
STEP_TIMEOUT=$(bound 110) sh kernels/cuda/gpu.sh "$out/k" test sm90 >/dev/null 2>&1
fv="sm90" bv="sm90 sm90r"
for v in sm90l sm90q sm90lq; do
	n=$(bound 70)
	[ "$n" -gt 0 ] && STEP_TIMEOUT=$n sh kernels/cuda/gpu.sh "$out/k" test $v 'TestCompile|TestMasks|TestWindows|TestOddLengths|TestHeadMasks' >/dev/null 2>&1 && fv="$fv $v"
done
# sm90q holds two P buffers: spills (stack) or serialised wgmma would show here
grep -hiE 'fwd90.*(regs|stack)|serializ' "$out/k"/test-sm90q.log | head -6 >>"$out/k/summary.txt"
n=$(bound 50)
[ "$n" -gt 0 ] && STEP_TIMEOUT=$n sh kernels/cuda/gpu.sh "$out/k" test sm90c 'TestCompile|TestMasks|TestWindows|TestOddLengths|TestDeterministic' >/dev/null 2>&1 && bv="$bv sm90c"
sb=""
n=$(bound 70)
[ "$n" -gt 0 ] && STEP_TIMEOUT=$n sh kernels/cuda/gpu.sh "$out/k" test sm90b 'TestCompile|TestMasks|TestWindows|TestOddLengths|TestHeadMasks' >/dev/null 2>&1 && sb=sm90b
echo "# tests done at $(($(date +%s) - t0)) s; forward variants: $fv; backward: $bv" >>"$out/k/summary.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv -lms 200 >"$out/k/clocks.csv" 2>&1 &
smi=$!
for s in 8K 16K 32K 48K; do
	for v in $fv; do
		run 30 $L kernel --kernels cuda --variant "$v" --masks full,causal --seqlens "$s" --heads 64:8 --passes fwd -w 3 -n 10 \
			--out "$out/k/f-$v-$s" >"$out/k/tf-$v-$s.log" 2>&1
		echo "# fwd $v $s rc=$? at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
	done
	run 30 $L kernel --kernels cudnn --masks full,causal --seqlens "$s" --heads 64:8 --passes fwd -w 3 -n 10 \
		--out "$out/k/f-cudnn-$s" >"$out/k/tf-cudnn-$s.log" 2>&1
done
for v in $fv cudnn; do
	sel="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	run 30 $L kernel $sel --masks causal_document,sliding_window_causal --seqlens 16K --heads 64:8 --passes fwd -w 3 -n 10 \
		--out "$out/k/f-$v-docs" >"$out/k/tf-$v-docs.log" 2>&1
done
for v in $bv; do
	run 40 $L kernel --kernels cuda --variant "$v" --masks full,causal_document,sliding_window_causal,sliding_window,block_causal_document \
		--seqlens 16K --heads 64:8 --passes bwd -w 3 -n 10 --out "$out/k/b-$v" >"$out/k/tb-$v.log" 2>&1
	echo "# bwd $v rc=$? at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
done
run 40 $L kernel --kernels cudnn --masks full,causal_document,sliding_window_causal --seqlens 16K --heads 64:8 --passes bwd -w 3 -n 10 \
	--out "$out/k/b-cudnn" >"$out/k/tb-cudnn.log" 2>&1
for v in sm90 $sb; do
	run 40 $L kernel --kernels cuda --variant "$v" --masks causal_document,sliding_window_causal,share_question,block_causal_document \
		--seqlens 16K --heads 64:8 --passes fwd,bwd -w 3 -n 10 --out "$out/k/p-$v" >"$out/k/tp-$v.log" 2>&1
	echo "# partial tiles $v rc=$? at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
done
kill "$smi" 2>/dev/null
# 64-token block-sparse maps, 32K: sm90, sm90b, torch:flex on the same maps
for v in sm90 $sb; do
	run 45 $L sparse --kernels cuda --variant "$v" --seqlens 32K --block 64 --ratios 0.2,0.5 --heads 64:8 -w 2 -n 5 \
		--out "$out/k/s-$v" >"$out/k/ts-$v.log" 2>&1
	echo "# sparse $v rc=$? at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
done
run 60 $L sparse --kernels torch:flex --seqlens 32K --block 64 --ratios 0.2,0.5 --heads 64:8 -w 2 -n 5 \
	--out "$out/k/s-flex" >"$out/k/ts-flex.log" 2>&1
echo "# sparse flex rc=$? at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
echo "# done at $(($(date +%s) - t0)) s"
echo "=== GPU tests and steps"; cat "$out/k/summary.txt"
echo "=== TFLOP/s: mask seqlen pass, then one column per variant"
for f in "$out"/k/tf-*.log "$out"/k/tb-*.log "$out"/k/tp-*.log; do
	v=$(basename "$f" .log); v=${v#tf-}; v=${v#tb-}; v=${v#tp-}; v=${v%-docs}; v=${v%-8K}; v=${v%-16K}; v=${v%-32K}; v=${v%-48K}
	grep -E '^  [a-z_]+ +[0-9]+ .* (fwd|bwd) ' "$f" | awk -v v="$v" '{ print $1, $2, $4, v, $7 }'
done >"$out/k/rates.txt"
awk -v order="sm90 sm90l sm90q sm90lq sm90r sm90c sm90b cudnn" 'BEGIN { n = split(order, o, " ") } { r[$1 " " $2 " " $3, $4] = $5; k[$1 " " $2 " " $3] = 1 } END {
	printf "%-24s %6s %4s", "mask", "len", "pass"; for (i = 1; i <= n; i++) printf " %8s", o[i]; printf "\n"
	for (c in k) { split(c, f, " "); printf "%-24s %6s %4s", f[1], f[2], f[3]; for (i = 1; i <= n; i++) printf " %8s", ((c, o[i]) in r) ? r[c, o[i]] : "-"; printf "\n" }
}' "$out/k/rates.txt" | sort -k3,3 -k1,1 -k2n
echo "=== SM clock MHz / power W while timed: min / median / max"
for col in 2 4; do
	awk -F', ' -v c=$col 'NR > 1 && $2 + 0 > 0 { print $c + 0 }' "$out/k/clocks.csv" | sort -n |
		awk '{ a[NR] = $1 } END { if (NR) printf "min %s, median %s, max %s (%d)\n", a[1], a[int(NR / 2) + 1], a[NR], NR }'
done
echo "=== block-sparse 64-token maps, 32K (mask ratio pass TFLOP/s)"
for f in "$out"/k/ts-*.log; do
	echo "## $(basename "$f" .log)"
	grep -E '^  [a-z_]+' "$f" | grep -E ' (fwd|bwd) ' | head -8
done
tar -C "$out" -czf "$out/all.tgz" k 2>/dev/null && rm -rf "$out/k"
ls "$out"
