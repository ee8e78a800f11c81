#!/bin/sh
# Call 93 (prepared 2026-12-06, twenty-fifth session): the spread of one cell's cuda / cuDNN
# ratio on a power-capped card, and the CP baseline's clock in its log.
# 1. Call 91c's two d128 cells below 1.0x cuDNN, full 16K bwd (0.964) and full_document 32K
#    fwd (0.967), timed four times as the suite does (-w 3 -n 10, checked), cuda and cudnn in
#    one step, the order turned each time (cuda first, cudnn first, ...), every row with its
#    SM clock while timed;
# 2. longca cp, 8 in-process ranks, ulysses on full fwd with --baseline measure: the
#    kernel-alone row's log line now carries the SM clock it was timed at (new, not yet run).
#   sh scripts/device/call93.sh OUT [LIMIT]     (carry bin/longca.gz)
# Predictions: every row ok; on each cell the four ratios spread over 5% or more where the
# two kernels' clocks differ by 5% or more in some round, and cuda / cuDNN at 1.0 or more in
# every round where cuda's clock is within 3% of cuDNN's or above it (per cycle cuda leads on
# both cells: 1.015, 1.092 in call 91c); the baseline line with sm_clock_mhz 1,200-1,980.
set -u
out=${1:?usage: call93.sh OUT [LIMIT]}
. scripts/device/lib.sh
call_start "${2:-200}" longca || exit 1
warm sm90
C="-w 3 -n 10"
i=0
for order in cuda,cudnn cudnn,cuda cuda,cudnn cudnn,cuda; do
	step "r$i-f16b" 40 kernel --kernels $order --masks full --seqlens 16K --passes bwd $C
	step "r$i-fd32f" 40 kernel --kernels $order --masks full_document --seqlens 32K --passes fwd $C
	i=$((i + 1))
done
_left=$((budget - ($(date +%s) - t0)))
timeout -s INT -k 10 $((_left > 30 ? _left - 10 : 20)) bin/longca cp --ranks 8 --kernel cuda --tokens-per-rank 8K --methods ulysses \
	--masks full --passes fwd --samples 1 -w 2 -n 5 --baseline measure --out "$out/t/cp" --run-id cp >"$out/t/cp.log" 2>&1
echo "# cp rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
cat "$out/t/summary.txt"
echo "=== each step: kernel TFLOP/s at mean SM clock (MHz), timing order as listed"
for d in "$out"/t/r*-f*/; do
	n=$(basename "$d")
	bin/longca merge --csv --out "$out/t/$n.merged.arrow" "$d" >/dev/null 2>&1
	python3 - "$out/t/$n.merged.csv" "$n" <<'PY'
import csv, sys
try:
    rows = list(csv.DictReader(open(sys.argv[1])))
except Exception as e:
    print(sys.argv[2], "no csv:", e); sys.exit(0)
by = {r["kernel"]: r for r in rows}
parts, t = [], {}
for k, r in by.items():
    t[k] = (float(r["tflops"] or 0), float(r["sm_clock_mhz"] or 0))
    parts.append("%s %s %.1f @ %.0f" % (k, r["status"], t[k][0], t[k][1]))
line = "%-10s %s" % (sys.argv[2], "; ".join(parts))
if "cuda" in t and "cudnn" in t and t["cudnn"][0] > 0 and t["cudnn"][1] > 0 and t["cuda"][1] > 0:
    r = t["cuda"][0] / t["cudnn"][0]
    line += "  ratio %.3f  per cycle %.3f" % (r, r * t["cudnn"][1] / t["cuda"][1])
print(line)
PY
done
echo "=== cp baseline"
grep '"kernel baseline"' "$out/t/cp.log" | head -2
grep -E '^  ulysses|^# GPU' "$out/t/cp.log" | head -3
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
