#!/bin/sh
# The first device call of the next session (written 2026-12-03 evening), from the
# repository root with bin/longca.gz and bin/cuda.test.gz carried (make device; gzip -kf
# bin/cuda.test):
#   sh scripts/device/next-first.sh OUT
# 1. GPU tests: sm90 (today's default, the backward's dQ staged while dK runs) in full (every
#    mask fwd+bwd, odd lengths, fp16, windows, per-head masks, long rows, the deterministic
#    backward), then the experiments sm90e, sm90f, sm90-norot, sm90-ktfast (docs/perf.md "Next",
#    predictions written before they ran) on the usual subset;
# 2. the backward at 16K on four masks and full/causal at 48K: sm90, each experiment whose
#    tests passed, the native cudnn; the SM clock and power sampled by nvidia-smi meanwhile (is the
#    timed loop throttled where ncu's single launch is not? call 11: ncu 40.8 ms against
#    about 46.5 ms timed for the same full 16K backward);
# 3. head dim 64, every peer, the five masks cuDNN runs, 8K-48K (the d64 table of issue 19's
#    must-show; the bound of call 8 cut the document and window masks).
# About 9 minutes, each part bounded; logs packed under OUT, the tables last.
set -u
out=${1:?usage: next-first.sh OUT}
mkdir -p "$out/k"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
for f in longca cuda.test; do
	[ -f "bin/$f.gz" ] && gunzip -c "bin/$f.gz" >"bin/$f" && chmod +x "bin/$f"
done
t0=$(date +%s)
L=bin/longca
# bound N: N seconds, or what is left before 540 s into the call less 30 (the tables and the
# archive), whichever is less; 0 when nothing is left (the step is then skipped)
bound() {
	left=$((540 - 30 - ($(date +%s) - t0)))
	[ "$left" -lt "$1" ] && echo $((left > 5 ? left : 0)) || echo "$1"
}
run() { # run N CMD...: CMD bounded by bound N, skipped when nothing is left
	n=$(bound "$1")
	shift
	[ "$n" -gt 0 ] || { echo "# skipped (no time left): $*" >>"$out/k/summary.txt"; return 124; }
	timeout -s INT -k 10 "$n" "$@"
}
STEP_TIMEOUT=$(bound 110) sh kernels/cuda/gpu.sh "$out/k" test sm90 >/dev/null 2>&1
vs="sm90"
for v in sm90e sm90f sm90-norot sm90-ktfast; do
	n=$(bound 80)
	[ "$n" -gt 0 ] && STEP_TIMEOUT=$n sh kernels/cuda/gpu.sh "$out/k" test "$v" 'TestCompile|TestMasks|TestWindows|TestDeterministic|TestOddLengths' >/dev/null 2>&1 && vs="$vs $v"
done
grep -h 'deterministic: dq' "$out/k"/test-*.log | head -4 >>"$out/k/summary.txt"
# sm90e at 240/24 registers: spills (stack), serialised wgmma, NVRTC warnings
grep -hiE 'bwd90e.*(regs|stack)|serializ|warning' "$out/k"/test-sm90e.log | head -6 >>"$out/k/summary.txt"
echo "# tests done at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv -lms 200 >"$out/k/clocks.csv" 2>&1 &
smi=$!
for v in $vs; do
	run 60 $L kernel --kernels cuda --variant "$v" --masks full,causal,causal_document,sliding_window_causal --seqlens 16K \
		--heads 64:8 --passes bwd -w 3 -n 10 --out "$out/k/run-$v" >"$out/k/time-$v.log" 2>&1
	echo "# kernel $v 16K rc=$? at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
	run 60 $L kernel --kernels cuda --variant "$v" --masks full,causal --seqlens 48K \
		--heads 64:8 --passes bwd -w 3 -n 10 --out "$out/k/run48-$v" >"$out/k/time48-$v.log" 2>&1
	echo "# kernel $v 48K rc=$? at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
done
run 60 $L kernel --kernels cudnn --masks full,causal,causal_document,sliding_window_causal --seqlens 16K \
	--heads 64:8 --passes bwd -w 3 -n 10 --out "$out/k/run-cudnn" >"$out/k/time-cudnn.log" 2>&1
echo "# kernel cudnn 16K rc=$? at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
run 60 $L kernel --kernels cudnn --masks full,causal --seqlens 48K \
	--heads 64:8 --passes bwd -w 3 -n 10 --out "$out/k/run48-cudnn" >"$out/k/time48-cudnn.log" 2>&1
echo "# kernel cudnn 48K rc=$? at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
kill "$smi" 2>/dev/null
tar -C "$out" -czf "$out/kernel.tgz" k

# where the backward's warps wait, by SASS line (call 11: long_scoreboard 1.77 the first stall:
# global reads in the consumer loop, a spill, or the mbarrier waits?)
run 75 ncu --clock-control none -k 'regex:^bwd90_bf16' -c 1 --section SourceCounters --section WarpStateStats \
	--page source --print-source sass --csv \
	$L kernel --kernels cuda --no-check -w 0 -n 1 --masks full --seqlens 16K --heads 64:8 --passes bwd \
	--out "$out/ncu-run" >"$out/ncu-bwd-sass.csv" 2>&1
echo "# ncu sass rc=$? at $(($(date +%s) - t0)) s" >>"$out/k/summary.txt"
gzip -f "$out/ncu-bwd-sass.csv"
tar -C "$out" -czf "$out/kernel.tgz" k
rm -rf "$out/ncu-run"

run 190 $L kernel --kernels cuda,cudnn,torch:cudnn,torch:flash,torch:flex,torch:varlen --head-dim 64 \
	--masks full,causal,full_document,causal_document,sliding_window_causal --seqlens 8K,16K,32K,48K --heads 64:8 \
	--passes fwd,bwd -w 3 -n 10 --out "$out/d64/run" --run-id d64 >"$out/d64.log" 2>&1
timeout -k 5 30 $L report "$out/d64/run" >"$out/d64.report" 2>&1
tar -C "$out" -czf "$out/d64.tgz" d64 d64.log d64.report
echo "# done at $(($(date +%s) - t0)) s"
echo "=== GPU tests and times"; cat "$out/k/summary.txt"
echo "=== backward TFLOP/s (mask seqlen pass TFLOP/s)"
for f in "$out"/k/time-*.log "$out"/k/time48-*.log; do
	echo "## $(basename "$f" .log)"
	grep -E '^  [a-z_]+ +[0-9]' "$f" | awk '{printf "%-24s %-6s %-4s", $1, $2, $4; for (i = 7; i <= NF; i++) printf " %s", $i; printf "\n"}' | head -6
done
echo "=== SM clock (MHz) and power while timed: min / median / max"
for col in 2 4; do
	awk -F', ' -v c=$col 'NR > 1 && $2 + 0 > 0 { print $c + 0 }' "$out/k/clocks.csv" | sort -n |
		awk -v c=$col '{ a[NR] = $1 } END { if (NR) printf "%s min %s, median %s, max %s (%d samples)\n", c == 2 ? "SM clock MHz" : "power W", a[1], a[int(NR / 2) + 1], a[NR], NR }'
done
echo "=== head dim 64, every peer"; sed -n '/x fastest/,$p' "$out/d64.report" | head -45
echo "=== the backward's SASS lines with the most stall samples (full 16K; the reason columns where ncu gives them)"
gunzip -c "$out/ncu-bwd-sass.csv.gz" | python3 -c '
import csv, sys
rows = [r for r in csv.reader(sys.stdin) if len(r) > 3]
hdr = next((i for i, r in enumerate(rows) if any(c == "Source" or "Address" in c for c in r)), None)
if hdr is None:
    print("# no source table"); sys.exit(0)
h, body = rows[hdr], rows[hdr + 1:]
src = next((i for i, c in enumerate(h) if c.strip() == "Source"), None)
samp = next((i for i, c in enumerate(h) if "Stall Sampling (All" in c), None)
if src is None or samp is None:
    print("# columns:", h[:40]); sys.exit(0)
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return 0.0
reasons = [i for i, c in enumerate(h) if i != samp and ("stall" in c.lower() or "Stalled" in c)]
tot = sum(num(r[samp]) for r in body if len(r) > samp) or 1
for r in sorted((r for r in body if len(r) > samp), key=lambda r: -num(r[samp]))[:25]:
    top = sorted(((num(r[i]), h[i]) for i in reasons if i < len(r)), reverse=True)[:2]
    print("%5.1f%%  %-70s %s" % (100 * num(r[samp]) / tot, r[src][:70], "; ".join("%s %g" % (n[:40], v) for v, n in top if v)))
' 2>&1 | head -30
# two files come back: everything in one archive, and the SASS table
set --
for p in k d64 d64.log d64.report; do [ -e "$out/$p" ] && set -- "$@" "$p"; done
tar -C "$out" -czf "$out/all.tgz" "$@" &&
	rm -rf "$out/k" "$out/d64" "$out/d64.log" "$out/d64.report" "$out/kernel.tgz" "$out/d64.tgz"
ls "$out"
