#!/bin/sh
# Call 101 (prepared 2026-12-06, twenty-eighth session; not yet run): any card. sm90dw: the
# forward, where sm90's rule runs it persistent (short rows: the documents, the windows,
# causal_blockwise, share_question, prefix_lm_document at 8K-32K), drawing its items by the
# counter (fwd90opd at d128, fwd90mopd at d64) instead of the static walk blockIdx.x, +
# gridDim.x, ... A model of the two walks (kernels/cuda/walk_test.go: entries plus 1.5 a
# non-empty item, 132 blocks) puts the static walk at 0.89-0.99 of even on those cells and the
# counter's at 0.99-1.00; it explains call 98a's one-rank ring-allgather and loongtrain rows
# on the documents' forward (0.89-0.90: zigzag's 65 row tiles for 64 take the static walk
# from 0.98 to 0.89 and 0.96 to 0.85), and sm90rm's +8% on causal_blockwise 16K (calls 74,
# 77, 78: another item order, a better static walk).
# 1. sm90dw's forward GPU tests (the entries at both head dims on a full grid and on 3 blocks,
#    every mask, windows, odd lengths, fp16, block-sparse, long rows, occupancy).
#    Prediction: they pass.
# 2. d: four processes interleaved, sm90 sm90dw sm90 sm90dw, d128 forward, the 12 masks at
#    8K / 16K / 32K, settled, checked; then each cell's sm90dw / sm90.
#    Prediction (half to all of the model's gain): causal_blockwise 16K +6 to +12%,
#    causal_document 8K / 32K +1.5 to +4%, prefix_lm_document 8K-32K +2 to +4%,
#    share_question 8K / 16K +1.5 to +3%, the windows and block_causal_document +0.5 to +2.4%;
#    the cells the rule does not run persistent (full, causal, the long rows) within +-1%.
# 3. e (run last): the same at d64. Prediction: causal_document 8K and causal_blockwise 8K +2.5 to +5.4%,
#    causal_blockwise 16K +3.5 to +7%, prefix_lm_document 8K / 16K +1.5 to +4.3%; the rest
#    within +-1% (full and causal already take the counter).
# 4. c: one rank through NCCL (mpirun -np 1), ring-allgather and loongtrain, d128 forward on
#    full_document_long and causal_document_long, 8K tokens: sm90 with --sharding zigzag (call
#    98a's rows: 0.89-0.90), sm90dw with zigzag, sm90 with the default (contiguous since the
#    twenty-seventh session). Prediction: sm90 zigzag 0.87-0.92; sm90dw zigzag and sm90
#    contiguous 0.97-1.03.
# 5. c8: 8 ranks on one GPU (in-process, the device mover), ring-p2p, loongtrain and usp (2x4),
#    causal_document_long forward, 8K tokens a rank: sm90 against sm90dw. Every step's kernel
#    call of ring-p2p runs zigzag's padded rows (65 row tiles): the model puts its static walk
#    at 0.84-0.89 of even, the counter's at 0.99 (call 98a: ring-p2p's efficiency 0.61).
#    Prediction: ring-p2p's device TFLOP/s +8 to +15%, loongtrain and usp +3 to +12%.
# Promotion rule (docs/perf.md): the tests pass, the geomean gains, no cell loses 1%.
# Bounded to 560 s (BUDGET); tables last; logs packed as OUT/t.tgz.
#   sh scripts/device/call101.sh OUT   (carry bin/longca.gz bin/cuda.test.gz)
set -u
out=${1:?usage: call101.sh OUT}
. scripts/device/lib.sh
call_start ${BUDGET:-560} longca cuda.test || exit 1
warm sm90 &
warm sm90dw &
wait
GPU_TESTS='TestMasks|TestClimbingScores|TestOddLengthsAndFP16|TestHeadDim64Groups|TestWindows|TestHeadMasks|TestBlockSparse|TestLongRows|TestForwardEntries64|TestForwardEntries128|TestForwardOccupancy' gpu_tests sm90dw 150
interleave d 60 "sm90 sm90dw sm90 sm90dw" --masks all --head-dim 128 --seqlens 8K,16K,32K --passes fwd -w 3 -n 8
# cpstep NAME VARIANT SHARDING: one rank through NCCL, the two methods on the two long masks
cpstep() {
	_left=$((budget - ($(date +%s) - t0)))
	[ "$_left" -gt 30 ] || { echo "# cp $1 skipped (time)" >>"$out/t/summary.txt"; return; }
	timeout -s INT -k 10 $((_left < 80 ? _left : 80)) mpirun --allow-run-as-root -np 1 -x NCCL_NVLS_ENABLE -x MASTER_ADDR=127.0.0.1 -x LONGCA_CACHE_DIR \
		bin/longca cp --backend nccl --kernel cuda --variant "$2" --sharding "$3" --methods ring-allgather,loongtrain \
		--masks full_document_long,causal_document_long --tokens-per-rank 8K --ulysses 1 --ring 1 --heads 64:8 --head-dim 128 \
		--dtype bf16 --passes fwd --samples 1 -w 3 -n 10 --check --check-budget 5e8 --baseline measure \
		--out "$out/t/$1" --run-id "$1" >"$out/t/$1.log" 2>&1
	echo "# cp $1 ($2, $3) rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
	bin/longca report "$out/t/$1" >"$out/t/$1.report" 2>&1
}
cpstep c-sm90-zigzag sm90 zigzag
cpstep c-sm90dw-zigzag sm90dw zigzag
cpstep c-sm90-default sm90 default
# cp8 NAME VARIANT: 8 in-process ranks on the one GPU, the ring methods on causal_document_long
cp8() {
	_left=$((budget - ($(date +%s) - t0)))
	[ "$_left" -gt 30 ] || { echo "# cp8 $1 skipped (time)" >>"$out/t/summary.txt"; return; }
	timeout -s INT -k 10 $((_left < 75 ? _left : 75)) bin/longca cp --ranks 8 --kernel cuda --variant "$2" --methods ring-p2p,loongtrain,usp \
		--ulysses 2 --ring 4 --masks causal_document_long --tokens-per-rank 8K --heads 64:8 --head-dim 128 --dtype bf16 --passes fwd \
		--samples 1 -w 3 -n 10 --check --check-budget 5e8 --baseline measure --out "$out/t/$1" --run-id "$1" >"$out/t/$1.log" 2>&1
	echo "# cp8 $1 ($2) rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
	bin/longca report "$out/t/$1" >"$out/t/$1.report" 2>&1
}
cp8 c8-sm90 sm90
cp8 c8-sm90dw sm90dw
interleave e 50 "sm90 sm90dw sm90 sm90dw" --masks all --head-dim 64 --seqlens 8K,16K,32K --passes fwd -w 3 -n 8
cat "$out/t/summary.txt"
for dim in d e; do
	table $dim "$([ $dim = d ] && echo d128 || echo d64) forward TFLOP/s, settled, 12 masks" sm90dw/sm90 sm90 sm90dw sm90 sm90dw
	python3 - "$out/t/$dim.table" <<'PY'
import math, sys
g = []
for l in open(sys.argv[1]):
    f = l.split()
    try:
        a, b, c, d = map(float, f[2:6])
    except ValueError:
        continue
    g.append(((b + d) / 2) / ((a + c) / 2))
if g:
    print("# sm90dw / sm90 over %d cells: geomean %+.2f%%, lowest %+.2f%%, highest %+.2f%%; cells below -1%%: %d" % (
        len(g), 100 * (math.exp(sum(map(math.log, g)) / len(g)) - 1), 100 * (min(g) - 1), 100 * (max(g) - 1), sum(x < 0.99 for x in g)))
PY
done
echo "=== the forward's walk, rows of each run (d128 then d64): static (persistent-fwd), counter (dyn-fwd)"
for r in d-0-sm90 d-1-sm90dw e-0-sm90 e-1-sm90dw; do
	echo "$r: static $(row_variants $r | tr '|' '\n' | grep -c persistent-fwd), counter $(row_variants $r | tr '|' '\n' | grep -c dyn-fwd)"
done
for r in c-sm90-zigzag c-sm90dw-zigzag c-sm90-default c8-sm90 c8-sm90dw; do
	echo "=== cp, $r: method mesh mask pass ... eff"
	sed -n '/^# CP methods/,$p' "$out/t/$r.report" | grep -E 'ring-allgather|loongtrain|# method' | cut -c1-160
done
tar -C "$out" -czf "$out/t.tgz" t && rm -rf "$out/t"
