#!/bin/sh
# Runs on the GPU machine, from the repository root, what `make device` built here:
#   sh kernels/cuda/gpu.sh test    the GPU tests (internal/cuda, kernels/cuda): NVRTC log and
#                                  kernel resources first, then every mask fwd+bwd vs the CPU
#                                  reference, once for each kernel version (v1, v2)
#   sh kernels/cuda/gpu.sh bench   times the versions that passed on full/causal 16K, picks the
#                                  faster, sweeps every mask (TestBench), then the peers
#                                  (bin/longca kernel --kernels torch:*) in the same call
# Environment: LONGCA_BENCH_* (kernels/cuda/bench_test.go), BENCH_SEQLENS, BENCH_MHA_SEQLENS,
# BENCH_FWD and BENCH_BWD (skip the choice),
# PEER_KERNELS, PEER_MASKS, PEER_SEQLENS. Logs go to /tmp/longca-out, and as one
# results.tgz to $OUT when set.
set -u
out=/tmp/longca-out
mkdir -p "$out"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc}
export NCCL_NVLS_ENABLE=0
rc=0
pack() { [ -n "${OUT:-}" ] && tar -C "$out" -czf "$OUT/results-$1.tgz" . ; }
case "${1:-test}" in
test)
	bin/cuda.test -test.run '^TestCompile$' -test.v -test.count=1 >"$out/compile.log" 2>&1 || rc=1
	cat "$out/compile.log"
	[ $rc = 0 ] || { pack test; exit 1; }
	bin/icuda.test -test.v -test.count=1 >"$out/icuda.log" 2>&1 || rc=1
	grep -hE '^(--- |ok|FAIL|PASS)|panic' "$out/icuda.log"
	for pair in ${TEST_PAIRS:-"v1 v2" "v2 v1" "v3 v2"}; do
		set -- $pair
		log="$out/cuda-fwd$1-bwd$2.log"
		LONGCA_CUDA_FWD=$1 LONGCA_CUDA_BWD=$2 bin/cuda.test -test.v -test.count=1 -test.run "${GPU_TESTS:-.}" -test.timeout 20m >"$log" 2>&1 || rc=1
		grep -hE '^(--- |ok|FAIL|PASS)|bwd=(true|false): FAIL|panic' "$log"
		echo "# fwd $1 bwd $2: $(grep -c 'bwd=.*: PASS' "$log") checks passed, $(grep -c 'bwd=.*: FAIL' "$log") failed"
		# a version is good when all 34 checks of its pass ran and passed (tests that stop
		# early on an error run fewer)
		for p in false:fwd-$1 true:bwd-$2; do
			n=$(grep -c "bwd=${p%%:*}: PASS" "$log"); f=$(grep -c "bwd=${p%%:*}: FAIL" "$log")
			[ "$n" -ge 34 ] && [ "$f" = 0 ] && ! grep -q panic "$log" && touch "$out/ok-${p#*:}"
		done
	done
	ls "$out" | grep '^ok-' | tr '\n' ' '; echo
	pack test
	exit $rc
	;;
bench)
	mkdir -p "$out/slices"
	# pick the faster of the versions that passed the tests
	best() { # pass, then the versions
		pass=$1; shift; bestv=""; bestt=0
		for v in "$@"; do
			[ -e "$out/ok-$pass-$v" ] || continue
			t=$(env LONGCA_BENCH=1 LONGCA_CUDA_FWD=$v LONGCA_CUDA_BWD=$v LONGCA_BENCH_SEQLENS=16384 LONGCA_BENCH_HEADS=64:8 \
				LONGCA_BENCH_MASKS=full,causal LONGCA_BENCH_PASSES=$pass bin/cuda.test -test.run '^TestBench$' -test.count=1 2>&1 |
				tee -a "$out/variants.log" | python3 -c 'import sys,json; print(sum(json.loads(l)["tflops"] for l in sys.stdin if l.startswith("{")))')
			echo "# $pass $v: sum of full+causal 16K TFLOP/s = $t" >&2
			if python3 -c "import sys; sys.exit(0 if float('$t' or 0) > float('$bestt') else 1)"; then bestv=$v; bestt=$t; fi
		done
		echo "${bestv:-v1}"
	}
	fv=${BENCH_FWD:-$(best fwd v1 v3)}; bv=${BENCH_BWD:-$(best bwd v1 v2)}
	echo "# using fwd $fv bwd $bv"
	export LONGCA_CUDA_FWD=$fv LONGCA_CUDA_BWD=$bv LONGCA_BENCH=1
	LONGCA_BENCH_SLICES="$out/slices" LONGCA_BENCH_SEQLENS=${BENCH_SEQLENS:-8192,16384} LONGCA_BENCH_HEADS=64:8 \
		bin/cuda.test -test.run '^TestBench$' -test.v -test.count=1 -test.timeout 30m >"$out/bench-gqa.log" 2>&1 || rc=1
	[ "${BENCH_MHA_SEQLENS:-}" = none ] || LONGCA_BENCH_SEQLENS=${BENCH_MHA_SEQLENS:-8192} LONGCA_BENCH_HEADS=64:64 \
		bin/cuda.test -test.run '^TestBench$' -test.v -test.count=1 -test.timeout 30m >"$out/bench-mha.log" 2>&1 || rc=1
	cat "$out"/bench-*.log | grep '^{' >"$out/cuda.jsonl"
	grep -E '^  |^#|FAIL|panic' "$out/bench-gqa.log" | grep -E 'full |causal |#|FAIL|panic' | head -60
	# the peers through longca's own worker protocol (kernels/external), checked and timed alike
	bin/longca kernel --kernels "${PEER_KERNELS:-torch:flash,torch:cudnn,torch:flex}" --masks "${PEER_MASKS:-full,causal}" \
		--seqlens "${PEER_SEQLENS:-8K,16K}" --heads 64:8 --out "$out/peers" >"$out/peers.log" 2>&1 || rc=1
	grep -v '^{' "$out/peers.log" | tail -60
	pack bench
	exit $rc
	;;
esac
echo "usage: gpu.sh test|bench" >&2
exit 2
