#!/bin/sh
# Call 20 (session of 2026-12-04 morning; docs/perf.md "Call 20"), from the repository root
# with bin/longca.gz and bin/cuda.test.gz carried (make device; gzip -kf bin/cuda.test):
#   sh scripts/device/call20.sh OUT
# 1. the GPU tests of sm90x2 (half the head-dim-64 forward's exponentials on the FMA pipe:
#    the most exp2_fma of the three experiments; x4 and x8 run the same code on fewer pairs);
# 2. head dim 64 forward: sm90, sm90x2, sm90x4, sm90x8 and cudnn, full and causal 16K and
#    48K, causal_document and sliding_window_causal 16K, every case checked (prediction in
#    docs/perf.md "Call 20");
# 3. Ctrl-C: `timeout -s INT` on a kernel sweep now stops cleanly (call 19's runs died of a
#    library's signal handler): its exit status and last lines;
# 4. the head-dim-64 table's rows call 19's bounds cut: causal_document and
#    sliding_window_causal 8K-48K, full_document 8K and 48K, every peer, fwd and bwd.
# Bounded to 585 s; the tables last; logs packed under OUT.
set -u
out=${1:?usage: call20.sh OUT}
mkdir -p "$out/k"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
for f in longca cuda.test; do
	[ -f "bin/$f.gz" ] && gunzip -c "bin/$f.gz" >"bin/$f" && chmod +x "bin/$f"
done
t0=$(date +%s)
L=bin/longca
S=$out/k/summary.txt
bound() {
	left=$((585 - 15 - ($(date +%s) - t0)))
	[ "$left" -lt "$1" ] && echo $((left > 5 ? left : 0)) || echo "$1"
}
run() {
	n=$(bound "$1")
	shift
	[ "$n" -gt 5 ] || { echo "# skipped (no time left): $*" >>"$S"; return 124; }
	timeout -s INT -k 10 "$n" "$@"
}
STEP_TIMEOUT=$(bound 110) sh kernels/cuda/gpu.sh "$out/k" test sm90x2 >/dev/null 2>&1
echo "# tests done at $(($(date +%s) - t0)) s" >>"$S"
for v in sm90 sm90x2 sm90x4 sm90x8 cudnn; do
	sel="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	run 30 $L kernel $sel --head-dim 64 --masks full,causal --seqlens 16K,48K --heads 64:8 --passes fwd -w 3 -n 10 \
		--out "$out/k/e-$v" >"$out/k/te-$v.log" 2>&1
	run 20 $L kernel $sel --head-dim 64 --masks causal_document,sliding_window_causal --seqlens 16K --heads 64:8 --passes fwd -w 3 -n 10 \
		--out "$out/k/e-$v" >>"$out/k/te-$v.log" 2>&1
	echo "# e64 $v at $(($(date +%s) - t0)) s" >>"$S"
done
timeout -s INT -k 10 20 $L kernel --kernels cuda,cudnn --masks full,causal --seqlens 8K,16K,32K --heads 64:8 --passes fwd,bwd \
	-w 3 -n 10 --out "$out/k/sigint" >"$out/k/sigint.log" 2>&1
echo "# SIGINT after 20 s: exit $?; $(grep -c '"message":"case"' "$out/k/sigint.log") cases logged; $(grep -c 'SA_ONSTACK\|^goroutine ' "$out/k/sigint.log") crash lines; last: $(tail -1 "$out/k/sigint.log" | cut -c1-200)" >>"$S"
K=cuda,cudnn,torch:cudnn,torch:flash,torch:flex,torch:varlen
for ms in causal_document:8K,16K,48K sliding_window_causal:8K,16K,32K,48K full_document:8K,48K; do
	m=${ms%%:*} s=${ms#*:}
	run 150 $L kernel --kernels $K --head-dim 64 --masks "$m" --seqlens "$s" --heads 64:8 \
		--passes fwd,bwd -w 3 -n 10 --out "$out/k/d64" --run-id "d64-$m" >"$out/k/d64-$m.log" 2>&1
	echo "# d64 $m rc=$? at $(($(date +%s) - t0)) s" >>"$S"
done
echo "# done at $(($(date +%s) - t0)) s" >>"$S"
cat "$S"
echo "=== head dim 64 forward TFLOP/s: mask seqlen, sm90 / x2 / x4 / x8 / cudnn"
for v in sm90 sm90x2 sm90x4 sm90x8 cudnn; do
	grep -h '"message":"case"' "$out/k/te-$v.log" | awk -v v=$v -F'"' '{ for (i = 1; i < NF; i++) { if ($i == "mask") m = $(i+2); if ($i == "status") s = $(i+2) } match($0, /"seqlen":[0-9]+/); l = substr($0, RSTART+9, RLENGTH-9); t = "-"; if (match($0, /"tflops":[0-9.]+/)) t = sprintf("%.1f", substr($0, RSTART+9, RLENGTH-9)); print m, l, v, (s == "ok" ? t : s) }'
done | awk 'BEGIN { n = split("sm90 sm90x2 sm90x4 sm90x8 cudnn", o, " ") } { r[$1 " " $2, $3] = $4; k[$1 " " $2] = 1 } END { for (c in k) { line = c; for (i = 1; i <= n; i++) line = line " " ((c SUBSEP o[i]) in r ? r[c, o[i]] : "-"); print line } }' | sort
echo "=== head dim 64, every peer, call 19's missing rows (x fastest)"
timeout -k 5 30 $L report "$out/k/d64" 2>/dev/null | sed -n '/x fastest/,$p' | head -40
tar -C "$out" -czf "$out/k.tgz" k && rm -rf "$out/k"
ls "$out"
