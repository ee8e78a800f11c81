#!/bin/sh
# The merge, per step (docs/cp-gpu.md): the ring's per-step log-sum-exp merges and dq
# sums before and after their rewrite, at 8 ranks on one GPU. Build here with
# `make merge-device` (bin/longca; bin/longca-before from MERGE_BEFORE, main before the
# rewrite; bin/cp.test, the GPU tests of the helper kernels; packed as
# bin/merge-device.tgz: carry that alone), then on the GPU machine, from the repository
# root:
#   sh spmd/cp/merge-bench.sh OUTDIR
# Steps, each under `timeout`, about 110 s in all, bounded at 120 s (MB_BUDGET):
#   0. NVRTC compiles the attention kernel (one small unchecked case; cached after)
#   1. for each binary (before, after): longca cp --ranks 8 --kernel cuda, ring-p2p (1x8,
#      zigzag) and usp (2x4) x full and causal_document_long x fwd,bwd at 8K tokens per
#      rank, 64:8, d 128, bf16, checked (at a reduced size: --check-budget 2e8), the kernel
#      alone measured in the same run (--baseline measure), --overlap, -w 1 -n 3
#   2. bin/cp.test, with what time is left: NVRTC compiles the helper kernels, and each
#      (the merges of the engine's dtype triples, in place and apart, the adds) matches
#      its CPU emulation
# The table last: per method x mask x pass, the median ms and cp_efficiency before ->
# after, and the change of the median.
# Environment (to try the script on a CPU: MB_KERNEL=ref MB_TOKENS=256 MB_HEADS=4:2
# MB_HEAD_DIM=16): MB_METHODS (ring-p2p,usp), MB_MASKS (full,causal_document_long),
# MB_TOKENS (8K), MB_ITERS (3), MB_WARMUP (1), MB_TIMEOUT (45 s per sweep), MB_BUDGET
# (120 s), MB_KERNEL (cuda), MB_HEADS (64:8), MB_HEAD_DIM (128).
set -u
out=${1:-/tmp/longca-merge}
if [ -f bin/merge-device.tgz ]; then
	tar -C bin -xzf bin/merge-device.tgz || exit 1
fi
if [ ! -x bin/longca ]; then
	echo "merge-bench.sh: no bin/longca: build it with make merge-device and carry bin/merge-device.tgz" >&2
	exit 2
fi
rm -rf "$out"
mkdir -p "$out"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc}
methods=${MB_METHODS:-ring-p2p,usp}
masks=${MB_MASKS:-full,causal_document_long}
tokens=${MB_TOKENS:-8K}
iters=${MB_ITERS:-3}
warmup=${MB_WARMUP:-1}
limit=${MB_TIMEOUT:-45}
budget=${MB_BUDGET:-120}
kernel=${MB_KERNEL:-cuda}
start=$(date +%s)
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
# left N: N seconds, or what is left of the budget when less (0: skip)
left() {
	l=$((start + budget - $(date +%s)))
	[ "$l" -lt 5 ] && l=0
	[ "$l" -lt "$1" ] && echo "$l" || echo "$1"
}

# 0. Compile the attention kernel (NVRTC, cached in LONGCA_CACHE_DIR) outside the timed
# sweeps' limits: one small case, unchecked.
t=$(left 20)
[ "$t" -gt 0 ] && timeout -k 5 "$t" bin/longca kernel --kernels "$kernel" --masks causal --seqlens 1K --heads "${MB_HEADS:-64:8}" \
	--head-dim "${MB_HEAD_DIM:-128}" --passes fwd,bwd --no-check -w 0 -n 1 --out "$out/warm" >"$out/warm.log" 2>&1
note "0. kernel compile warm-up: rc $? ($(($(date +%s) - start)) s)"

# measure NAME BINARY: one sweep into $out/NAME (rank files), NAME.arrow and NAME.report.
measure() {
	t=$(left "$limit")
	if [ "$t" = 0 ]; then
		note "1. $1: SKIPPED (out of time)"
		return
	fi
	timeout -k 5 "$t" "$2" --log-format json cp --ranks 8 --kernel "$kernel" --methods "$methods" --masks "$masks" \
		--tokens-per-rank "$tokens" --heads "${MB_HEADS:-64:8}" --head-dim "${MB_HEAD_DIM:-128}" --dtype bf16 \
		--ulysses 2 --ring 4 --passes fwd,bwd --samples 1 -w "$warmup" -n "$iters" --check --check-budget 2e8 \
		--baseline measure --overlap --out "$out/$1" --run-id "merge-$1" >"$out/$1.log" 2>&1
	rc=$?
	"$2" merge "$out/$1" --out "$out/$1.arrow" >/dev/null 2>&1
	"$2" report "$out/$1.arrow" >"$out/$1.report" 2>&1
	rows=$(grep -c '"message":"cp"' "$out/$1.log")
	notok=$(grep '"message":"cp"' "$out/$1.log" | grep -vc '"status":"ok"')
	note "1. $1: rc $rc, rows $rows (want 8), not ok $notok ($(($(date +%s) - start)) s)"
	[ "$rc" = 0 ] || tail -3 "$out/$1.log"
}
runs=""
if [ -x bin/longca-before ]; then
	measure before bin/longca-before
	runs="before"
fi
measure after bin/longca
runs="$runs after"

# 2. The helper kernels on the GPU against their emulation.
if [ -x bin/cp.test ]; then
	t=$(left 20)
	if [ "$t" -gt 0 ]; then
		timeout -k 5 "$t" bin/cp.test -test.run '^(TestGPUOpsCompile|TestGPUPrimsMatchEmulation)$' -test.v -test.count=1 >"$out/prims.log" 2>&1
		note "2. cp.test helper kernels vs emulation: rc $? ($(grep -c '^--- PASS' "$out/prims.log") passed, $(grep -c '^--- FAIL' "$out/prims.log") failed)"
		grep -E '^--- FAIL|merge|add bf16' "$out/prims.log" | head -20
	fi
fi

echo "# ---- longca report, CP table (after)"
sed -n '/^# CP methods/,$p' "$out/after.report"
# The rows from each run's log: method mask pass median_ms cp_efficiency.
for r in $runs; do
	grep '"message":"cp"' "$out/$r.log" | sed "s/^/$r /"
done | awk '
	function field(s, k,   i, v) {
		i = index(s, "\"" k "\":")
		if (i == 0) return "-"
		v = substr(s, i + length(k) + 3)
		sub(/^"/, "", v)
		sub(/[",}].*/, "", v)
		return v
	}
	{
		key = field($0, "method") " " field($0, "mask") " " field($0, "pass")
		v = field($0, "median_ms"); ms[$1, key] = v == "-" ? v : sprintf("%.3f", v)
		v = field($0, "cp_efficiency"); eff[$1, key] = v == "-" ? v : sprintf("%.2f", v)
		if (!(key in seen)) { seen[key] = 1; order[++n] = key }
	}
	END {
		printf "# ---- the merge, per step: 8 ranks on one GPU, median ms and cp_efficiency, before -> after\n"
		printf "%-34s %-22s %-18s %s\n", "method mask pass", "median ms", "cp_efficiency", "change"
		for (i = 1; i <= n; i++) {
			k = order[i]
			b = ms["before", k]; a = ms["after", k]
			ch = (b + 0 > 0 && a + 0 > 0) ? sprintf("%+.1f%%", 100 * (a / b - 1)) : "-"
			printf "%-34s %-22s %-18s %s\n", k, b " -> " a, eff["before", k] " -> " eff["after", k], ch
		}
	}'
cat "$summary"
