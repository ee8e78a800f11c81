#!/bin/sh
# `longca run` on the GPU machine, the way a user runs it (issue 22's wall time, issue 19's
# every-kernel table with the final defaults), from the repository root with
# bin/longca(.gz) carried (make device):
#   sh scripts/device/run-final.sh OUT [LIMIT_SECONDS] [RUN FLAGS...]   (e.g. --settle 250ms)
# Stopped with SIGINT at the limit (default 560 s): run then ends after the current case and
# still writes its merged file and report. OUT gets the merged rows, the report, the log and
# clocks.csv (nvidia-smi's SM clock, power and temperature each second beside the run).
set -u
# the run id names the GPU that ran it (lib.sh's gpu_tag)
. scripts/device/lib.sh
gpu=$(gpu_tag)
out=${1:?usage: run-final.sh OUT [LIMIT_SECONDS]}
limit=${2:-560}
shift $(($# < 2 ? $# : 2))
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
timeout -s INT -k 30 "$limit" bin/longca run --suite gpu --out /tmp/run-final --run-id $gpu-run "$@" >"$out/run.log" 2>&1
rc=$?
[ -n "$smi" ] && kill "$smi" 2>/dev/null
if [ -s "$out/clocks.csv" ]; then # SM MHz over the run and over its last minute: min / median / max
	clk() { cut -d, -f2 | tr -dc '0-9\n' | grep . | sort -n | awk '{c[NR] = $1} END {if (NR) printf "min %d, median %d, max %d MHz (%d samples)", c[1], c[int((NR + 1) / 2)], c[NR], NR}'; }
	echo "# SM clock over the run: $(clk <"$out/clocks.csv")"
	echo "# SM clock over its last minute: $(tail -60 "$out/clocks.csv" | clk); power $(tail -60 "$out/clocks.csv" | cut -d, -f3 | tr -dc '0-9.\n' | awk '{p += $1} END {if (NR) printf "%.0f W mean", p / NR}')"
fi
echo "# longca run --suite gpu: exit $rc, wall $(($(date +%s) - t0)) s" | tee -a "$out/run.log"
cp /tmp/run-final/$gpu-run.merged.arrow /tmp/run-final/$gpu-run.report.txt "$out/" 2>/dev/null
grep -E '"estimate"|eta' "$out/run.log" | head -3
grep -E '^# Cases|^# Geomean' "$out/run.log" | head -4
sed -n '/x fastest/,$p' /tmp/run-final/$gpu-run.report.txt 2>/dev/null | head -110
echo "=== issue 19's criteria (longca report --against)"
goal_lines /tmp/run-final/$gpu-run.merged.arrow
