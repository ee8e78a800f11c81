#!/bin/sh
# Call 23 (session of 2026-12-04 morning), with bin/longca.gz and bin/cuda.test.gz carried:
# the GPU tests of what lands (sm90's source is a5eb0b9's; the Go side has the signal fix
# and the interrupt report), and a SIGINT in a GPU sweep: exit 130, the rows so far shown.
#   sh scripts/device/call23.sh OUT
set -u
out=${1:?usage: call23.sh OUT}
mkdir -p "$out/f"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
t0=$(date +%s)
STEP_TIMEOUT=110 sh kernels/cuda/gpu.sh "$out/f" test sm90 >/dev/null 2>&1
echo "# tests done at $(($(date +%s) - t0)) s" >>"$out/f/summary.txt"
bin/longca kernel --kernels cuda,cudnn --masks full,causal --seqlens 8K,16K,32K --heads 64:8 --passes fwd,bwd \
	-w 3 -n 10 --out "$out/f/sigint" >"$out/f/sigint.out" 2>"$out/f/sigint.log" &
pid=$!
sleep 25
kill -INT $pid
wait $pid
echo "# SIGINT after 25 s: exit $?; $(grep -c '"message":"case"' "$out/f/sigint.log") cases logged; $(grep -c 'SA_ONSTACK\|^goroutine ' "$out/f/sigint.log") crash lines; last: $(tail -1 "$out/f/sigint.log" | cut -c1-200)" >>"$out/f/summary.txt"
cat "$out/f/summary.txt"
tail -8 "$out/f/sigint.out"
tar -C "$out" -czf "$out/f.tgz" f && rm -rf "$out/f"
