#!/bin/sh
# Second call of the session of 2026-12-03 (night): decide the backward's default among
# call 12's winners, and fit the persistence rule. From the repository root with
# bin/longca.gz and bin/cuda.test.gz carried:
#   sh scripts/device/round-20261203n-2.sh OUT
# 1. GPU tests of sm90fk and sm90fn (sm90f's fragment-order dQ with ktfast's / norot's order);
# 2. backward at 16K on the 12 masks, and full/causal at 8K, 32K, 48K: sm90, sm90f,
#    sm90-ktfast, sm90fk, sm90fn, cudnn (its 5 masks); nvidia-smi clocks meanwhile;
# 3. scripts/device/persist-rule.sh, each step bounded to 25 s.
# Bounded to 560 s as a whole; the tables last.
# (sm90f and sm90-ktfast were removed after this call: the script is its record and no longer runs as is.)
set -u
out=${1:?usage: round-20261203n-2.sh OUT}
mkdir -p "$out/k"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
for f in longca cuda.test; do
	[ -f "bin/$f.gz" ] && gunzip -c "bin/$f.gz" >"bin/$f" && chmod +x "bin/$f"
done
t0=$(date +%s)
L=bin/longca
bound() {
	left=$((560 - 25 - ($(date +%s) - t0)))
	[ "$left" -lt "$1" ] && echo $((left > 5 ? left : 0)) || echo "$1"
}
run() {
	n=$(bound "$1")
	shift
	[ "$n" -gt 0 ] || { echo "# skipped (no time left): $*" >>"$out/k/summary.txt"; return 124; }
	timeout -s INT -k 10 "$n" "$@"
}
vs="sm90 sm90f sm90-ktfast"
for v in sm90fk sm90fn; do
	n=$(bound 50)
	[ "$n" -gt 0 ] && STEP_TIMEOUT=$n sh kernels/cuda/gpu.sh "$out/k" test "$v" 'TestCompile|TestMasks|TestWindows|TestDeterministic|TestOddLengths' >/dev/null 2>&1 && vs="$vs $v"
done
echo "# tests done at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv -lms 200 >"$out/k/clocks.csv" 2>&1 &
smi=$!
# interleave variants length by length so that drift hits all alike
for v in $vs; do
	run 40 $L kernel --kernels cuda --variant "$v" --seqlens 16K --heads 64:8 --passes bwd -w 3 -n 10 \
		--out "$out/k/r16-$v" >"$out/k/t16-$v.log" 2>&1
	echo "# $v 16K rc=$? at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
done
for v in $vs; do
	run 40 $L kernel --kernels cuda --variant "$v" --masks full,causal --seqlens 8K,32K,48K --heads 64:8 --passes bwd -w 3 -n 10 \
		--out "$out/k/rl-$v" >"$out/k/tl-$v.log" 2>&1
	echo "# $v 8K-48K rc=$? at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
done
run 40 $L kernel --kernels cudnn --masks full,causal,full_document,causal_document,sliding_window_causal --seqlens 16K --heads 64:8 --passes bwd -w 3 -n 10 \
	--out "$out/k/r16-cudnn" >"$out/k/t16-cudnn.log" 2>&1
run 40 $L kernel --kernels cudnn --masks full,causal --seqlens 8K,32K,48K --heads 64:8 --passes bwd -w 3 -n 10 \
	--out "$out/k/rl-cudnn" >"$out/k/tl-cudnn.log" 2>&1
echo "# cudnn rc=$? at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
kill "$smi" 2>/dev/null
n=$(bound 230)
if [ "$n" -gt 30 ]; then
	# persist-rule.sh's steps take 34 s each; fit 8 of them in what is left
	sed "s/-k 10 34 /-k 5 $(((n - 10) / 8)) /" scripts/device/persist-rule.sh >/tmp/pr.sh
	timeout -k 10 "$n" sh /tmp/pr.sh "$out/persist" >"$out/persist.txt" 2>&1
fi
echo "# done at $(($(date +%s) - t0)) s"
echo "=== tests and steps"; cat "$out/k/summary.txt"
echo "=== backward TFLOP/s: mask seqlen then one column per variant ($vs cudnn)"
for f in "$out"/k/t16-*.log "$out"/k/tl-*.log; do
	v=$(basename "$f" .log); v=${v#t16-}; v=${v#tl-}
	grep -E '^  [a-z_]+ +[0-9]+ .* bwd ' "$f" | awk -v v="$v" '{ print $1, $2, v, $7 }'
done >"$out/k/bwd.txt"
awk -v order="$vs cudnn" 'BEGIN { n = split(order, o, " ") } { r[$1 " " $2, $3] = $4; k[$1 " " $2] = 1 } END {
	printf "%-24s %6s", "mask", "len"; for (i = 1; i <= n; i++) printf " %11s", o[i]; printf "\n"
	for (c in k) { split(c, f, " "); printf "%-24s %6s", f[1], f[2]; for (i = 1; i <= n; i++) printf " %11s", ((c, o[i]) in r) ? r[c, o[i]] : "-"; printf "\n" }
}' "$out/k/bwd.txt" | sort -k1,1 -k2n
echo "=== SM clock MHz / power W while timed"
for col in 2 4; do
	awk -F', ' -v c=$col 'NR > 1 && $2 + 0 > 0 { print $c + 0 }' "$out/k/clocks.csv" | sort -n |
		awk '{ a[NR] = $1 } END { if (NR) printf "min %s, median %s, max %s (%d)\n", a[1], a[int(NR / 2) + 1], a[NR], NR }'
done
echo "=== persistence rule"; tail -52 "$out/persist.txt" 2>/dev/null
tar -C "$out" -czf "$out/all.tgz" k persist persist.txt 2>/dev/null && rm -rf "$out/k" "$out/persist"
ls "$out"
