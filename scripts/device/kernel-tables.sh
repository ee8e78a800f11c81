#!/bin/sh
# Issue 19's tables in one device call, from the repository root with bin/longca(.gz)
# carried (make device):
#   sh scripts/device/kernel-tables.sh OUT
# 1. ncu on the sm90 backward (full and causal_document, 16K, 64:8, d128): the stall
#    reasons by name (smsp__average_warps_issue_stalled_*_per_issue_active), the
#    scheduler and the tensor pipe, and the source lines where warps stall;
# 2. longca sparse: cuda and torch:flex on the same block maps, 32K, 64:8, 128- and
#    64-token blocks, kept 0.2 and 0.5, fwd and bwd (the Flex 64-token backward fix);
# 3. longca kernel, head dim 64: cuda, cudnn, torch:cudnn, torch:flash, torch:flex and
#    torch:varlen on full, causal, causal_document and sliding_window_causal, 8K-48K;
# 4. longca kernel, head dim 128: cuda, cudnn and torch:flex on the five masks that the
#    call of 14:44 (longca run, stopped at 9 of 12 masks) did not reach, 8K-48K.
# Every case checked. Each sweep is stopped with SIGINT at its bound and keeps its rows.
# About 9 minutes. Logs and rows packed as OUT/tables.tgz; the reports printed last.
set -u
out=${1:?usage: kernel-tables.sh OUT}
mkdir -p "$out/t"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
[ -f bin/longca.gz ] && gunzip -c bin/longca.gz >bin/longca && chmod +x bin/longca
L=bin/longca
t0=$(date +%s)
stamp() { echo "# [$(($(date +%s) - t0)) s] $*" | tee -a "$out/t/summary.txt"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader >"$out/t/gpu.txt" 2>&1

# 1. ncu: one backward kernel per mask (the first bwd90_ launch after the prep kernel)
for m in full causal_document; do
	timeout 75 ncu --clock-control none -k 'regex:^bwd90_bf16' -c 1 \
		--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats \
		--section Occupancy --section SourceCounters --section MemoryWorkloadAnalysis \
		--metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__cycles_active.avg' \
		$L kernel --kernels cuda --no-check -w 0 -n 1 --masks $m --seqlens 16K --heads 64:8 --passes bwd \
		--out "$out/t/ncu-run-$m" >"$out/t/ncu-bwd-$m.log" 2>&1
	stamp "ncu bwd $m rc=$?"
done

# the same kernel's SASS with the sampled stall reasons per instruction (where warps wait)
timeout 75 ncu --clock-control none -k 'regex:^bwd90_bf16' -c 1 --section SourceCounters --section WarpStateStats \
	--page source --print-source sass --csv \
	$L kernel --kernels cuda --no-check -w 0 -n 1 --masks full --seqlens 16K --heads 64:8 --passes bwd \
	--out "$out/t/ncu-src-run" >"$out/t/ncu-bwd-sass.csv" 2>&1
stamp "ncu sass rc=$?"

# 2. block-sparse, cuda and torch:flex on the same maps
timeout -s INT -k 20 150 $L sparse --kernels cuda,torch:flex --seqlens 32K --block 128,64 --ratios 0.2,0.5 \
	--heads 64:8 --passes fwd,bwd -w 2 -n 5 --out "$out/t/sparse" --run-id sparse >"$out/t/sparse.log" 2>&1
stamp "sparse rc=$?"

# 3. head dim 64, every peer
timeout -s INT -k 20 170 $L kernel --kernels cuda,cudnn,torch:cudnn,torch:flash,torch:flex,torch:varlen \
	--masks full,causal,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K --heads 64:8 --head-dim 64 \
	--passes fwd,bwd -w 3 -n 10 --out "$out/t/d64" --run-id d64 >"$out/t/d64.log" 2>&1
stamp "d64 rc=$?"

# 4. head dim 128, the masks longca run did not reach
timeout -s INT -k 20 130 $L kernel --kernels cuda,cudnn,torch:flex \
	--masks causal_blockwise,prefix_lm_causal,prefix_lm_document,global_sliding_window,block_causal_document \
	--seqlens 8K,16K,32K,48K --heads 64:8 --head-dim 128 --passes fwd,bwd -w 3 -n 10 \
	--out "$out/t/d128" --run-id d128 >"$out/t/d128.log" 2>&1
stamp "d128 rest rc=$?"

for r in sparse d64 d128; do
	$L merge "$out/t/$r" --out "$out/t/$r.arrow" --csv >/dev/null 2>&1
	$L report "$out/t/$r.arrow" >"$out/t/$r.report.txt" 2>&1
done
tar -C "$out" -czf "$out/tables.tgz" t
echo "=== ncu: backward stall reasons (per issued instruction), tensor pipe"
for m in full causal_document; do
	echo "## $m"
	grep -E 'gmma_cycles_active|issue_stalled_.*ratio|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Duration' "$out/t/ncu-bwd-$m.log" |
		awk '{v=$NF; $NF=""; sub(/smsp__average_warps_issue_stalled_/, "stall_"); sub(/_per_issue_active.ratio/, ""); print $0 v}' |
		awk '$NF+0 >= 0.05 || !/stall_/' | head -40
done
for r in sparse d64 d128; do
	echo "=== $r"
	grep -E 'ok|wrong|error|unsupported' "$out/t/$r.log" | grep -ciE 'wrong|"error"' | sed 's/^/# rows wrong or error: /'
	sed -n '/x fastest/,$p' "$out/t/$r.report.txt" | head -60
done
echo "=== SASS lines with the most stall samples (full, bwd)"
python3 - "$out/t/ncu-bwd-sass.csv" <<'PY' 2>&1 | head -40
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1], errors="replace")) if len(r) > 3]
hdr = next((i for i, r in enumerate(rows) if any("Source" == c or "Address" in c for c in r)), None)
if hdr is None:
    print("# no source table"); sys.exit(0)
h = rows[hdr]; body = rows[hdr + 1:]
def col(name):
    return next((i for i, c in enumerate(h) if c.strip() == name), None)
src = col("Source")
samp = col("Warp Stall Sampling (All Samples)") or next((i for i, c in enumerate(h) if "Stall Sampling" in c), None)
print("# columns:", [c for c in h][:30])
if samp is None or src is None:
    sys.exit(0)
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return 0.0
tot = sum(num(r[samp]) for r in body if len(r) > samp) or 1
stalls = [i for i, c in enumerate(h) if c.startswith("stall_") or "Stall" in c]
for r in sorted(body, key=lambda r: -num(r[samp]) if len(r) > samp else 0)[:25]:
    print(f"{100*num(r[samp])/tot:5.1f}%  {r[src][:90]}")
PY
cat "$out/t/summary.txt"
