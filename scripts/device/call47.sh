#!/bin/sh
# Call 47 (2026-12-04, fifth session): why causal's d128 backward is 0.92-0.95x cuDNN in a
# timed loop while its kernel is only 3% slower than cuDNN's under ncu's single launch
# (call 43), measured before any design:
# 1. the SM clock and the power while each backward is timed (nvidia-smi every 50 ms),
#    causal and full 16K d128, cuda and cudnn, -n 40 each (about a second of timed passes);
#    the H200 is power-capped at 700 W: a kernel that spends more energy per unit of work
#    runs at a lower clock there;
# 2. ncu's stall samples per SASS instruction of sm90's d128 backward (bwd90e), causal 16K:
#    the 30 instructions with the most samples;
# 3. (added after its first run) DRAM bytes and the L2 hit rate of one backward launch.
# (Its first run, 18:50 UTC, gave each repeat the same step name, so the repeats' logs
# overwrote the first ones; the steps run once each since, after a compile step.)
# VARIANT (default sm90) picks the cuda variant. Every timed case checked. Bounded to 200 s (BUDGET); the table last; logs packed as OUT/t.tgz.
#   sh scripts/device/call47.sh OUT
set -u
out=${1:?usage: call47.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-200} longca || exit 1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 50 >"$out/t/smi.csv" 2>&1 &
smi=$!
# the module compiled first (a fresh machine: about 30 s), outside the measured steps
step warm 70 kernel --kernels cuda --variant ${VARIANT:-sm90} --masks causal --seqlens 1K --passes bwd -w 0 -n 1 --no-check
for k in cuda cudnn; do
	for m in causal full; do
		echo "start $k $m $(date +%s.%N)" >>"$out/t/marks"
		sel="--kernels $k"
		[ "$k" = cuda ] && sel="--kernels cuda --variant ${VARIANT:-sm90}"
		step "p-$k-$m" 40 kernel $sel --masks $m --seqlens 16K --passes bwd -w 3 -n ${LOOPS:-100}
		echo "end $k $m $(date +%s.%N)" >>"$out/t/marks"
	done
done
kill $smi 2>/dev/null
left=$((budget + 40 - ($(date +%s) - t0)))
if [ "$left" -gt 30 ]; then
	timeout -k 5 $((left < 60 ? left : 60)) ncu --clock-control none -k 'regex:^bwd90e_bf16' -c 1 \
		--section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
		bin/longca kernel --kernels cuda --variant ${VARIANT:-sm90} --no-check -w 0 -n 1 --masks causal --seqlens 16K --heads 64:8 --passes bwd \
		--out "$out/t/ncu-src-run" >"$out/t/ncu-causal-sass.csv" 2>&1
	echo "# ncu causal sass rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
fi
# 3. the memory traffic of one backward launch, 16K d128, cuda (VARIANT) and cudnn, full and
#    causal: DRAM bytes read and written, L2 hit rate (is causal's extra energy HBM traffic?)
for k in cuda cudnn; do
	for m in full causal; do
		left=$((budget + 60 - ($(date +%s) - t0)))
		[ "$left" -gt 12 ] || { echo "# ncu mem $k $m skipped (time)" >>"$out/t/summary.txt"; continue; }
		re='^bwd90e_bf16'
		sel="--kernels cuda --variant ${VARIANT:-sm90}"
		[ $k = cudnn ] && re='bprop' sel="--kernels cudnn"
		timeout -k 5 $((left < 25 ? left : 25)) ncu --clock-control none -k "regex:$re" -c 1 \
			--metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum,lts__t_sectors_op_red.sum \
			bin/longca kernel $sel --no-check -w 0 -n 1 --masks $m --seqlens 16K --heads 64:8 --passes bwd \
			--out "$out/t/ncu-mem-run-$k-$m" >"$out/t/ncu-mem-$k-$m.log" 2>&1
		echo "# ncu mem $k $m rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
	done
done
cat "$out/t/summary.txt"
echo "=== the timed loops, 16K d128 backward: kernel mask, TFLOP/s, then the busy samples' (power > 300 W) median SM clock (MHz) and power (W), and their count"
python3 - "$out/t" <<'PY'
import sys, os, datetime, statistics as st
d = sys.argv[1]
smi = []
for l in open(os.path.join(d, "smi.csv"), errors="replace"):
    p = [x.strip() for x in l.split(",")]
    try:
        t = datetime.datetime.strptime(p[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()  # nvidia-smi writes local time
        smi.append((t, float(p[1]), float(p[2])))
    except (ValueError, IndexError):
        pass
marks = [l.split() for l in open(os.path.join(d, "marks"))]
runs = {}
for i in range(0, len(marks) - 1, 2):
    _, k, m, a = marks[i]; _, _, _, b = marks[i + 1]
    n = sum(1 for x in runs if x[:2] == (k, m))
    log = os.path.join(d, f"p-{k}-{m}.log")
    tf = "-"
    for l in open(log, errors="replace"):
        s = l.split()
        if len(s) > 3 and s[0] == m and s[1] == "16384":
            tf = s[-1]
    busy = [x for x in smi if float(a) <= x[0] <= float(b) and x[2] > 300]
    clk = st.median(x[1] for x in busy) if busy else 0
    pw = st.median(x[2] for x in busy) if busy else 0
    runs[(k, m, n)] = 1
    print(f"{k:6s} {m:7s} {tf:>7s}  {clk:6.0f} MHz {pw:6.0f} W  ({len(busy)} samples)")
PY
echo "=== bwd90e causal 16K: the SASS instructions with the most stall samples"
sass_top "$out/t/ncu-causal-sass.csv"
echo "=== one backward launch, 16K d128: DRAM read / write, L2 hit rate, L2 reduction sectors, time"
for f in "$out"/t/ncu-mem-*.log; do
	[ -f "$f" ] || continue
	echo "## $(basename "$f" .log)"
	grep -E 'dram__bytes|lts__t_sector_hit_rate|lts__t_sectors_op_red|gpu__time_duration' "$f" | awk '{print "  " $1, $(NF-1), $NF}'
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
