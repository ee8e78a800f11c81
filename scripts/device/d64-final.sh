#!/bin/sh
# Issue 19's must-show table at head dim 64 (the suite's shape otherwise: the 12 kernel masks
# at 8K, 16K, 32K and 48K, 64:8, bf16, fwd and bwd, checked, -w 3 -n 10) with the cuda kernel
# and every peer in one call: cudnn, torch:flash, torch:cudnn, torch:efficient, torch:flex,
# torch:varlen. From the repository root with bin/longca(.gz) carried (make device):
#   sh scripts/device/d64-final.sh OUT [LIMIT_SECONDS] [KERNEL FLAGS...]   (e.g. --settle 250ms)
# Stopped with SIGINT at the limit (default 570 s): the sweep ends after the current case and
# the rows so far stay. OUT gets the rows, the report (TFLOP/s and the ratios to the fastest)
# and the log; the report's ratio table is printed last.
set -u
out=${1:?usage: d64-final.sh OUT [LIMIT_SECONDS] [KERNEL FLAGS...]}
limit=${2:-570}
. scripts/device/lib.sh
limit_seconds d64-final.sh "$limit" || exit 2
shift $(($# < 2 ? $# : 2))
gpu=$(gpu_tag) # the run id names the GPU that ran it
call_start "$limit" longca || exit 1
# a folder of this call's own: on a machine still warm from an earlier call, a fixed
# /tmp/d64-final held that call's run id, the sweep was refused (exit 2) and the report below
# printed the earlier call's rows as this one's (the forty-second session's 48K call)
dir=$(mktemp -d /tmp/d64-final.XXXXXX) || exit 1
timeout -s INT -k 30 "$limit" bin/longca kernel --kernels cuda,cudnn,torch:flash,torch:cudnn,torch:efficient,torch:flex,torch:varlen \
	--head-dim 64 --heads 64:8 --seqlens 8K,16K,32K,48K --passes fwd,bwd -w 3 -n 10 \
	--out "$dir" --run-id $gpu-d64 "$@" >"$out/d64.log" 2>&1
rc=$?
echo "# longca kernel --head-dim 64, every peer: exit $rc, wall $(($(date +%s) - t0)) s" | tee -a "$out/d64.log"
# (merge's default file is DIR/merged.arrow: named for the run, as longca run names its own,
# so that the copy and the criteria below find it; the nineteenth session's call named none)
merged=$dir/$gpu-d64.merged.arrow
bin/longca merge --out "$merged" "$dir" >/dev/null 2>&1
bin/longca report "$dir" >"$out/d64.report.txt" 2>&1
cp "$merged" "$out/" 2>/dev/null
grep -E '^# Cases' "$out/d64.log" | tail -1
sed -n '/x fastest/,$p' "$out/d64.report.txt" | head -110
echo "=== issue 19's criteria at head dim 64 (longca report --against)"
goal_lines "$merged"
