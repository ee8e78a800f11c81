#!/bin/sh
# `longca run` on the GPU machine, the way a user runs it (issue 22's wall time, issue 19's
# every-kernel table with the final defaults), from the repository root with
# bin/longca(.gz) carried (make device):
#   sh scripts/device/run-final.sh OUT [LIMIT_SECONDS] [PART] [RUN FLAGS...]   (e.g. --settle 0)
# PART (all, the default; 1 or 2) splits the suite where it outlasts one call (with --settle's
# 250 ms default, 574 s on an H100, call 94b): 1 is full and causal (275 s there), 2 the other
# ten masks (292 s), each its own run id in /tmp/run-part; after either part every part found
# there is merged into one file, reported and read for issue 19's criteria, so part 2 on the
# same warm machine prints the whole suite's tables (the line "# parts merged" says which).
# Stopped with SIGINT at the limit (default 560 s): run then ends after the current case and
# still writes its merged file and report. OUT gets the merged rows, the report, the log and
# clocks.csv (nvidia-smi's SM clock, power and temperature each second beside the run).
set -u
# the run id names the GPU that ran it (lib.sh's gpu_tag)
. scripts/device/lib.sh
gpu=$(gpu_tag)
out=${1:?usage: run-final.sh OUT [LIMIT_SECONDS] [all|1|2] [RUN FLAGS...]}
limit=${2:-560}
limit_seconds run-final.sh "$limit" "run-final.sh OUT [LIMIT_SECONDS] [all|1|2] [RUN FLAGS...]" || exit 2
shift $(($# < 2 ? $# : 2))
part=all
case ${1:-} in all | 1 | 2) part=$1 && shift ;; esac
dir=/tmp/run-final run=$gpu-run
case $part in
1) set -- --masks full,causal "$@" ;;
2) set -- --masks full_document,causal_document,sliding_window_causal,sliding_window,share_question,causal_blockwise,prefix_lm_causal,prefix_lm_document,global_sliding_window,block_causal_document "$@" ;;
esac
[ "$part" = all ] || dir=/tmp/run-part run=$gpu-run-$part
# a run id is used once in its folder (longca run refuses it again): a part run twice on one
# machine would otherwise print the earlier run's tables as this call's
if [ -e "$dir/$run.rank-0-of-1.arrow" ]; then
	echo "run-final.sh: part $part already ran on this machine ($dir/$run.rank-0-of-1.arrow); nothing run, nothing printed as new" >&2
	exit 2
fi
mkdir -p "$out"
[ -x bin/longca ] || { [ -f bin/longca.gz ] && gunzip -c bin/longca.gz >bin/longca && chmod +x bin/longca; }
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
t0=$(date +%s)
# the card's clock, power and temperature each second beside the run (OUT/clocks.csv), so that
# a case read low late in the suite can be laid against the card's state at its time (call 87:
# block_causal_document 48K's forward 16% below its reading alone, calls 88-89)
smi=
if command -v nvidia-smi >/dev/null 2>&1; then
	nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 1000 >"$out/clocks.csv" 2>/dev/null &
	smi=$!
fi
timeout -s INT -k 30 "$limit" bin/longca run --suite gpu --out "$dir" --run-id "$run" "$@" >"$out/run.log" 2>&1
rc=$?
[ -n "$smi" ] && kill "$smi" 2>/dev/null
if [ -s "$out/clocks.csv" ]; then # SM MHz over the run and over its last minute: min / median / max
	clk() { cut -d, -f2 | tr -dc '0-9\n' | grep . | sort -n | awk '{c[NR] = $1} END {if (NR) printf "min %d, median %d, max %d MHz (%d samples)", c[1], c[int((NR + 1) / 2)], c[NR], NR}'; }
	echo "# SM clock over the run: $(clk <"$out/clocks.csv")"
	echo "# SM clock over its last minute: $(tail -60 "$out/clocks.csv" | clk); power $(tail -60 "$out/clocks.csv" | cut -d, -f3 | tr -dc '0-9.\n' | awk '{p += $1} END {if (NR) printf "%.0f W mean", p / NR}')"
fi
echo "# longca run --suite gpu (part $part): exit $rc, wall $(($(date +%s) - t0)) s" | tee -a "$out/run.log"
if [ "$part" != all ]; then # every part in $dir, one file: the whole suite once both have run here
	mkdir -p "$dir"
	if _m=$(bin/longca merge "$dir" --out "$dir/$gpu-run.merged.arrow" 2>&1); then
		echo "# parts merged: $(printf '%s\n' "$_m" | grep -o 'of [0-9]* run(s): .*')"
		bin/longca report "$dir/$gpu-run.merged.arrow" >"$dir/$gpu-run.report.txt" 2>&1
	else
		echo "# parts merged: merge failed: $(printf '%s\n' "$_m" | tail -1)"
		rm -f "$dir/$gpu-run.merged.arrow" "$dir/$gpu-run.report.txt"
	fi
fi
cp "$dir/$gpu-run.merged.arrow" "$dir/$gpu-run.report.txt" "$out/" 2>/dev/null
grep -E '"estimate"|eta' "$out/run.log" | head -3
grep -E '^# Cases|^# Geomean' "$out/run.log" | head -4
sed -n '/x fastest/,$p' "$dir/$gpu-run.report.txt" 2>/dev/null | head -110
echo "=== issue 19's criteria (longca report --against)"
goal_lines "$dir/$gpu-run.merged.arrow"
