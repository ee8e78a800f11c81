#!/bin/sh
# The CP methods on the GPU machine, device-resident. Build here with `make cp-device`
# (bin/longca, bin/cp.test, bin/cudamover.test, bin/nccl.test), carry bin/, then run from
# the repository root there:
#   sh spmd/cp/gpu.sh
# Steps, each bounded by `timeout` (the whole under 6 minutes):
#   1. bin/cp.test: NVRTC log of the helper kernels, the primitives against their host
#      emulation, every method x the 4 CP masks x 2/4/8 simulated ranks on one GPU,
#      forward and backward, against the CPU reference (then bin/cudamover.test)
#   2. bin/longca cp --ranks 8 --kernel cuda: each method x the 4 CP masks x fwd,bwd at 8K
#      tokens per rank, GQA 64:8, head dim 128, bf16, checked (at a reduced length)
#   3. one rank through NCCL under mpirun, then comm/nccl's gpucheck.sh
# Logs and results go to /tmp/longca-cp and, when $OUT is set, to $OUT (7 files).
# Environment: CP_METHODS, CP_MASKS, CP_TOKENS (8K), CP_ITERS (3), CP_WARMUP (1),
# CP_STEP_TIMEOUT (seconds per method sweep, 50; the sweeps leave 90 s for step 3), CP_BUDGET (seconds for everything, 340);
# CP_KERNEL, CP_HEADS, CP_HEAD_DIM (cuda, 64:8, 128) only to try the script on a CPU.
set -u
if [ ! -x bin/cp.test ] && [ -f bin/cp-device.tgz ]; then
	tar -C bin -xzf bin/cp-device.tgz || exit 1
fi
out=/tmp/longca-cp
rm -rf "$out"
mkdir -p "$out"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc}
export NCCL_NVLS_ENABLE=0
methods=${CP_METHODS:-ring-p2p ring-allgather ulysses usp loongtrain}
masks=${CP_MASKS:-full,causal,full_document_long,causal_document_long}
tokens=${CP_TOKENS:-8K}
kernel=${CP_KERNEL:-cuda}
heads=${CP_HEADS:-64:8}
hdim=${CP_HEAD_DIM:-128}
iters=${CP_ITERS:-3}
warmup=${CP_WARMUP:-1}
steptime=${CP_STEP_TIMEOUT:-50}
start=$(date +%s)
budget=${CP_BUDGET:-340} # seconds for the whole script
reserve=0 # seconds of the budget kept for the steps after the current one
# bound N: N, or the seconds left of the budget (less the reserve) when fewer (0: skip)
bound() {
	l=$((start + budget - reserve - $(date +%s)))
	[ "$l" -lt 5 ] && l=0
	[ "$l" -lt "$1" ] && echo "$l" || echo "$1"
}
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
status() { case $1 in 0) echo ok ;; 124 | 137) echo "TIMEOUT" ;; skip) echo "SKIPPED (out of time)" ;; *) echo "FAIL($1)" ;; esac; }
# run SECONDS CMD...: the command under timeout, or rc "skip" when no time is left
run() {
	t=$(bound "$1")
	shift
	if [ "$t" = 0 ]; then rc=skip; return; fi
	timeout "$t" "$@"
	rc=$?
}

# 1. the GPU tests
run 110 bin/cp.test -test.run '^TestGPU' -test.v -test.count=1 >"$out/cp-test.log" 2>&1
sed -n '/^=== RUN   TestGPUOpsCompile/,/^--- /p' "$out/cp-test.log" | head -40
grep -E '^(--- |ok|FAIL|PASS)|^    --- FAIL|worst error|panic' "$out/cp-test.log" | grep -v '^    --- PASS' | tail -30
pass=$(grep -c '^    --- PASS: TestGPUMethodsMatchReference/' "$out/cp-test.log")
fail=$(grep -c '^    --- FAIL: TestGPUMethodsMatchReference/' "$out/cp-test.log")
note "cp.test            $(status $rc)  method cases passed $pass, failed $fail; $(grep -o 'worst error / tolerance over the table: [0-9.]*' "$out/cp-test.log")"
run 30 bin/cudamover.test -test.v -test.count=1 >"$out/cudamover-test.log" 2>&1
grep -E '^(--- |ok|FAIL|PASS|#)|panic' "$out/cudamover-test.log"
note "cudamover.test     $(status $rc)"

# 2. 8 simulated ranks on one GPU, one sweep per method (each bounded; rows are flushed
# as they are measured)
reserve=90
for m in $methods; do
	run "$steptime" bin/longca cp --ranks 8 --kernel "$kernel" --methods "$m" --masks "$masks" \
		--tokens-per-rank "$tokens" --heads "$heads" --head-dim "$hdim" --dtype bf16 --passes fwd,bwd \
		--samples 1 -w "$warmup" -n "$iters" --check --check-budget 5e8 --out "$out/results/$m" \
		>"$out/sweep-$m.log" 2>&1
	cat "$out/sweep-$m.log" >>"$out/cp-sweep.log"
	grep -E '^(#|  )' "$out/sweep-$m.log" | grep -v '^# rank files\|^# results'
	rows=$(grep -c '"message":"cp"' "$out/sweep-$m.log")
	wrong=$(grep -c '"status":"wrong"' "$out/sweep-$m.log")
	note "longca cp $m: $(status $rc)  rows $rows, wrong $wrong"
	[ $rc = 0 ] || tail -3 "$out/sweep-$m.log"
done

reserve=0

# 3. one rank through NCCL (mpirun), then comm/nccl's own checks
run 60 mpirun --allow-run-as-root -np 1 -x NCCL_NVLS_ENABLE -x MASTER_ADDR=127.0.0.1 -x LONGCA_CACHE_DIR \
	bin/longca cp --backend nccl --kernel "$kernel" --masks "$masks" --tokens-per-rank "$tokens" --heads "$heads" \
	--head-dim "$hdim" --dtype bf16 --passes fwd,bwd --samples 1 -w "$warmup" -n "$iters" --check-budget 5e8 \
	--out "$out/results/nccl" >"$out/nccl-cp.log" 2>&1
grep -E '^(#|  )' "$out/nccl-cp.log"
note "longca cp nccl 1 rank: $(status $rc)  rows $(grep -c '"message":"cp"' "$out/nccl-cp.log"), wrong $(grep -c '"status":"wrong"' "$out/nccl-cp.log")"
[ $rc = 0 ] || tail -5 "$out/nccl-cp.log"
run 60 sh comm/nccl/gpucheck.sh bin/nccl.test >"$out/nccl-gpucheck.log" 2>&1
grep -E '^(--- |ok|FAIL|#)|panic' "$out/nccl-gpucheck.log" | tail -15
note "nccl gpucheck      $(status $rc)"

note "elapsed $(($(date +%s) - start)) s"
if [ -n "${OUT:-}" ]; then
	tar -C "$out" -czf "$OUT/cp-results.tgz" results 2>/dev/null
	cp "$out/cp-test.log" "$out/cudamover-test.log" "$out/cp-sweep.log" "$out/nccl-cp.log" \
		"$out/nccl-gpucheck.log" "$summary" "$OUT/" 2>/dev/null
fi
# the measured rows of every sweep (rank 0's progress lines), then the step summary
echo "# rows (rank 0): method mesh mask pass status time_ms TFLOP/s/GPU peak_GiB"
cat "$out"/sweep-*.log "$out/nccl-cp.log" 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    if not line.startswith("{"):
        continue
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if r.get("message") != "cp":
        continue
    peak = r.get("peak_mem_bytes")
    print("  %-15s %-14s %-21s %-4s %-6s %9s %8s %8s" % (r["method"], r["mesh"], r["mask"], r["pass"], r["status"],
        "%.2f" % r["median_ms"] if "median_ms" in r else "-", "%.1f" % r["tflops_per_gpu"] if "tflops_per_gpu" in r else "-",
        "%.2f" % (peak / 2**30) if peak else "-"))
' || grep -h '"message":"cp"' "$out"/sweep-*.log
echo "# summary"
cat "$summary"
