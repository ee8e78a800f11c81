#!/bin/sh
# (Ran 2026-12-05, seventeenth session, on an H100: docs/perf.md "Calls 67-70 on an H100". sm90k-seq
# removed since: it no longer runs as written.)
# Call 68 (prepared 2026-12-05, sixteenth session): why cuDNN's d64 forward shape
# ran 8-16% slower in ours (call 66: sm90k, sm90k-seq) at fewer instructions a score
# (docs/perf.md "Next: calls 67 and 68", its last item). One d64 full 16K forward each under ncu:
# 1. stall reasons a issued instruction and the tensor pipe's share (call 21's metric) of
#    sm90k-seq, sm90 and cuDNN;
# 2. sm90k-seq's SASS source page (the instructions with the most stall samples);
# 3. L2's hit rate and DRAM bytes of each (a 128 x 256 tile streams K and V from L2 for 128
#    query rows, sm90's 192 x 128 for 192; cuDNN's as sm90k's).
# About 170 s; bounded to 240 s (BUDGET). Logs packed as OUT/t.tgz.
#   sh scripts/device/call68.sh OUT      (carry bin/longca.gz; the call's timeout 300)
set -u
out=${1:?usage: call68.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-240} longca || exit 1
for v in sm90k-seq sm90; do warm $v & done
wait
NCU_PASS=fwd NCU_DIM=64
STALL_METRICS="$STALL_METRICS,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"
for v in sm90k-seq sm90 cudnn; do ncu_stall $v full 16K 40; done
ncu_sass sm90k-seq full 16K 64 60
for v in sm90k-seq cudnn sm90; do ncu_mem $v full 16K 30; done
unset NCU_PASS NCU_DIM
cat "$out/t/summary.txt"
stall_table
echo "=== the tensor pipe's share (one d64 full 16K forward each)"
for f in "$out"/t/ncu-stall-*-fwd-d64.log; do
	[ -f "$f" ] && { echo "## $(basename "$f" .log)"; grep -E 'gmma_cycles_active' "$f" | awk '{print "  " $1, $(NF-1), $NF}'; }
done
echo "=== L2 and DRAM"
mem_table
echo "=== sm90k-seq's SASS: the instructions with the most stall samples"
sass_top "$out/t/ncu-sass-sm90k-seq-full-16K-fwd-d64.log"
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
