#!/bin/sh
# The per-step overhead of a ring step, measured directly on the GPU machine
# (docs/simulate.md, "What the model leaves out"): 8 simulated ranks on one H200 run
# ring-p2p on causal_document masks whose documents all have one length L (a --counts
# file of one number), so that the steps' sub-masks hold from a few slices (L = 8K) to
# thousands (L = 64), each timed with and without transfers (--overlap). Beside each,
# longca simulate predicts the same case on h200-1gpu (the preset: no step term); the
# error against no_comm_ms over the slices of the case's steps is the per-slice cost.
# Build here and carry bin/:
#   go build -ldflags '-s -w' -o bin/longca ./cmd/longca && gzip -kf bin/longca
# then, from the repository root on the GPU machine:
#   sh sim/step-overhead.sh OUTDIR        # about 3 minutes, each run under timeout 100
# STEP_KERNEL, STEP_TOKENS, STEP_HEADS, STEP_HEAD_DIM (cuda, 8K, 64:8, 128) only to try it on a CPU.
# The last lines of OUTDIR/summary.txt are the comparisons (`# compared N cases ...`).
set -u
out=${1:?usage: sh sim/step-overhead.sh OUTDIR}
mkdir -p "$out" || exit 1
if [ ! -x bin/longca ] && [ -f bin/longca.gz ]; then
	gunzip -kf bin/longca.gz && chmod +x bin/longca || exit 1
fi
[ -x bin/longca ] || { echo "sim/step-overhead.sh: no bin/longca (build it here, carry bin/)" >&2; exit 1; }
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc}
kernel=${STEP_KERNEL:-cuda}
tokens=${STEP_TOKENS:-8K}
heads=${STEP_HEADS:-64:8}
hdim=${STEP_HEAD_DIM:-128}
summary="$out/summary.txt"
: >"$summary"
for L in 8192 2048 512 128 64; do
	echo "$L" >"$out/len-$L.txt"
	timeout -k 5 100 bin/longca cp --ranks 8 --kernel "$kernel" --methods ring-p2p --masks causal_document \
		--counts "$out/len-$L.txt" --tokens-per-rank "$tokens" --heads "$heads" --head-dim "$hdim" --samples 1 \
		-w 1 -n 3 --passes fwd,bwd --overlap --no-check --out "$out/cp-$L" >"$out/cp-$L.log" 2>&1
	echo "# L=$L: longca cp exit $?" | tee -a "$summary"
	merged=$(ls "$out/cp-$L"/*.merged.arrow 2>/dev/null | head -1)
	[ -n "$merged" ] || continue
	bin/longca simulate --gpus 8 --machine h200-1gpu --methods ring-p2p --masks causal_document \
		--counts "$out/len-$L.txt" --tokens-per-rank "$tokens" --heads "$heads" --head-dim "$hdim" --samples 1 --compare "$merged" \
		--out "$out/sim-$L" >"$out/sim-$L.txt" 2>&1
	grep -E '^  ring-p2p|# compared' "$out/sim-$L.txt" | sed "s/^/L=$L /" | tee -a "$summary"
	bin/longca report "$merged" 2>/dev/null | grep -E 'no-comm|ring-p2p' | sed "s/^/L=$L /" >>"$summary"
done
