#!/bin/sh
# The next session's first device call (prepared 2026-12-04; docs/perf.md "Next: sm90m"),
# from the repository root with bin/longca.gz and bin/cuda.test.gz carried (make device;
# gzip -kf bin/cuda.test):
#   sh scripts/device/next-sm90m.sh OUT
# 1. the experiment sm90m (head dim 64 forward on three consumer warpgroups, 192 x 128
#    tiles): its registers and stack (ptxas: any "serialized" or spill loses), then its GPU
#    tests (every mask, d64 and d128, fwd and bwd);
# 2. head dim 64 forward, sm90 / sm90m / cudnn, each its own folder: full and causal 16K and
#    48K, causal_document and sliding_window_causal 16K and 48K, checked.
# 3. ncu of sm90m's forward (full 16K) if time is left: instructions, issue, IPC, MUFU.
# Bounded to 300 s; the table last; logs packed under OUT.
set -u
out=${1:?usage: next-sm90m.sh OUT}
mkdir -p "$out/t"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
t0=$(date +%s)
STEP_TIMEOUT=110 sh kernels/cuda/gpu.sh "$out/t" test sm90m >/dev/null 2>&1
echo "# tests done at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
grep -E "fwd90m.*regs|serialized.*fwd90m|error" "$out/t/test-sm90m.log" | sort -u | head -8 >>"$out/t/summary.txt"
for v in sm90m sm90 cudnn; do
	left=$((300 - ($(date +%s) - t0)))
	[ "$left" -gt 8 ] || break
	sel="--kernels cuda --variant $v"
	[ "$v" = cudnn ] && sel="--kernels cudnn"
	timeout -s INT -k 5 $((left < 50 ? left : 50)) bin/longca kernel $sel --head-dim 64 \
		--masks full,causal,causal_document,sliding_window_causal --seqlens 16K,48K --heads 64:8 --passes fwd \
		-w 3 -n 10 --out "$out/t/$v" >"$out/t/t-$v.log" 2>&1
	echo "# $v rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
done
left=$((300 - ($(date +%s) - t0)))
if [ "$left" -gt 30 ]; then # ncu of sm90m's forward as call 21 read sm90's and cudnn's
	timeout -k 5 $((left < 70 ? left - 5 : 65)) ncu --clock-control none -k 'regex:^fwd' -c 1 \
		--metrics sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active \
		--section SpeedOfLight bin/longca kernel --no-check -w 0 -n 1 --kernels cuda --variant sm90m --head-dim 64 --masks full \
		--seqlens 16K --heads 64:8 --passes fwd --out "$out/t/ncu-run" >"$out/t/ncu-sm90m.log" 2>&1
	echo "# ncu sm90m exit $?: $(grep -E 'Duration|inst_executed.sum|issue_active|pipe_xu|Executed Ipc Active' "$out/t/ncu-sm90m.log" | tr -s ' ' | tr '\n' ';')" >>"$out/t/summary.txt"
fi
cat "$out/t/summary.txt"
for v in sm90m sm90 cudnn; do
	echo "=== $v"
	grep -E '^  [a-z_]+ +[0-9]+ ' "$out/t/t-$v.log"
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
