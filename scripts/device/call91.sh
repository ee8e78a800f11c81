#!/bin/sh
# Call 91 (prepared 2026-12-06, twenty-fourth session; not yet run): the GPU-state columns'
# cost and their CP rows, on either card.
# 1. --gpu-state on / off / on / off, interleaved, on short cases where a host-side reader
#    could show (cuda, full, 1K-4K, fwd and bwd, 64:8, -w 3 -n 20): the sampler's goroutine
#    reads NVML every 5 ms while a case is timed;
# 2. longca cp, 8 in-process ranks on the one GPU (ring-p2p and ulysses, causal, 8K a rank,
#    fwd), whose rows now carry each rank's reading (first run on a GPU), and the CP table's
#    GPU line.
#   sh scripts/device/call91.sh OUT [LIMIT]     (carry bin/longca.gz bin/icuda.test)
# Predictions: on and off within 1% of each other on every cell (the readings are host calls
# on another thread; the timing is the GPU's events); every CP row ok with gpu_samples 1 or
# more and an SM clock of 1,500-1,980 MHz, the 8 ranks' readings within 50 MHz of each other;
# power_w from NVML's instant field (written after call 90, whose one-second average read
# 116-145 W): 300-700 W on the 4K cases.
set -u
out=${1:?usage: call91.sh OUT [LIMIT]}
. scripts/device/lib.sh
call_start "${2:-240}" longca || exit 1
[ -x bin/icuda.test ] && timeout 60 bin/icuda.test -test.run 'TestMonitorReads' -test.v >"$out/t/icuda.log" 2>&1 # the instant power's first reading
warm sm90
A="--kernels cuda --masks full --seqlens 1K,2K,4K --passes fwd,bwd -w 3 -n 20"
step g-0-on 30 kernel $A
step g-1-off 30 kernel $A --gpu-state=false
step g-2-on 30 kernel $A
step g-3-off 30 kernel $A --gpu-state=false
_left=$((budget - ($(date +%s) - t0)))
timeout -s INT -k 10 $((_left > 20 ? _left - 10 : 10)) bin/longca cp --ranks 8 --kernel cuda --tokens-per-rank 8K --methods ring-p2p,ulysses \
	--masks causal --passes fwd --samples 2 -w 2 -n 5 --baseline none --out "$out/t/cp" --run-id cp >"$out/t/cp.log" 2>&1
echo "# cp rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
bin/longca merge --csv --out "$out/t/cp.merged.arrow" "$out/t/cp" >/dev/null 2>&1
cat "$out/t/summary.txt"
grep -E 'PCI|PASS|FAIL' "$out/t/icuda.log" 2>/dev/null | head -3
echo "=== full fwd/bwd TFLOP/s: gpu-state on, off, on, off"
JOIN_PASS=1 join_runs g on off on off
grep -h '^# GPU' "$out"/t/g-*.log | head -2
echo "=== cp"
grep -E '^#|GPU' "$out/t/cp.log" | grep -vE '^\{' | tail -8
python3 - "$out/t/cp.merged.csv" <<'PY'
import csv, sys
try:
    rows = list(csv.DictReader(open(sys.argv[1])))
except OSError as e:
    print("# no csv:", e); sys.exit(0)
for r in rows:
    print(r["method"], "rank", r["rank"], r["status"], "tflops", r["tflops"][:6], "clk", r["sm_clock_mhz"][:6], "min", r["sm_clock_min_mhz"], "W", r["power_w"][:5], "C", r["temp_c"], r["clock_events"] or "-", "n", r["gpu_samples"])
PY
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
