#!/bin/sh
# kernels/external/peers-round.sh [OUTDIR]: one GPU round for the peers of issue 19, run
# from the repository root with bin/longca (or bin/longca.gz) built by `make device`:
#  1. longca kernel: torch:varlen (varlen_attn), torch:flex and the native cudnn kernel
#     on full_document, causal_document, sliding_window_causal and sliding_window at 16K,
#     64:8, head dim 128, bf16, fwd and bwd, every case checked, -w 2 -n 5;
#  2. longca sparse: torch:flex on 64-token block-sparse maps at 32K, kept 0.2 and 0.5,
#     fwd and bwd, checked, -w 2 -n 5 (the backward that failed with NoValidChoicesError).
# Writes to OUTDIR (default $OUT, else out/peers-round) three files: peers.arrow (both
# sweeps merged), report.txt (longca report: TFLOP/s side by side and ratios) and
# peers.log (both sweeps' logs); prints a short table last, one line per row: kernel,
# mask, pass, status, TFLOP/s, check, variant, and the reason of a row that is not ok.
# About 3-4 minutes, FlexAttention's compilations most of it; each sweep is stopped with
# SIGINT at its bound (240 s, 150 s), keeping the rows it finished. PYTHON picks the
# interpreter with torch (default python3).
set -u
out=${1:-${OUT:-out/peers-round}}
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/peers-round.XXXXXX")
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc}
py=${PYTHON:-python3}
[ -x bin/longca ] || { [ -f bin/longca.gz ] && gunzip -kf bin/longca.gz && chmod +x bin/longca; }
[ -x bin/longca ] || { echo "peers-round.sh: bin/longca is missing: run make device here, carry bin/" >&2; exit 2; }
rc=0
log="$out/peers.log"
: >"$log"

t0=$(date +%s)
echo "# 1. longca kernel: torch:varlen, torch:flex, cudnn; document and window masks at 16K" | tee -a "$log"
timeout -s INT -k 30 240 bin/longca kernel --kernels torch:varlen,torch:flex,cudnn \
	--masks full_document,causal_document,sliding_window_causal,sliding_window --seqlens 16K --heads 64:8 \
	--passes fwd,bwd -w 2 -n 5 --python "$py" --out "$work" --run-id peers-kernel >>"$log" 2>&1 || rc=1
t1=$(date +%s)
echo "# kernel sweep took $((t1 - t0)) s (exit status so far $rc)" | tee -a "$log"

echo "# 2. longca sparse: torch:flex, 64-token blocks, 32K, kept 0.2 and 0.5" | tee -a "$log"
timeout -s INT -k 30 150 bin/longca sparse --kernels torch:flex --seqlens 32K --block 64 --ratios 0.2,0.5 \
	--heads 64:8 --passes fwd,bwd -w 2 -n 5 --python "$py" --out "$work" --run-id peers-sparse >>"$log" 2>&1 || rc=1
t2=$(date +%s)
echo "# sparse sweep took $((t2 - t1)) s (exit status so far $rc)" | tee -a "$log"

bin/longca merge "$work" --out "$work/peers.arrow" --csv >>"$log" 2>&1 || rc=1
[ -f "$work/peers.arrow" ] && cp "$work/peers.arrow" "$out/peers.arrow"
bin/longca report "$work/peers.arrow" >"$out/report.txt" 2>&1 || rc=1

echo "#"
echo "# report ($out/report.txt):"
grep -v '^#$' "$out/report.txt" | head -40
echo "#"
echo "# every row (TFLOP/s; check: pass, or the check's worst error ratio):"
"$py" - "$work/peers.csv" <<'PY'
import csv, json, sys
try:
    rows = list(csv.DictReader(open(sys.argv[1], newline="")))
except OSError as e:
    print("# no merged rows:", e); sys.exit(0)
print(f"{'kernel':13s} {'mask':32s} {'pass':4s} {'status':11s} {'TFLOP/s':>8s} {'check':5s} variant / reason")
for r in rows:
    tf = r.get("tflops") or ""
    tf = f"{float(tf):8.1f}" if tf else "       -"
    ck = {"true": "pass", "false": "FAIL"}.get(r.get("check_pass", ""), "-")
    what = r.get("kernel_variant", "")
    if r.get("status") != "ok":
        what = (r.get("reason") or "")[:200]
    m = r["mask"]
    if r.get("kept_ratio"):
        m = f"{m} b{r.get('block_size', '')} r{r['kept_ratio']}"
    print(f"{r['kernel']:13s} {m[:32]:32s} {r['pass']:4s} {r['status']:11s} {tf} {ck:5s} {what}")
vers = {r["kernel"]: r.get("kernel_versions", "") for r in rows if r.get("kernel_versions", "") not in ("", "{}")}
for k, v in sorted(vers.items()):
    try:
        v = json.loads(v)
        v = ", ".join(f"{a}={b}" for a, b in sorted(v.items()))
    except ValueError:
        pass
    print(f"# versions {k}: {v[:300]}")
PY
echo "# rounds: kernel $((t1 - t0)) s, sparse $((t2 - t1)) s; exit $rc"
rm -rf "$work"
exit $rc
