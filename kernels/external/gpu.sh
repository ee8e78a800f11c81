#!/bin/sh
# kernels/external/gpu.sh OUTDIR: the peers inside longca's sweep, on the GPU machine, from
# the repository root, with bin/longca (or bin/longca.gz) built by `make device`:
#  1. longca kernel over the 12 masks x 8K,16K,32K,48K x fwd,bwd at 64:8, head dim 128,
#     bf16: cuda and every torch peer (torch:flash, torch:cudnn, torch:efficient, torch:varlen,
#     torch:flex), every case checked, -w 1 -n 3 (estimated 6 minutes: ~2 min of timed
#     repetitions, ~1.5 min of checks on the CPU reference, ~3 min of FlexAttention
#     compilations; stopped with SIGINT at PEER_SWEEP_TIMEOUT, default 480 s, keeping
#     every finished row);
#  2. the timing bias of the worker: torch:cudnn and torch:flash on full 16K, 64:8, timed
#     in their own process with torch's CUDA events (and triton's do_bench, as DEVICE.md's
#     numbers were) against the same kernels timed through longca (~1 min).
# Logs, rows (OUTDIR/kernel/*.arrow), the full report and plots go to OUTDIR; a short table
# is printed last. Environment: PYTHON (default python3), PEER_SWEEP_TIMEOUT, PEER_W,
# PEER_N, PEER_KERNELS.
set -u
out=${1:?usage: gpu.sh OUTDIR}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc}
py=${PYTHON:-python3}
[ -x bin/longca ] || { [ -f bin/longca.gz ] && gunzip -kf bin/longca.gz && chmod +x bin/longca; }
[ -x bin/longca ] || { echo "gpu.sh: bin/longca is missing: run make device here, carry bin/" >&2; exit 2; }
rc=0
kern=${PEER_KERNELS:-cuda,torch:flash,torch:cudnn,torch:efficient,torch:flex,torch:varlen}

echo "# env"
bin/longca env --python "$py" >"$out/env.txt" 2>&1
sed -n '/^device/,$p' "$out/env.txt"

echo "# 1. longca kernel: $kern"
t0=$(date +%s)
timeout -s INT -k 60 "${PEER_SWEEP_TIMEOUT:-480}" bin/longca --log-format json kernel --kernels "$kern" \
	--seqlens 8K,16K,32K,48K --heads 64:8 --passes fwd,bwd -w "${PEER_W:-1}" -n "${PEER_N:-3}" \
	--python "$py" --out "$out/kernel" >"$out/kernel.txt" 2>"$out/kernel.log" || rc=1
echo "# sweep took $(( $(date +%s) - t0 )) s (exit $rc); rows in $out/kernel"
bin/longca report "$out/kernel" --plot "$out/plots" >"$out/report.txt" 2>&1 || rc=1
grep -c '"status":"ok"' "$out/kernel.log" | sed 's/^/# ok cases: /'
grep '"status":"\(wrong\|error\)"' "$out/kernel.log" | head -20 | cut -c1-400

echo "# 2. bias: in-process torch events vs longca"
timeout -k 30 240 "$py" kernels/external/bias.py --out "$out/bias.json" >"$out/bias.log" 2>&1 || rc=1
for k in torch:cudnn torch:flash; do
	bin/longca --log-level warn kernel --kernels "$k" --masks full --seqlens 16K --heads 64:8 --passes fwd,bwd \
		-w 5 -n 20 --python "$py" --out "$out/bias-$(echo $k | tr : -)" >"$out/bias-$(echo $k | tr : -).txt" 2>&1 || rc=1
done

echo "# full report: $out/report.txt; plots: $out/plots"
echo "#"
echo "# 16K, 64:8, TFLOP/s fwd / bwd by kernel (DEVICE.md standalone: cuDNN full 605/538, flex causal 421/384, FA2 full 349/311)"
grep -E '^ (full|causal|causal_document|sliding_window_causal) +16384 ' "$out/report.txt" | head -8
grep -E '^# (Cases|Geomean)' "$out/report.txt"
echo "#"
echo "# bias (full 16K 64:8, median ms): in-process events | in-process do_bench | through longca"
"$py" - "$out" <<'PY'
import json, re, sys, os
out = sys.argv[1]
try:
    b = json.load(open(os.path.join(out, "bias.json")))
except Exception as e:
    print("# bias.json missing:", e); sys.exit(0)
for k in ("torch:cudnn", "torch:flash"):
    via = {}
    try:
        txt = open(os.path.join(out, "bias-" + k.replace(":", "-") + ".txt")).read()
        for line in txt.splitlines():
            m = re.match(r"^ full +16384 +64:8 +(fwd|bwd) +\d+ +([\d.]+) +(\S+)", line)
            if m:
                via[m.group(1)] = float(m.group(3)) if m.group(3)[0].isdigit() else m.group(3)
    except OSError:
        pass
    for p in ("fwd", "bwd"):
        r = b.get(k, {}).get(p, {})
        tf = via.get(p)
        ms_longca = (r.get("flops", 0) / tf / 1e9) if isinstance(tf, float) and tf > 0 else float("nan")
        ev, db = r.get("events_ms", float("nan")), r.get("do_bench_ms", float("nan"))
        print(f"{k:12s} {p}  {ev:8.3f} | {db:8.3f} | {ms_longca:8.3f}   longca/events {ms_longca / ev if ev == ev and ev else float('nan'):.3f}")
PY
exit $rc
