#!/bin/sh
# The balanced round on the GPU machine: the six CP methods x the 4 CP masks x fwd,bwd at
# 8K tokens per rank on 8 simulated ranks of one GPU (comm/local, the device mover,
# event-ordered transfers), every case checked, with the kernel alone measured in the same
# run (--baseline measure) and the transfers timed apart (--overlap); once with
# --kernel cuda, once with --kernel cudnn. Build here with `make cp-device` (carry
# bin/cp-device.tgz alone; this script unpacks it), then from the repository root there:
#   sh spmd/cp/balanced_gpu.sh OUTDIR
# Each kernel's sweep is one process over every method (the baseline kernel runs and the
# NVRTC compile are shared by the methods), balanced first, bounded by `timeout`; rows are
# written as they are measured, so a sweep cut short keeps what it finished. What bounds
# the time: the checks run the CPU reference at the smallest size CheckSize allows
# (--check-budget 5e8: 512 tokens, heads down to 8:1 where the method plans the same way;
# ulysses keeps 64:8), one warm-up and two timed iterations, one sample. Measured on the
# H200 before (DEVICE.md, data/h200: each case 9-17 s, a method's sweep 40-70 s, ulysses
# the longest: its check keeps 64:8 heads): the six methods with cuda take about 4.5
# minutes, so cudnn runs four (CP_CUDNN_METHODS: balanced, ulysses, ring-allgather,
# ring-p2p, about 3 minutes). Budget: CP_BUDGET seconds in all (default 460), cuda first
# (CP_CUDA_TIME, default 280), cudnn with what is left.
# Logs and results go to OUTDIR (default /tmp/longca-balanced); the table of cp_efficiency
# (fwd / bwd per method and mask, each kernel) comes last.
# Environment: CP_METHODS, CP_CUDNN_METHODS, CP_MASKS, CP_TOKENS (8K), CP_ITERS (2), CP_WARMUP (1),
# CP_KERNELS ("cuda cudnn"), CP_HEADS, CP_HEAD_DIM (64:8, 128: only to try it on a CPU),
# CP_SPLITS (balanced's --cp-ulysses: 0, the plan's choice per mask; e.g. 1,2,4,8 for one
# row per mesh U x 8/U), CP_OVERLAP (--overlap, the transfers timed apart; empty: not),
# CP_SETTLE (--settle: every rank's GPU idle this long before each pass and baseline; unset:
# longca's default, 250ms).
# CP_LAYOUT (balanced's --cp-layout: auto, blocks or thd; default auto, which takes the
# packed-documents layout per rank where the kernel, cudnn, runs it in fewer calls; the
# layout each balanced row took, and its peak memory, are listed before the tables).
# The cudnn round of the THD layout (issue 20), under 4 minutes:
#   CP_KERNELS=cudnn CP_SPLITS=1 CP_CUDNN_METHODS=balanced,ulysses,ring-allgather,ring-p2p,usp,loongtrain \
#     CP_BUDGET=225 sh spmd/cp/balanced_gpu.sh OUTDIR
set -u
out=${1:-/tmp/longca-balanced}
if [ ! -x bin/longca ] && [ -f bin/cp-device.tgz ]; then
	tar -C bin -xzf bin/cp-device.tgz || exit 1
fi
rm -rf "$out"
mkdir -p "$out"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc}
export NCCL_NVLS_ENABLE=0
methods=${CP_METHODS:-balanced,ulysses,ring-allgather,usp,loongtrain,ring-p2p}
cudnn_methods=${CP_CUDNN_METHODS:-balanced,ulysses,ring-allgather,ring-p2p}
masks=${CP_MASKS:-full,causal,full_document_long,causal_document_long}
tokens=${CP_TOKENS:-8K}
kernels=${CP_KERNELS:-cuda cudnn}
heads=${CP_HEADS:-64:8}
hdim=${CP_HEAD_DIM:-128}
iters=${CP_ITERS:-2}
warmup=${CP_WARMUP:-1}
splits=${CP_SPLITS:-0}
overlap=${CP_OVERLAP---overlap}
layout=${CP_LAYOUT:-auto}
budget=${CP_BUDGET:-460}
cudatime=${CP_CUDA_TIME:-280}
start=$(date +%s)
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
status() { case $1 in 0) echo ok ;; 124 | 137) echo "TIMEOUT (rows so far kept)" ;; skip) echo "SKIPPED (out of time)" ;; *) echo "FAIL($1)" ;; esac; }
rows() { grep -o '"message":"cp"' "$1" | wc -l; }
notok() { grep '"message":"cp"' "$1" | grep -vc '"status":"ok"'; }
nmasks=$(echo "$masks" | tr ',' '\n' | grep -c .)
for k in $kernels; do
	ms=$methods
	[ "$k" = cudnn ] && ms=$cudnn_methods
	nmethods=$(echo "$ms" | tr ',' '\n' | grep -c .)
	case ",$ms," in *,balanced,*) nmethods=$((nmethods - 1 + $(echo "$splits" | tr ',' '\n' | sort -u | grep -c .))) ;; esac
	want=$((nmethods * nmasks * 2))
	left=$((start + budget - $(date +%s)))
	t=$left
	[ "$k" = cuda ] && [ "$cudatime" -lt "$t" ] && t=$cudatime
	if [ "$t" -lt 20 ]; then
		note "longca cp --kernel $k: $(status skip)"
		continue
	fi
	timeout -k 5 "$t" bin/longca --log-format json cp --ranks 8 --kernel "$k" --methods "$ms" --tokens-per-rank "$tokens" \
		--ulysses 2 --ring 4 --windows 2 --cp-ulysses "$splits" $overlap --masks "$masks" --heads "$heads" --head-dim "$hdim" --dtype bf16 \
		--passes fwd,bwd --samples 1 -w "$warmup" -n "$iters" --check --check-budget 5e8 --baseline measure --cp-layout "$layout" ${CP_SETTLE:+--settle "$CP_SETTLE"} \
		--out "$out/$k" --run-id "balanced-$k" >"$out/$k.log" 2>&1
	rc=$?
	note "longca cp --ranks 8 --kernel $k, $nmethods methods: $(status $rc) in $(($(date +%s) - start)) s so far; rows $(rows "$out/$k.log") (want $want), not ok $(notok "$out/$k.log")"
	[ "$rc" = 0 ] || tail -3 "$out/$k.log"
done
note "elapsed $(($(date +%s) - start)) s"

echo "# ---- steps"
cat "$summary"
for k in $kernels; do
	[ -f "$out/$k.log" ] || continue
	echo "# ---- balanced rows, --kernel $k: mask pass status cp_layout peak_mem_bytes"
	grep '"message":"cp"' "$out/$k.log" | grep '"method":"balanced"' |
		sed -E 's/.*"mask":"([^"]*)".*"pass":"([^"]*)","status":"([^"]*)".*/\1 \2 \3 &/' |
		awk '{ l = "-"; p = "-"; if (match($0, /"cp_layout":"[^"]*"/)) l = substr($0, RSTART + 13, RLENGTH - 14)
			if (match($0, /"peak_mem_bytes":[0-9]+/)) p = substr($0, RSTART + 17, RLENGTH - 17)
			printf "%-22s %s %-6s %-8s %s\n", $1, $2, $3, l, p }'
done
for k in $kernels; do
	[ -d "$out/$k" ] || continue
	bin/longca merge "$out/$k" --out "$out/$k.arrow" >/dev/null 2>&1 || continue
	echo "# ---- --kernel $k: longca report"
	bin/longca report "$out/$k.arrow" 2>&1 | sed -n '/^# CP methods/,$p' >"$out/$k.report"
	cat "$out/$k.report"
done
# The compact table: cp_efficiency fwd / bwd per method (mesh) and mask, from the
# report's CP table (the eff, mask and pass columns found by the header's names, which move
# as columns are added; a row without eff shows its status).
for k in $kernels; do
	[ -f "$out/$k.report" ] || continue
	echo "# ---- cp_efficiency fwd / bwd, --kernel $k, 8 ranks on one GPU, $tokens tokens per rank"
	awk -v masks="$masks" '
		BEGIN { n = split(masks, ms, ","); printf "%-22s", "# method"; for (i = 1; i <= n; i++) printf " %22s", ms[i]; printf "\n" }
		/^# method/ { for (i = 2; i <= NF; i++) c[$i] = i - 1; col = c["eff"]; mk = c["mask"]; ps = c["pass"] }
		/^  [a-z]/ && col && ($ps == "fwd" || $ps == "bwd") {
			key = $1 " " $2
			if (!(key in seen)) { seen[key] = 1; order[++m] = key }
			v = ($col ~ /^[0-9.]+$/) ? $col : "-"
			eff[key, $mk, $ps] = v
		}
		END {
			for (j = 1; j <= m; j++) {
				printf "%-22s", order[j]
				for (i = 1; i <= n; i++) {
					f = eff[order[j], ms[i], "fwd"]; b = eff[order[j], ms[i], "bwd"]
					if (f == "") f = "-"; if (b == "") b = "-"
					printf " %22s", f " / " b
				}
				printf "\n"
			}
		}' "$out/$k.report"
done
