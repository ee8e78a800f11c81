#!/bin/sh
# The cudnn kernel on the GPU machine, in about five minutes. Build here with
#   make cudnn-device        (bin/longca and bin/cudnn.test, packed as bin/cudnn-device.tgz)
# carry bin/cudnn-device.tgz (about 20 MB), then from the repository root there:
#   sh kernels/cudnn/gpu.sh OUTDIR
# Steps, each bounded by `timeout` (the whole within CUDNN_BUDGET seconds, 320):
#   1. smoke (bin/cudnn.test TestGPUSmoke): cuDNN's version and tiny forward+backward checks
#      of each kind of graph, with every plan's build log (each descriptor finalized or
#      refused with cuDNN's own message, the heuristics' engine count, the engines tried);
#      cuDNN's own log (warnings and errors) in OUTDIR/cudnn-backend.log
#   2. bin/cudnn.test TestGPUMasks and TestGPUContextParallelSteps: every mask at 1K and the
#      sub-masks of ring attention's steps, forward and backward, checked
#   3. longca kernel --kernels cudnn, then cuda (and torch:cudnn when this longca has it):
#      full, causal, sliding_window_causal, full_document, causal_document at CUDNN_SEQLENS
#      (8K,16K,32K,48K), fwd and bwd, GQA 64:8, head dim 128, bf16, every case checked;
#      cudnn also on full_document_long and causal_document_long at 8K (step 4's reference)
#   4. longca cp --ranks 8 --kernel cudnn: every method x the 4 CP masks at 8K tokens per
#      rank, fwd and bwd, one sample, checked
#   5. the table (last): kernel TFLOP/s side by side and cudnn / torch:cudnn; CP per-GPU
#      TFLOP/s and its efficiency against the single-GPU cudnn kernel at 8K on that mask
# Environment: CUDNN_BUDGET, CUDNN_SEQLENS, CUDNN_ITERS (5), CUDNN_CP_METHODS.
set -u
out=${1:?usage: sh kernels/cudnn/gpu.sh OUTDIR}
mkdir -p "$out"
if [ ! -x bin/cudnn.test ] && [ -f bin/cudnn-device.tgz ]; then
	tar -C bin -xzf bin/cudnn-device.tgz || exit 1
fi
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc}
export NCCL_NVLS_ENABLE=0
# cuDNN's runtime-compiled engines load NVRTC by its soname (longca also preloads it)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
seqlens=${CUDNN_SEQLENS:-8K,16K,32K,48K}
iters=${CUDNN_ITERS:-5}
methods=${CUDNN_CP_METHODS:-ring-p2p ring-allgather ulysses usp loongtrain}
start=$(date +%s)
budget=${CUDNN_BUDGET:-320}
reserve=0
bound() { # N: N seconds, or what is left of the budget less the reserve (0: skip)
	l=$((start + budget - reserve - $(date +%s)))
	[ "$l" -lt 5 ] && l=0
	[ "$l" -lt "$1" ] && echo "$l" || echo "$1"
}
run() { # SECONDS CMD...: the command under timeout; rc is its status, or "skip"
	t=$(bound "$1")
	shift
	if [ "$t" = 0 ]; then rc=skip; return; fi
	timeout "$t" "$@"
	rc=$?
}
status() { case $1 in 0) echo ok ;; 124 | 137) echo TIMEOUT ;; skip) echo "SKIPPED (out of time)" ;; *) echo "FAIL($1)" ;; esac; }
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

# 1. smoke, with cuDNN's own warnings and errors logged
reserve=240
run 60 env CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG="$out/cudnn-backend.log" \
	bin/cudnn.test -test.run '^TestGPUSmoke$' -test.v -test.count=1 >"$out/smoke.log" 2>&1
note "# 1 smoke: $(status $rc)"
grep -m1 'cuDNN .* device' "$out/smoke.log"
grep -E '^(--- |FAIL|ok|PASS)|PASS |FAIL |does not start|panic' "$out/smoke.log" | head -30
# the first failed build, in full: every step up to cuDNN's refusal
awk '/plan build log:/{buf=""; keep=1} keep{buf=buf $0 "\n"} /FAILED:/{if(keep){printf "%s", buf; exit}}' "$out/smoke.log" | head -80
grep -h -m5 -iE 'error|warn' "$out/cudnn-backend.log" 2>/dev/null | cut -c1-300

# 2. every mask, and the CP step sub-masks
reserve=200
run 45 bin/cudnn.test -test.run '^(TestGPUMasks|TestGPUContextParallelSteps)$' -test.v -test.count=1 >"$out/masks.log" 2>&1
note "# 2 masks and CP steps: $(status $rc), checks passed $(grep -c ': PASS ' "$out/masks.log"), failed $(grep -c 'FAIL ' "$out/masks.log")"
grep -E 'FAIL|panic|--- ' "$out/masks.log" | grep -v -- '--- PASS' | head -20

# 3. the kernel sweep: cudnn first, then the others on the same cases
reserve=100
common="--masks full,causal,sliding_window_causal,full_document,causal_document --seqlens $seqlens --heads 64:8 --head-dim 128 --dtype bf16 --passes fwd,bwd -w 2 -n $iters --check"
run 70 bin/longca kernel --kernels cudnn $common --out "$out/kernel-cudnn" >"$out/kernel-cudnn.log" 2>&1
note "# 3 longca kernel cudnn: $(status $rc)"
run 20 bin/longca kernel --kernels cudnn --masks full_document_long,causal_document_long --seqlens 8K --heads 64:8 \
	--head-dim 128 --dtype bf16 --passes fwd,bwd -w 2 -n "$iters" --check --out "$out/kernel-cudnn-long" >"$out/kernel-cudnn-long.log" 2>&1
note "# 3 longca kernel cudnn (CP masks at 8K): $(status $rc)"
others=cuda
if bin/longca kernel --kernels torch:cudnn --masks full --seqlens 1K --dry-run >/dev/null 2>&1; then
	others=cuda,torch:cudnn
fi
run 100 bin/longca kernel --kernels "$others" $common --out "$out/kernel-others" >"$out/kernel-others.log" 2>&1
note "# 3 longca kernel $others: $(status $rc)"

# 4. context parallelism on 8 simulated ranks, one sweep per method
reserve=8
for m in $methods; do
	run 16 bin/longca cp --ranks 8 --kernel cudnn --methods "$m" --masks full,causal,full_document_long,causal_document_long \
		--tokens-per-rank 8K --heads 64:8 --head-dim 128 --dtype bf16 --passes fwd,bwd --samples 1 -w 1 -n 3 \
		--check --check-budget 5e8 --out "$out/cp/$m" >"$out/cp-$m.log" 2>&1
	note "# 4 longca cp $m: $(status $rc), rows $(grep -c '"message":"cp"' "$out/cp-$m.log"), wrong $(grep -c '"status":"wrong"' "$out/cp-$m.log")"
done

# 5. the table
python3 - "$out" <<'EOF' | tee -a "$summary"
import glob, json, os, sys
import pyarrow.ipc as ipc
out = sys.argv[1]
def rows(pattern):
    r = []
    for f in sorted(glob.glob(os.path.join(out, pattern), recursive=True)):
        if ".rank-0-of-" not in f:
            continue
        try:
            r += ipc.open_stream(f).read_all().to_pylist()
        except Exception as e:
            print("# cannot read %s: %s" % (f, e))
    return r
def tf(r):
    return "%.1f" % r["tflops"] if r and r["status"] == "ok" and r["tflops"] else (r["status"] if r else "-")
ks = rows("kernel-*/**/*.arrow")
by = {(r["kernel"], r["mask"], r["seqlen"], r["pass"]): r for r in ks}
kernels = sorted({r["kernel"] for r in ks}, key=lambda k: (k != "cudnn", k))
print("#")
print("# kernels, GQA 64:8, d128, bf16: TFLOP/s (status where not ok); check = cudnn's worst err/tol")
print("# %-22s %6s %4s " % ("mask", "seqlen", "pass") + " ".join("%12s" % k for k in kernels) + " %10s %9s  %s" % ("cudnn/tcud", "check", "cudnn variant"))
for key in sorted({(r["mask"], r["seqlen"], r["pass"]) for r in ks}):
    m, s, p = key
    c = by.get(("cudnn",) + key)
    t = by.get(("torch:cudnn",) + key)
    ratio = "%.3f" % (c["tflops"] / t["tflops"]) if c and t and c["tflops"] and t["tflops"] else "-"
    chk = "%.2f" % (c["check_err"] / c["check_tol"]) if c and c.get("check_err") is not None and c.get("check_tol") else "-"
    print("  %-22s %6d %4s " % (m, s, p) + " ".join("%12s" % tf(by.get((k,) + key)) for k in kernels) + " %10s %9s  %s" % (ratio, chk, (c or {}).get("kernel_variant", "")))
bad = [r for r in ks if r["kernel"] == "cudnn" and r["status"] != "ok"]
for r in bad[:8]:
    print("# cudnn %s %d %s: %s: %s" % (r["mask"], r["seqlen"], r["pass"], r["status"], r["reason"][:240]))
ref = {(r["mask"], r["pass"]): r["tflops"] for r in ks if r["kernel"] == "cudnn" and r["seqlen"] == 8192 and r["status"] == "ok"}
cp = rows("cp/**/*.arrow")
print("#")
print("# longca cp --ranks 8 --kernel cudnn, 8K tokens per rank: per-GPU TFLOP/s, efficiency = / single-GPU cudnn at 8K")
print("# %-15s %-8s %-22s %4s %10s %8s %10s %6s" % ("method", "mesh", "mask", "pass", "status", "TFLOP/s", "efficiency", "check"))
for r in cp:
    mesh = "%sx%s" % (r.get("cp_ulysses"), r.get("cp_ring"))
    e = ref.get((r["mask"], r["pass"]))
    eff = "%.3f" % (r["tflops"] / e) if e and r["status"] == "ok" and r["tflops"] else "-"
    chk = "pass" if r.get("check_pass") else ("FAIL" if r.get("check_pass") is False else "-")
    print("  %-15s %-8s %-22s %4s %10s %8s %10s %6s" % (r["method"], mesh, r["mask"], r["pass"], r["status"], tf(r), eff, chk))
    if r["status"] not in ("ok",):
        print("#   %s" % r["reason"][:240])
EOF
echo "# elapsed $(($(date +%s) - start)) s; logs and results in $out"
