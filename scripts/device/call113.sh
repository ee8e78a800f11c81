#!/bin/sh
# Call 113 (prepared 2026-12-06, thirty-first session, after calls 110-112): any card but an
# H200 (by-card.sh gives an H200 the suite's first part). The d128 forward of full 8K, the
# close cell of issue 19's d128 table on the H100: the suite, which times it first, read cuda
# 711.8 / 707.5 against cuDNN 689.8 / 677.6 (calls 110, 94b), but alone in a process after
# that process's 16K cases cuda read 666.0 / 689.0 / 666.0 against cuDNN's 689.7-693.8
# (call 111). Is that the case order (full 8K right after full 16K, the longest launch, with
# 250 ms of settle), or the card's two rates (calls 111-112 at 16K, both kernels)?
# a: full 8K alone, a process a kernel, cuda (sm90, the default) and cudnn alternating, x3.
# b: full 16K then full 8K in one process (call 111's order), x3.
# c: as b with --settle 2s.
# Each row's TFLOP/s with its SM clock and power (--gpu-state). Prediction (written before
# the run): the order, a power effect: b's cuda 8K 2-4% under a's at a lower clock or power
# read, c's back at a's; cuDNN's 8K level in a, b and c. If a's cuda also reads two rates at one
# clock, it is the card's, as at 16K.
# Bounded to 200 s (BUDGET); the table last; logs packed as OUT/t.tgz.
#   sh scripts/device/call113.sh OUT   (carry bin/longca.gz)
# Ran as call 113 (thirty-second session, an H100; docs/perf.md "Calls 113-116"): with no warm
# step its first two sm90 steps spent their 30 s caps on the NVRTC compile and wrote no row.
set -u
out=${1:?usage: call113.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-200} longca || exit 1
F="--masks full --head-dim 128 --passes fwd -w 5 -n 10"
interleave a 30 "sm90 cudnn sm90 cudnn sm90 cudnn" $F --seqlens 8K
interleave b 40 "sm90 cudnn sm90 cudnn sm90 cudnn" $F --seqlens 16K,8K
interleave c 40 "sm90 cudnn sm90 cudnn" $F --seqlens 16K,8K --settle 2s
cat "$out/t/summary.txt"
for d in "$out"/t/[abc]-*-*; do
	[ -d "$d" ] || continue
	bin/longca merge --csv --out "$d.merged.arrow" "$d" >/dev/null 2>&1
done
echo "=== full d128 forward: step kernel seqlen TFLOP/s @ SM MHz, power W, settle ms"
python3 - "$out"/t/[abc]-*-*.merged.csv <<'PY'
import csv, sys
for f in sys.argv[1:]:
    name = f.rsplit("/", 1)[1].replace(".merged.csv", "")
    try:
        rows = list(csv.DictReader(open(f)))
    except OSError:
        continue
    for r in rows:
        print("%-10s %-6s %6s %7.1f @ %5.0f MHz %5.0f W settle %s" % (name, r["kernel"], r["seqlen"], float(r["tflops"] or 0),
              float(r["sm_clock_mhz"] or 0), float(r["power_w"] or 0), r["settle_ms"] or "-"))
PY
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
