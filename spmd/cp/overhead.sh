#!/bin/sh
# The CP engine's overhead at one rank (docs/cp-gpu.md, "Engine overhead at one rank"):
# where a method should be the bare kernel (one rank), how close each one gets.
# Build here with `make overhead-device` (bin/longca and bin/longca-before, packed as
# bin/overhead-device.tgz, about 20 MB: carry that alone), or `make cp-device` for no A/B;
# on the GPU machine, from the repository root:
#   sh spmd/cp/overhead.sh OUTDIR
# Every method x full, causal, full_document_long, causal_document_long x fwd,bwd at 8K
# tokens, one rank through NCCL under mpirun (--backend nccl --kernel cuda), checked (at a
# reduced size: --check-budget; usp and loongtrain on a 1x1 mesh: --ulysses 1 --ring 1),
# with the kernel alone measured in the same run
# (--baseline measure), 3 warm-ups and 10 timed iterations. About 70 s; with
# bin/longca-before (the same build from the commit before the fix: an A/B in one call)
# run the same way first, about 140 s. Everything is bounded (OVH_TIMEOUT per run, 120 s).
# The table last: cp_efficiency fwd / bwd per method x mask (before -> after with the
# A/B), then each run's peak memory. Target: every cell >= 0.95.
# Environment: OVH_METHODS (every method longca list names, comma-separated), OVH_MASKS (the 4 CP masks), OVH_TOKENS (8K), OVH_ITERS (10), OVH_WARMUP
# (3), OVH_TIMEOUT (120 s per run), OVH_KERNEL (cuda), OVH_BACKEND (nccl),
# OVH_LAUNCH ("mpirun --allow-run-as-root -np 1 ..."; empty runs bin/longca directly, to
# try the script on a CPU with OVH_KERNEL=ref OVH_BACKEND=local OVH_TOKENS=256 OVH_HEADS=4:2
# OVH_HEAD_DIM=16).
set -u
out=${1:-/tmp/longca-overhead}
if [ -f bin/overhead-device.tgz ]; then
	tar -C bin -xzf bin/overhead-device.tgz || exit 1
elif [ ! -x bin/longca ] && [ -f bin/cp-device.tgz ]; then
	tar -C bin -xzf bin/cp-device.tgz || exit 1
fi
rm -rf "$out"
mkdir -p "$out"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc}
export NCCL_NVLS_ENABLE=0
# every registered method (longca list), unless named
methods=${OVH_METHODS:-$(bin/longca list 2>/dev/null | sed -n '/^# cp methods/,/^#/{/^  /p}' | awk '{print $1}' | paste -sd, -)}
tokens=${OVH_TOKENS:-8K}
iters=${OVH_ITERS:-10}
warmup=${OVH_WARMUP:-3}
limit=${OVH_TIMEOUT:-120}
kernel=${OVH_KERNEL:-cuda}
backend=${OVH_BACKEND:-nccl}
launch=${OVH_LAUNCH-mpirun --allow-run-as-root -np 1 -x NCCL_NVLS_ENABLE -x MASTER_ADDR=127.0.0.1 -x LONGCA_CACHE_DIR}
masks=${OVH_MASKS:-full,causal,full_document_long,causal_document_long}
start=$(date +%s)

# measure NAME BINARY: one sweep into $out/NAME (rank files) and $out/NAME.arrow.
measure() {
	# shellcheck disable=SC2086 # launch is a word list
	timeout -k 10 "$limit" $launch "$2" --log-format json cp --backend "$backend" --kernel "$kernel" \
		--methods "$methods" --masks "$masks" --tokens-per-rank "$tokens" --ulysses 1 --ring 1 --heads "${OVH_HEADS:-64:8}" --head-dim "${OVH_HEAD_DIM:-128}" --dtype bf16 \
		--passes fwd,bwd --samples 1 -w "$warmup" -n "$iters" --check --check-budget 5e8 --baseline measure \
		--out "$out/$1" --run-id "overhead-$1" >"$out/$1.log" 2>&1
	rc=$?
	"$2" merge "$out/$1" --out "$out/$1.arrow" >/dev/null 2>&1
	"$2" report "$out/$1.arrow" >"$out/$1.report" 2>&1
	rows=$(grep -c '"message":"cp"' "$out/$1.log")
	notok=$(grep '"message":"cp"' "$out/$1.log" | grep -vc '"status":"ok"')
	echo "$1: rc $rc, rows $rows, not ok $notok ($(($(date +%s) - start)) s)" | tee -a "$out/summary.txt"
	[ "$rc" = 0 ] || tail -5 "$out/$1.log"
}

# cptable REPORT: the CP table of longca report as "method mask pass eff peak" lines (the
# columns found by the header's names, which move as columns are added).
cptable() {
	sed -n '/^# CP methods/,$p' "$1" | awk '/^# method/ { for (i = 2; i <= NF; i++) c[$i] = i - 1 }
		$1 !~ /^#/ && c["eff"] && NF >= c["eff"] { print $1, $c["mask"], $c["pass"], $c["eff"], $NF }'
}

runs=""
if [ -x bin/longca-before ]; then
	measure before bin/longca-before
	runs="before"
fi
measure after bin/longca
runs="$runs after"

echo "# ---- longca report, CP table (after)"
sed -n '/^# CP methods/,$p' "$out/after.report"
echo "# ---- cp_efficiency at one rank, $backend, $kernel, $tokens tokens: fwd / bwd$([ -x bin/longca-before ] && echo ', before -> after')"
for r in $runs; do cptable "$out/$r.report" | sed "s/^/$r /"; done | awk -v masks="$masks" -v methods="$methods" '
	{ key = $2 SUBSEP $3; eff[$1, key, $4] = $5; peak[$1, key, $4] = $6; seen[$2] = 1; run[$1] = 1 }
	END {
		n = split(masks, ms, ",")
		printf "%-15s", "method"
		for (i = 1; i <= n; i++) printf " %-26s", ms[i]
		printf "\n"
		nm = split(methods, order, ",")
		for (j = 1; j <= nm; j++) {
			m = order[j]
			if (!(m in seen)) continue
			printf "%-15s", m
			for (i = 1; i <= n; i++) {
				k = m SUBSEP ms[i]
				a = eff["after", k, "fwd"] "/" eff["after", k, "bwd"]
				if ("before" in run) a = eff["before", k, "fwd"] "/" eff["before", k, "bwd"] " -> " a
				printf " %-26s", a
			}
			printf "\n"
		}
		printf "# peak GiB on full (fwd/bwd, after):"
		for (j = 1; j <= nm; j++) if (order[j] in seen) printf " %s %s/%s", order[j], peak["after", order[j] SUBSEP ms[1], "fwd"], peak["after", order[j] SUBSEP ms[1], "bwd"]
		printf "\n"
	}'
cat "$out/summary.txt"
