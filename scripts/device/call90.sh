#!/bin/sh
# Call 90 (twenty-fourth session, 2026-12-06): the GPU-state columns' first run on a GPU
# (sm_clock_mhz, sm_clock_min_mhz, power_w, temp_c, clock_events, gpu_samples, read through
# NVML while each case is timed): internal/cuda's TestMonitorReads, then longca kernel on
# block_causal_document and full (cuda, torch:flex), its report's GPU line and the columns
# of every row (merge --csv).
#   sh scripts/device/call90.sh OUT [LIMIT]    (carry bin/longca.gz; bin/icuda.test travels uncompressed)
# Predictions: every ok row carries a reading (gpu_samples 2 or more; cuda's 48K rows tens),
# SM clock 1,500-1,980 MHz, power 300-700 W; the rates within 5% of calls 88-89's (the
# sampler's goroutine takes nothing from the GPU's timing).
set -u
out=${1:?usage: call90.sh OUT [LIMIT]}
. scripts/device/lib.sh
call_start "${2:-150}" longca || exit 1
[ -x bin/icuda.test ] && timeout 60 bin/icuda.test -test.run 'TestMonitorReads' -test.v >"$out/t/icuda.log" 2>&1
echo "# icuda TestMonitorReads rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
step gs $((budget - 30)) kernel --kernels cuda,torch:flex --masks block_causal_document,full --seqlens 16K,48K --passes fwd,bwd -w 3 -n 10
bin/longca merge --csv --out "$out/t/gs.merged.arrow" "$out/t/gs" >/dev/null 2>&1
cat "$out/t/summary.txt"
grep -E 'PCI|PASS|FAIL' "$out/t/icuda.log" | head -4
grep -vE '^\{' "$out/t/gs.log" | grep -E '^ |^# (mask|Cases|GPU)' | head -14
python3 - "$out/t/gs.merged.csv" <<'PY'
import csv, sys
try:
    rows = list(csv.DictReader(open(sys.argv[1])))
except OSError as e:
    print("# no csv:", e); sys.exit(0)
for r in rows:
    print(r["kernel"], r["mask"], r["seqlen"], r["pass"], r["status"], r["tflops"][:6], "clk", r["sm_clock_mhz"][:6], "min", r["sm_clock_min_mhz"], "W", r["power_w"][:5], "C", r["temp_c"], r["clock_events"] or "-", "n", r["gpu_samples"])
PY
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
