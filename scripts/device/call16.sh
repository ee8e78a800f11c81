#!/bin/sh
# Call 16 (session of 2026-12-04 early; docs/perf.md "Call 16"), from the repository root
# with bin/longca.gz and bin/cuda.test.gz carried (make device; gzip -kf bin/cuda.test):
#   sh scripts/device/call16.sh OUT
# 1. the GPU tests of the new default sm90 (call 15's three winners together: the lean
#    forward softmax, dQ converted through shared memory, the partial tiles' bits by
#    interval arithmetic), in full;
# 2. sm90 beside sm90-prev (call 13's kernel) and cudnn: forward full/causal 16K and 48K,
#    causal_document and sliding_window_causal 16K; backward full, causal, causal_document,
#    sliding_window_causal 16K (do the three winners add up?);
# 3. issue 19's must-show: the six CP methods with --kernel cuda (the new default), 8 ranks
#    on one GPU, 8K tokens per rank, the 4 CP masks, every row checked;
# 4. the suite's last two masks (block_causal_document 8K-48K, global_sliding_window 48K),
#    every kernel, every case checked (the `longca run` of call 17 may not reach them).
# Bounded to 585 s; the tables last; logs packed under OUT.
set -u
out=${1:?usage: call16.sh OUT}
mkdir -p "$out/k"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
for f in longca cuda.test; do
	[ -f "bin/$f.gz" ] && gunzip -c "bin/$f.gz" >"bin/$f" && chmod +x "bin/$f"
done
t0=$(date +%s)
L=bin/longca
bound() {
	left=$((585 - 15 - ($(date +%s) - t0)))
	[ "$left" -lt "$1" ] && echo $((left > 5 ? left : 0)) || echo "$1"
}
run() {
	n=$(bound "$1")
	shift
	[ "$n" -gt 0 ] || { echo "# skipped (no time left): $*" >>"$out/k/summary.txt"; return 124; }
	timeout -s INT -k 10 "$n" "$@"
}
STEP_TIMEOUT=$(bound 110) sh kernels/cuda/gpu.sh "$out/k" test sm90 >/dev/null 2>&1
echo "# tests done at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
for v in sm90 sm90-prev cudnn; do
	sel="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	run 20 $L kernel $sel --masks full,causal --seqlens 16K,48K --heads 64:8 --passes fwd -w 3 -n 10 \
		--out "$out/k/f-$v" >"$out/k/tf-$v.log" 2>&1
	run 20 $L kernel $sel --masks causal_document,sliding_window_causal --seqlens 16K --heads 64:8 --passes fwd -w 3 -n 10 \
		--out "$out/k/d-$v" >"$out/k/td-$v.log" 2>&1
	run 25 $L kernel $sel --masks full,causal,causal_document,sliding_window_causal --seqlens 16K --heads 64:8 --passes bwd -w 3 -n 10 \
		--out "$out/k/b-$v" >"$out/k/tb-$v.log" 2>&1
	echo "# side by side $v at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
done
rm -rf /tmp/mesh /tmp/rest
n=$(bound 215)
CP_METHODS=ulysses,balanced,ring-allgather,loongtrain,usp,ring-p2p CP_SPLITS=0 CP_BUDGET=$((n > 20 ? n - 15 : 5)) \
	sh spmd/cp/balanced_mesh_gpu.sh /tmp/mesh >"$out/mesh.txt" 2>&1
echo "# cp done at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
tar -C /tmp -czf "$out/mesh.tgz" mesh
K="cuda,cudnn,torch:cudnn,torch:flash,torch:flex,torch:varlen,torch:efficient"
run 150 $L kernel --kernels $K --masks block_causal_document --seqlens 8K,16K,32K,48K --heads 64:8 \
	--passes fwd,bwd -w 3 -n 10 --out /tmp/rest/bcd --run-id rest-bcd >"$out/rest-bcd.log" 2>&1
echo "# bcd rc=$? at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
run 60 $L kernel --kernels $K --masks global_sliding_window --seqlens 48K --heads 64:8 \
	--passes fwd,bwd -w 3 -n 10 --out /tmp/rest/gsw --run-id rest-gsw >"$out/rest-gsw.log" 2>&1
echo "# gsw rc=$? at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
tar -C /tmp -czf "$out/rest.tgz" rest
echo "# done at $(($(date +%s) - t0)) s"
echo "=== GPU tests and steps"; cat "$out/k/summary.txt"
echo "=== TFLOP/s: mask seqlen pass, sm90 / sm90-prev / cudnn"
for f in "$out"/k/t[fdb]-*.log; do
	v=$(basename "$f" .log); v=${v#t?-}
	grep -E '^  [a-z_]+ +[0-9]+ .* (fwd|bwd) ' "$f" | awk -v v="$v" '{ print $1, $2, $4, v, $7 }'
done >"$out/k/rates.txt"
awk -v order="sm90 sm90-prev cudnn" 'BEGIN { n = split(order, o, " ") } { r[$1 " " $2 " " $3, $4] = $5; k[$1 " " $2 " " $3] = 1 } END {
	for (c in k) { split(c, f, " "); printf "%-24s %6s %4s", f[1], f[2], f[3]; for (i = 1; i <= n; i++) printf " %8s", ((c, o[i]) in r) ? r[c, o[i]] : "-"; printf "\n" }
}' "$out/k/rates.txt" | sort -k3,3 -k1,1 -k2n
echo "=== 8 ranks, --kernel cuda (new sm90), the six methods"; tail -9 "$out/mesh.txt"
echo "=== block_causal_document and global_sliding_window 48K (x fastest)"
for r in bcd gsw; do
	timeout -k 5 30 $L report /tmp/rest/$r 2>/dev/null | sed -n '/x fastest/,$p' | head -14
done
tar -C "$out" -czf "$out/k.tgz" k && rm -rf "$out/k"
ls "$out"
