#!/bin/sh
# The CP methods on the GPU machine, at the published setting. Build here with
# `make cp-device` (bin/longca, bin/cudamover.test, bin/nccl.test, packed as
# bin/cp-device.tgz: carry that alone), then from the repository root there:
#   sh spmd/cp/gpu.sh OUTDIR
# Steps, each bounded by `timeout`, about 6 minutes in all:
#   1. one rank through NCCL under mpirun: every method x the 4 CP masks x fwd,bwd at 8K
#      tokens, checked, with the kernel baseline (efficiency ~1 expected at one rank)
#   2. 8 simulated ranks on the GPU (comm/local, the device mover, event-ordered
#      transfers): every method (usp and loongtrain on 2x4, loongtrain in 2 windows) x the
#      4 CP masks x fwd,bwd at 8K tokens per rank (seqlen 64K), GQA 64:8, head dim 128,
#      bf16, one sample, checked (at a reduced size: --check-budget), efficiency against
#      the kernel alone at 8K (--baseline measure) and overlap (--overlap)
#   3. bin/cudamover.test (the event-ordered lane ring, the collectives), then
#      comm/nccl's gpucheck.sh, if time is left
# Logs and results go to OUTDIR (default /tmp/longca-cp); the tables come last.
# Environment: CP_METHODS, CP_MASKS, CP_TOKENS (8K), CP_ITERS (2), CP_WARMUP (1),
# CP_STEP_TIMEOUT (seconds per method sweep, 50), CP_BUDGET (seconds in all, 345),
# CP_KERNEL, CP_HEADS, CP_HEAD_DIM (cuda, 64:8, 128: only to try the script on a CPU).
set -u
out=${1:-/tmp/longca-cp}
if [ ! -x bin/longca ] && [ -f bin/cp-device.tgz ]; then
	tar -C bin -xzf bin/cp-device.tgz || exit 1
fi
rm -rf "$out"
mkdir -p "$out"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc}
export NCCL_NVLS_ENABLE=0
methods=${CP_METHODS:-ring-p2p ring-allgather ulysses usp loongtrain balanced}
masks=${CP_MASKS:-full,causal,full_document_long,causal_document_long}
tokens=${CP_TOKENS:-8K}
kernel=${CP_KERNEL:-cuda}
heads=${CP_HEADS:-64:8}
hdim=${CP_HEAD_DIM:-128}
iters=${CP_ITERS:-2}
warmup=${CP_WARMUP:-1}
steptime=${CP_STEP_TIMEOUT:-50}
start=$(date +%s)
budget=${CP_BUDGET:-345} # seconds for the whole script
reserve=0                # seconds of the budget kept for the steps after the current one
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
	if [ "$t" = 0 ]; then
		rc=skip
		return
	fi
	timeout "$t" "$@"
	rc=$?
}
# rows, wrong, notok LOG: counts of rank 0's row lines in a run's log
rows() { grep -o '"message":"cp"' "$1" | wc -l; }
wrong() { grep '"message":"cp"' "$1" | grep -c '"status":"wrong"'; }
notok() { grep '"message":"cp"' "$1" | grep -vc '"status":"ok"'; }
common="--masks $masks --heads $heads --head-dim $hdim --dtype bf16 --passes fwd,bwd --samples 1 -w $warmup -n $iters --check --check-budget 5e8 --baseline measure"

# 1. One rank through NCCL: every method (the run that crashed after two methods). It
# also compiles the kernel first (NVRTC, cached in LONGCA_CACHE_DIR for the later runs).
reserve=$(($(echo $methods | wc -w) * steptime + 30))
run 70 mpirun --allow-run-as-root -np 1 -x NCCL_NVLS_ENABLE -x MASTER_ADDR=127.0.0.1 -x LONGCA_CACHE_DIR \
	bin/longca --log-format json cp --backend nccl --kernel "$kernel" --tokens-per-rank "$tokens" $common \
	--out "$out/nccl1" >"$out/nccl1.log" 2>&1
note "1. longca cp --backend nccl, 1 rank, 6 methods: $(status $rc)  rows $(rows "$out/nccl1.log") (want 48), not ok $(notok "$out/nccl1.log"), wrong $(wrong "$out/nccl1.log")"
[ "$rc" = 0 ] || tail -5 "$out/nccl1.log"

# 2. 8 simulated ranks on one GPU, one sweep per method (each bounded; rows are flushed
# as they are agreed, so a sweep cut short keeps what it measured).
reserve=30
for m in $methods; do
	run "$steptime" bin/longca --log-format json cp --ranks 8 --kernel "$kernel" --methods "$m" --tokens-per-rank "$tokens" \
		--ulysses 2 --ring 4 --windows 2 --overlap $common --out "$out/ranks8" --run-id "ranks8-$m" >"$out/ranks8-$m.log" 2>&1
	note "2. longca cp --ranks 8 --methods $m: $(status $rc)  rows $(rows "$out/ranks8-$m.log") (want 8), not ok $(notok "$out/ranks8-$m.log"), wrong $(wrong "$out/ranks8-$m.log")"
	[ "$rc" = 0 ] || tail -3 "$out/ranks8-$m.log"
done
reserve=0

# 3. The device mover's own GPU tests, then comm/nccl's checks, while time is left.
run 30 bin/cudamover.test -test.v -test.count=1 >"$out/cudamover-test.log" 2>&1
note "3. cudamover.test (event-ordered lane ring, collectives): $(status $rc)"
grep -E '^(--- |#)|panic' "$out/cudamover-test.log"
run 40 sh comm/nccl/gpucheck.sh bin/nccl.test >"$out/nccl-gpucheck.log" 2>&1
note "   nccl gpucheck: $(status $rc)"
note "elapsed $(($(date +%s) - start)) s"

# The tables: what every run measured (the rank files, merged), the 8-rank table last.
echo "# ---- steps"
cat "$summary"
echo "# ---- 1 rank through NCCL"
bin/longca merge "$out/nccl1" --out "$out/nccl1.arrow" >/dev/null 2>&1
bin/longca report "$out/nccl1.arrow" 2>&1 | sed -n '/^# CP methods/,$p'
echo "# ---- 8 simulated ranks on one GPU"
bin/longca merge "$out/ranks8" --out "$out/ranks8.arrow" >/dev/null 2>&1
bin/longca report "$out/ranks8.arrow" 2>&1 | sed -n '/^# CP methods/,$p'
