#!/bin/sh
# Runs on the GPU machine, from the repository root, what `make device` built here:
#   sh kernels/cuda/gpu.sh test    the GPU tests (internal/cuda, kernels/cuda): NVRTC log and
#                                  kernel resources first, then every mask fwd+bwd vs the CPU reference
#   sh kernels/cuda/gpu.sh bench   the kernel's timings (TestBench) and then the peers
#                                  (bin/peers/torch_attention.py) on the same masks
# Environment: LONGCA_BENCH_* (see kernels/cuda/bench_test.go), PEER_KERNELS, PEER_SEQLENS,
# PEER_FLEX_SEQLENS; logs go to $OUT (or /tmp/longca-out).
set -u
out=${OUT:-/tmp/longca-out}
mkdir -p "$out"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc}
export NCCL_NVLS_ENABLE=0
rc=0
case "${1:-test}" in
test)
	bin/cuda.test -test.run '^TestCompile$' -test.v -test.count=1 >"$out/compile.log" 2>&1 || rc=1
	cat "$out/compile.log"
	[ $rc = 0 ] || exit 1
	bin/icuda.test -test.v -test.count=1 >"$out/icuda.log" 2>&1 || rc=1
	bin/cuda.test -test.v -test.count=1 -test.run "${GPU_TESTS:-.}" -test.timeout 20m >"$out/cuda.log" 2>&1 || rc=1
	grep -hE '^(--- |ok|FAIL|PASS)|bwd=(true|false): FAIL|panic' "$out/icuda.log" "$out/cuda.log"
	echo "# checks: $(grep -c 'bwd=.*: PASS' "$out/cuda.log") passed, $(grep -c 'bwd=.*: FAIL' "$out/cuda.log") failed"
	exit $rc
	;;
bench)
	mkdir -p "$out/slices"
	LONGCA_BENCH=1 LONGCA_BENCH_SLICES="$out/slices" bin/cuda.test -test.run '^TestBench$' -test.v -test.count=1 -test.timeout 30m >"$out/bench.log" 2>&1 || rc=1
	grep -v '^{' "$out/bench.log" | grep -vE '^(=== RUN|--- PASS|PASS|ok)'
	grep '^{' "$out/bench.log" >"$out/cuda.jsonl"
	PYTHONUNBUFFERED=1 python3 bin/peers/torch_attention.py --seqlens "${PEER_SEQLENS:-8192,16384}" --masks full,causal \
		--heads 64:8 --kernels "${PEER_KERNELS:-sdpa-flash,sdpa-cudnn}" >"$out/peers.jsonl" 2>"$out/peers.log" || rc=1
	for s in ${PEER_FLEX_SEQLENS:-}; do
		PYTHONUNBUFFERED=1 python3 bin/peers/torch_attention.py --kernels flex --heads 64:8 --slices "$out"/slices/*-"$s".json \
			>>"$out/peers.jsonl" 2>>"$out/peers.log" || rc=1
	done
	grep -vE 'Warning|warn' "$out/peers.log" | tail -80
	exit $rc
	;;
esac
echo "usage: gpu.sh test|bench" >&2
exit 2
