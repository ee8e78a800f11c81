# Helpers shared by the device call scripts (sourced: `. scripts/device/lib.sh`; the scripts
# are listed in scripts/device/README.md). The caller sets out (its output folder, with t/ in it),
# t0 (its start, date +%s) and budget (seconds for the whole call), or calls call_start.

# limit_seconds SCRIPT VALUE [USAGE]: VALUE is a whole number of seconds (a script's
# LIMIT_SECONDS), or one line naming it (and USAGE) on stderr and status 2, so that a flag
# given where the limit goes is refused before timeout reads it.
limit_seconds() {
	case $2 in '' | *[!0-9]*)
		echo "$1: LIMIT_SECONDS '$2' is not a number of seconds${3:+ (usage: $3)}" >&2
		return 2
		;;
	esac
}

# call_start BUDGET BIN...: the call's clock (t0), its budget (CALL_BUDGET overrides it),
# its environment and output folder ($out/t), the carried binaries unpacked (bin/NAME from
# bin/NAME.gz, as make device writes them).
call_start() {
	budget=${CALL_BUDGET:-$1}
	shift
	for _f in "$@"; do
		[ -x "bin/$_f" ] || { gunzip -c "bin/$_f.gz" >"bin/$_f" && chmod +x "bin/$_f"; } || return 1
	done
	export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
	mkdir -p "$out/t"
	t0=$(date +%s)
}

# gpu_tag: the GPU this call runs on, as a run id's prefix (h200, h100; "gpu" where
# nvidia-smi does not say), so that a run's files name the card that made them.
gpu_tag() {
	_g=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -oiwE 'h[0-9]+' | head -1 | tr A-Z a-z)
	echo "${_g:-gpu}"
}

# warm VARIANT...: each variant's module compiled (NVRTC, about 40 s on a fresh machine) by
# one small case of each pass (the module holds every entry), outside any timed step, so that a step's
# cap is spent on its cases (calls 54 and 57 lost their first step's cases to the compile);
# one summary line.
warm() {
	for _v in "$@"; do
		timeout -k 10 120 ${LONGCA_BIN:-bin/longca} kernel --kernels cuda --variant "$_v" --masks causal --seqlens 1K \
			--passes fwd,bwd -w 0 -n 1 --heads 8:2 --out "$out/t/warm-$_v" --run-id "warm-$_v" >"$out/t/warm-$_v.log" 2>&1
		echo "# warm $_v rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
	done
}

# step NAME CAP ARGS...: `bin/longca ARGS --heads HEADS --out $out/t/NAME --run-id NAME` (HEADS 64:8 unless set)
# (LONGCA_BIN names another binary),
# stopped with SIGINT at CAP seconds or at the budget (the rows kept), one summary line.
step() {
	_name=$1 _cap=$2
	shift 2
	_left=$((budget - ($(date +%s) - t0)))
	[ "$_left" -gt 15 ] || { echo "# $_name skipped (time)" >>"$out/t/summary.txt"; return; }
	timeout -s INT -k 10 $((_left < _cap ? _left : _cap)) ${LONGCA_BIN:-bin/longca} "$@" --heads "${HEADS:-64:8}" --out "$out/t/$_name" --run-id "$_name" >"$out/t/$_name.log" 2>&1
	_rc=$?
	# a step killed before its table (rc 137: the case at hand outlived INT's 10 s) keeps its
	# finished rows in its rank file: their table appended from there, for join_runs (call 84
	# lost a step's 11 rows from the tables so)
	grep -q '^# Cases' "$out/t/$_name.log" || ${LONGCA_BIN:-bin/longca} report "$out/t/$_name" >>"$out/t/$_name.log" 2>/dev/null
	echo "# $_name rc=$_rc at $(($(date +%s) - t0)) s: $(grep '^# Cases' "$out/t/$_name.log" | sed 's/Avg.*//')" >>"$out/t/summary.txt"
}

# interleave DIM CAP "RUN..." ARGS...: `step DIM-I-RUN CAP kernel KERNELS ARGS` for each run
# in order (I = 0, 1, ...), KERNELS `--kernels cudnn` for the run cudnn and `--kernels cuda
# --variant RUN` for any other: the runs join_runs DIM RUN... reads back.
interleave() {
	_dim=$1 _icap=$2 _runs=$3 _k=0
	shift 3
	for _v in $_runs; do
		if [ "$_v" = cudnn ]; then
			step "$_dim-$_k-$_v" "$_icap" kernel --kernels cudnn "$@"
		else
			step "$_dim-$_k-$_v" "$_icap" kernel --kernels cuda --variant "$_v" "$@"
		fi
		_k=$((_k + 1))
	done
}

# gpu_tests VARIANT CAP: the variant's GPU tests (kernels/cuda/gpu.sh with bin/cuda.test;
# those of gpu_test.go only: the package's CPU tests, a minute of them, ran here already),
# each test stopped at CAP seconds; a summary line and the failures.
gpu_tests() {
	# GPU_TESTS (names joined by |) narrows them; every test of gpu_test.go otherwise
	_tests=${GPU_TESTS:-$(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T).*/\1/p' kernels/cuda/gpu_test.go | paste -sd'|' -)}
	STEP_TIMEOUT=$2 sh kernels/cuda/gpu.sh "$out/t" test "$1" "^($_tests)\$" >/dev/null 2>&1
	echo "# tests $1 done at $(($(date +%s) - t0)) s: $(grep -c 'bwd=' "$out/t/test-$1.log") checks, $(grep -c -- '--- FAIL' "$out/t/test-$1.log") failed tests" >>"$out/t/summary.txt"
	grep -E -- "--- FAIL|panic|Skip" "$out/t/test-$1.log" | head -8 >>"$out/t/summary.txt"
}

# stalls FILE: an ncu log's time, instruction count and stall reasons per issued
# instruction (those at 0.05 or more), one per line.
stalls() {
	grep -E 'inst_executed.sum|issue_stalled_.*ratio|Warp Cycles Per Issued|No Eligible|Duration' "$1" 2>/dev/null |
		awk '{v=$NF; $NF=""; sub(/smsp__average_warps_issue_stalled_/, "stall_"); sub(/_per_issue_active.ratio/, ""); print $0 v}' |
		awk '$NF+0 >= 0.05 || !/stall_/' | cut -c1-100 | head -20
}

# STALL_METRICS: the ncu metrics stalls reads.
STALL_METRICS='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum,smsp__cycles_active.avg,gpu__time_duration.sum'

# join_runs DIM NAME...: the table of the runs $out/t/DIM-I-NAME.log (I = 0, 1, ... in the
# order given): a line a case of any run (mask seqlen, and the pass with JOIN_PASS=1), a column a run's
# TFLOP/s (the log's last column), "-" where a run has no such case.
join_runs() {
	_d=$1 _i=0 _j=
	shift
	for _v in "$@"; do
		_f="$out/t/$_d-$_i-$_v.log"
		grep -hE '^  [a-z_][A-Za-z0-9_.+-]* +[0-9]+ ' "$_f" 2>/dev/null | awk -v p="${JOIN_PASS:-}" '{k = $1 "@" $2; if (p != "") k = k "@" $4; print k, $NF}' | sort >"$_f.v"
		if [ -z "$_j" ]; then
			_j="$_f.v"
		else # every field named (the _i columns so far, then this run's), so that a run without a case shows -
			join -a 1 -a 2 -e - -o "0$(seq -f ',1.%g' 2 $((_i + 1)) | tr -d '\n'),2.2" "$_j" "$_f.v" >"$_f.j" 2>/dev/null
			_j="$_f.j"
		fi
		_i=$((_i + 1))
	done
	[ -n "$_j" ] && tr '@' ' ' <"$_j" | sort -k1,1 -k2,2n
}

# sass_top FILE: the 30 SASS instructions with the most stall samples in FILE, the CSV of
# `ncu --page source --print-source sass --csv` (a line each: share, index, instruction).
sass_top() {
	python3 - "$1" <<'PY' 2>&1 | head -40
import csv, sys
try:
    rows = [r for r in csv.reader(open(sys.argv[1], errors="replace")) if len(r) > 3]
except OSError as e:
    print("# no csv:", e); sys.exit(0)
hdr = next((i for i, r in enumerate(rows) if any(c.strip() == "Source" for c in r)), None)
if hdr is None:
    print("# no source table"); sys.exit(0)
h = rows[hdr]; body = rows[hdr + 1:]
src = next(i for i, c in enumerate(h) if c.strip() == "Source")
samp = next((i for i, c in enumerate(h) if "Stall Sampling (All" in c), None)
if samp is None:
    print("# no sampling column:", h[:20]); sys.exit(0)
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return 0.0
tot = sum(num(r[samp]) for r in body if len(r) > samp) or 1
print(f"# {len(body)} instructions, {tot:.0f} samples")
for i, r in sorted(enumerate(body), key=lambda x: -num(x[1][samp]) if len(x[1]) > samp else 0)[:30]:
    print(f"{100*num(r[samp])/tot:5.1f}%  #{i:<5d} {r[src][:90]}")
PY
}

# ncu_one TAG METRICS KERNEL MASK SEQLEN [CAP]: ncu's METRICS (none when empty) of one backward launch (64:8,
# head dim NCU_DIM or 128, unchecked; the forward's with NCU_PASS=fwd) of KERNEL (a cuda
# variant, or cudnn), into $out/t/ncu-TAG-KERNEL-MASK-SEQLEN[-fwd][-dDIM].log (-dDIM at a head
# dim other than 128), skipped when the budget is within 15 s of its end.
ncu_one() {
	_tag=$1 _metrics=$2
	shift 2
	_left=$((budget + 40 - ($(date +%s) - t0)))
	[ "$_left" -gt 15 ] || { echo "# ncu $_tag $* skipped (time)" >>"$out/t/summary.txt"; return; }
	_re='^bwd90(es?|t|qq)_bf16' _sel="--kernels cuda --variant $1" _cap=${4:-30} _pass=${NCU_PASS:-bwd} _sfx= _dim=${NCU_DIM:-128}
	[ "$1" = cudnn ] && _re='bprop' _sel="--kernels cudnn"
	if [ "$_pass" = fwd ]; then
		_re='^fwd90' _sfx=-fwd
		[ "$1" = cudnn ] && _re='fprop'
	fi
	[ "$_dim" = 128 ] || _sfx=$_sfx-d$_dim
	timeout -k 5 $((_left < _cap ? _left : _cap)) ncu --clock-control none -k "regex:$_re" -c 1 ${_metrics:+--metrics "$_metrics"} ${NCU_SECTIONS:-} \
		bin/longca kernel $_sel --no-check -w 0 -n 1 --masks "$2" --seqlens "$3" --heads 64:8 --head-dim $_dim --passes $_pass \
		--out "$out/t/ncu-$_tag-run-$1-$2-$3$_sfx" >"$out/t/ncu-$_tag-$1-$2-$3$_sfx.log" 2>&1
	echo "# ncu $_tag $* rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
}

# ncu_sass KERNEL MASK SEQLEN DIM [CAP]: ncu's SASS source page (stall samples and executed
# instructions per SASS line, as CSV) of one forward launch of KERNEL at head dim DIM (the
# backward's with NCU_PASS=bwd): ncu_one's, tag sass, no metrics beyond the page's sections,
# into $out/t/ncu-sass-KERNEL-MASK-SEQLEN[-fwd][-dDIM].log (read by sass_top and op_mix).
ncu_sass() {
	NCU_PASS=${NCU_PASS:-fwd} NCU_DIM=$4 NCU_SECTIONS="--section SourceCounters --section WarpStateStats --page source --print-source sass --csv" \
		ncu_one sass "" "$1" "$2" "$3" "${5:-60}"
}

# op_mix FILE SCORES: the executed instructions of ncu_sass's CSV by opcode (HGMMA and MUFU by
# shape and function: the tile's products name its tile), the 24 most, each as thread
# instructions per score when SCORES (the launch's query-key pairs times query heads) is given.
op_mix() {
	python3 - "$@" <<'PY' 2>&1 | head -28
import collections, csv, re, sys
try:
    rows = [r for r in csv.reader(open(sys.argv[1], errors="replace")) if len(r) > 3]
    hdr = next(i for i, r in enumerate(rows) if any(c.strip() == "Source" for c in r))
except (OSError, StopIteration) as e:
    print("# no source table:", sys.argv[1], e); sys.exit(0)
h = [c.strip() for c in rows[hdr]]
src = h.index("Source")
ex = next((i for i, c in enumerate(h) if c.startswith("Instructions Executed")), None)
if ex is None:
    print("# no executed-instructions column"); sys.exit(0)
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return 0.0
scores = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
mix = collections.Counter()
for r in rows[hdr + 1:]:
    if len(r) <= max(src, ex): continue
    s = re.sub(r"^@!?U?P[T0-9]+\s+", "", r[src].strip())
    op = s.split()[0] if s else "?"
    key = op if op.startswith(("HGMMA", "MUFU")) else op.split(".")[0]
    mix[key] += num(r[ex])
tot = sum(mix.values()) or 1
print(f"# {tot:.4g} warp instructions" + (f", {32 * tot / scores:.2f} thread instructions a score" if scores else ""))
for op, v in mix.most_common(24):
    print(f"{op:28s} {v:11.4g} {100 * v / tot:5.1f}%" + (f" {32 * v / scores:7.3f}" if scores else ""))
PY
}

# MEM_METRICS: the ncu metrics ncu_mem reads (mem_table prints them).
MEM_METRICS=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum

# ncu_mem KERNEL MASK SEQLEN [CAP]: DRAM bytes read and written, L2 hit rate and time of one
# launch (ncu_one's, tag mem; a tag mem-SUFFIX with ncu_one and MEM_METRICS keeps repeated
# launches of one case apart, and mem_table reads those too).
ncu_mem() { ncu_one mem "$MEM_METRICS" "$@"; }

# ncu_stall KERNEL MASK SEQLEN [CAP]: time, instructions and stall reasons of one launch
# (ncu_one's, tag stall; STALL_METRICS), read by stall_table.
ncu_stall() { ncu_one stall "$STALL_METRICS" "$@"; }

# ncu_sol KERNEL MASK SEQLEN [CAP]: ncu's SpeedOfLight and ComputeWorkloadAnalysis sections of
# one launch (ncu_one's, tag sol: the SM clock, the SM's and memory's throughput, the IPC and the
# pipes' utilisation), read by sol_table.
ncu_sol() { NCU_SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis" ncu_one sol gpu__time_duration.sum "$@"; }

# sol_table: ncu_sol's logs, their clock, throughput, IPC lines and the section's notes that
# name a pipeline (the busiest one).
# ncu_launch KERNEL MASK SEQLEN DIM: ncu's launch statistics and occupancy of one forward
# launch (block size, registers a thread, shared memory, blocks an SM); launch_table prints them.
ncu_launch() {
	NCU_PASS=fwd NCU_DIM=$4 NCU_SECTIONS="--section LaunchStats --section Occupancy" ncu_one launch "" "$1" "$2" "$3" 40
}
launch_table() {
	for _f in "$out"/t/ncu-launch-*.log; do
		[ -f "$_f" ] || continue
		echo "## $(basename "$_f" .log)"
		grep -E 'Block Size|Grid Size|Registers Per Thread|Dynamic Shared Memory Per Block|Static Shared Memory Per Block|Theoretical Occupancy|Achieved Occupancy|Block Limit|Waves Per SM' "$_f" | sed 's/  */ /g' | cut -c1-140 | head -14
		grep -m1 -o 'Profiling "[^"]*"' "$_f" | cut -c1-160
	done
}
sol_table() {
	for _f in "$out"/t/ncu-sol-*.log; do
		[ -f "$_f" ] || continue
		echo "## $(basename "$_f" .log)"
		grep -E 'SM Frequency|Duration|Compute \(SM\) Throughput|Memory Throughput|Executed Ipc Active|Issue Slots Busy|SM Busy|pipeline' "$_f" | sed 's/  */ /g' | cut -c1-160 | head -14
	done
}

# stall_table: ncu_stall's logs, a block each (stalls).
stall_table() {
	for _f in "$out"/t/ncu-stall-*.log; do
		[ -f "$_f" ] || continue
		echo "## $(basename "$_f" .log)"
		stalls "$_f"
	done
}

# compare FILE PAIRS RUN...: a line per case of join_runs's table FILE (its columns the runs
# RUN..., in order), a column per pair A/B of PAIRS (space-separated): the mean of A's runs
# over the mean of B's, as a ratio where B is cudnn, else as A's change over B; "-" where
# either ran no such case.
compare() {
	python3 - "$@" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
pairs = [p.split("/") for p in sys.argv[2].split()]
names = sys.argv[3:]
def num(x):  # a run's TFLOP/s, or None where it has none ("-", unsupported, wrong, oom)
    try:
        return float(x)
    except ValueError:
        return None
def mean(xs):
    xs = [y for y in map(num, xs) if y is not None]
    return sum(xs) / len(xs) if xs else None
print("mask seqlen " + " ".join(a + "/" + b for a, b in pairs))
for r in rows:
    cells = {}
    for i, v in enumerate(names):
        cells.setdefault(v, []).append(r[2 + i] if 2 + i < len(r) else "-")
    m = {v: mean(c) for v, c in cells.items()}
    out = []
    for a, b in pairs:
        x, y = m.get(a), m.get(b)
        if x is None or y is None:
            out.append("-")
        elif b == "cudnn":
            out.append("%.3f" % (x / y))
        else:
            out.append("%+.1f%%" % (100 * (x / y - 1)))
    print(r[0], r[1], " ".join(out))
PY
}

# table DIM TITLE PAIRS RUN...: join_runs DIM RUN...'s table (kept as $out/t/DIM.table) under
# "=== TITLE", then compare's PAIRS over it: the end of a call's interleaved step.
table() {
	_td=$1 _tt=$2 _tp=$3
	shift 3
	echo "=== $_tt: mask seqlen, then" "$@"
	join_runs "$_td" "$@" >"$out/t/$_td.table"
	cat "$out/t/$_td.table"
	compare "$out/t/$_td.table" "$_tp" "$@"
}

# mem_table: ncu_mem's logs, a block each.
mem_table() {
	for _f in "$out"/t/ncu-mem-*.log; do
		[ -f "$_f" ] || continue
		echo "## $(basename "$_f" .log)"
		grep -E 'dram__bytes|lts__t_sector_hit_rate|gpu__time_duration' "$_f" | awk '{print "  " $1, $(NF-1), $NF}'
	done
}

# row_variants STEP...: the variant each row of the steps' runs ($out/t/STEP) names (with
# gsplit-N, pairs-bwd, front-bwd, persistent-fwd ...), a line a step.
row_variants() {
	for _r in "$@"; do
		bin/longca merge --csv "$out/t/$_r" >/dev/null 2>&1 &&
			python3 -c 'import csv,sys; r=list(csv.DictReader(open(sys.argv[1]))); print(" | ".join(x["mask"][:12] + " " + x["seqlen"] + ": " + x["kernel_variant"] for x in r))' "$out/t/$_r/merged.csv"
	done
}

# goal_lines FILE: issue 19's criteria on a results file (longca report --against): the cuda
# kernel against cuDNN on the five masks cuDNN runs whole, and against Flex at 1.3x on the
# other seven, each pass, a line each; where report gives no such line, its last line instead
# (a missing file, a run cut short before every mask is only warned of by report).
goal_lines() {
	if [ ! -f "$1" ]; then
		echo "# goal_lines: no results file at '$1'"
		return 0
	fi
	for _p in fwd bwd; do
		goal_line "$1" $_p cudnn 1.0 full,causal,full_document,causal_document,sliding_window_causal
		goal_line "$1" $_p torch:flex 1.3 sliding_window,share_question,causal_blockwise,prefix_lm_causal,prefix_lm_document,global_sliding_window,block_causal_document
	done
}

# goal_line FILE PASS BASE AT MASKS: goal_lines's line for one pass and base kernel (with
# report's clock line under it: the cases below AT timed at the lower of two clocks).
goal_line() {
	_o=$(bin/longca report "$1" --pass "$2" --masks "$5" --against "$3" --at "$4" 2>&1)
	if printf '%s\n' "$_o" | grep -q '^# cuda against'; then
		# the line, and the clock line under it where the rows read the GPU's clock
		printf '%s\n' "$_o" | grep -A1 '^# cuda against' | grep -E '^# cuda against|^#   SM clocks' | sed "s/^# /# $2: /"
	else
		echo "# $2: cuda against $3: no line ($(printf '%s\n' "$_o" | tail -1))"
	fi
}

# clock_pairs STEP...: per step (a kernel step of $out/t), a line of each row in timing
# order: kernel, status, TFLOP/s @ its mean SM clock while timed (MHz), settle_ms; then cuda
# over cudnn where both ran (call 93's question: a ratio against the two clocks).
clock_pairs() {
	for _s in "$@"; do
		bin/longca merge --csv --out "$out/t/$_s.merged.arrow" "$out/t/$_s" >/dev/null 2>&1
		python3 - "$out/t/$_s.merged.csv" "$_s" <<'PY'
import csv, sys
try:
    rows = list(csv.DictReader(open(sys.argv[1])))
except OSError as e:
    print(sys.argv[2], "no csv:", e); sys.exit(0)
t, parts = {}, []
for r in rows:
    t[r["kernel"]] = (float(r["tflops"] or 0), float(r["sm_clock_mhz"] or 0))
    parts.append("%s %s %.1f @ %.0f settle %s" % (r["kernel"], r["status"], t[r["kernel"]][0], t[r["kernel"]][1], r["settle_ms"] or "-"))
line = "%-20s %s" % (sys.argv[2], "; ".join(parts))
if t.get("cudnn", (0,))[0] > 0 and "cuda" in t:
    line += "  ratio %.3f" % (t["cuda"][0] / t["cudnn"][0])
print(line)
PY
	done
}

# cp8 NAME VARIANT [CAP] [BASELINE]: `bin/longca cp` on 8 in-process ranks of the one GPU
# (the device mover), ring-p2p, loongtrain and usp (2x4), causal_document_long forward, 8K
# tokens a rank, 64:8 heads, d128, checked, --baseline BASELINE (none unless given), into
# $out/t/NAME, stopped at CAP seconds (60) or the budget; its report as $out/t/NAME.report.
cp8() {
	_left=$((budget - ($(date +%s) - t0)))
	_cap=${3:-60}
	[ "$_left" -gt 30 ] || { echo "# cp8 $1 skipped (time)" >>"$out/t/summary.txt"; return; }
	timeout -s INT -k 10 $((_left < _cap ? _left : _cap)) bin/longca cp --ranks 8 --kernel cuda --variant "$2" --methods ring-p2p,loongtrain,usp \
		--ulysses 2 --ring 4 --masks causal_document_long --tokens-per-rank 8K --heads 64:8 --head-dim 128 --dtype bf16 --passes fwd \
		--samples 1 -w 3 -n 10 --check --check-budget 5e8 --baseline "${4:-none}" --out "$out/t/$1" --run-id "$1" >"$out/t/$1.log" 2>&1
	echo "# cp8 $1 ($2) rc=$? at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
	bin/longca report "$out/t/$1" >"$out/t/$1.report" 2>&1
}

# geo_line TABLE LABEL [median]: over a join_runs table of runs alternating base and variant
# (base, variant, base, variant, ...: four or more), each cell's variant / base (the means of
# each side's runs, or with "median" their medians), one line: their geomean, lowest and
# highest, and the cells below -1% (the promotion rule's numbers, docs/perf.md).
geo_line() {
	python3 - "$1" "$2" "${3:-mean}" <<'PY'
import math, statistics, sys
avg = statistics.median if sys.argv[3] == "median" else statistics.mean
g = []
for l in open(sys.argv[1]):
    f = l.split()
    try:
        v = list(map(float, f[2:]))
    except ValueError:
        continue
    if len(v) < 4 or len(v) % 2:
        continue
    g.append(avg(v[1::2]) / avg(v[0::2]))
if g:
    print("# %s over %d cells: geomean %+.2f%%, lowest %+.2f%%, highest %+.2f%%; cells below -1%%: %d" % (
        sys.argv[2], len(g), 100 * (math.exp(sum(map(math.log, g)) / len(g)) - 1), 100 * (min(g) - 1), 100 * (max(g) - 1), sum(x < 0.99 for x in g)))
else:
    print("# no cell timed by both")
PY
}

# cell_medians TABLE...: each cell of join_runs tables of six runs alternating base and variant,
# a line: the variant's median over the base's, as a change.
cell_medians() {
	python3 - "$@" <<'PY'
import statistics, sys
for p in sys.argv[1:]:
    for l in open(p):
        f = l.split()
        try:
            v = list(map(float, f[2:]))
        except ValueError:
            continue
        if len(v) == 6:
            print("%-24s %6s  median ratio %+.2f%%" % (f[0], f[1], 100 * (statistics.median(v[1::2]) / statistics.median(v[0::2]) - 1)))
PY
}

# persist_step "SEQLENS": persist-rule.sh (sm90-persist against sm90-plain, d128 forward, the
# 12 masks) at those lengths into $out/t/p, its table as $out/t/p.table, where 150 s of the
# budget are left; one summary line either way.
persist_step() {
	_left=$((budget - ($(date +%s) - t0)))
	if [ "$_left" -gt 150 ]; then
		PERSIST_SEQLENS="$1" sh scripts/device/persist-rule.sh "$out/t/p" >"$out/t/p.table" 2>&1
		echo "# persist-rule $1 done at $(($(date +%s) - t0)) s" >>"$out/t/summary.txt"
	else
		echo "# persist-rule skipped ($_left s left)" >>"$out/t/summary.txt"
	fi
}

# pair_steps CAP ARGS...: eight steps p-0 .. p-7 of `longca kernel --kernels cuda,cudnn ARGS`
# (the odd ones cudnn first), each a process of its own, CAP seconds at most; their names in
# $steps, for pair_cells (call117.sh, which ran first, keeps its own copy of this loop).
pair_steps() {
	_pcap=$1
	shift
	steps=
	for _pi in 0 1 2 3 4 5 6 7; do
		_pk=cuda,cudnn
		[ $((_pi % 2)) = 1 ] && _pk=cudnn,cuda
		step "p-$_pi" "$_pcap" kernel --kernels "$_pk" "$@"
		steps="$steps p-$_pi"
	done
}

# pair_cells STEP...: steps of `kernel --kernels cuda,cudnn` (both kernels in each process),
# merged to csv; a line a cell (mask seqlen head_dim pass): cuda over cudnn in each step, their
# median, how many steps had cuda ahead, each kernel's range of TFLOP/s and of SM clock; then
# the cells whose median ratio is 1.0 or more. The question of calls 111-113: a cell's two
# rates are set per process for both kernels, so one reading can fall either way; the median
# over processes of same-process pairs is the cell's ratio.
pair_cells() {
	_csvs=
	for _s in "$@"; do
		bin/longca merge --csv --out "$out/t/$_s.merged.arrow" "$out/t/$_s" >/dev/null 2>&1
		_csvs="$_csvs $out/t/$_s.merged.csv"
	done
	python3 - $_csvs <<'PY'
import csv, statistics, sys
cells, order = {}, []
for f in sys.argv[1:]:
    try:
        rows = list(csv.DictReader(open(f)))
    except OSError:
        continue
    seen = {}
    for r in rows:
        if r["status"] != "ok":
            continue
        key = (r["mask"], int(r["seqlen"]), r["head_dim"], r["pass"])
        seen.setdefault(key, {})[r["kernel"]] = (float(r["tflops"]), float(r["sm_clock_mhz"] or 0))
    for key, k in seen.items():
        if "cuda" in k and "cudnn" in k:
            if key not in cells:
                cells[key] = []
                order.append(key)
            cells[key].append((k["cuda"], k["cudnn"]))
met = 0
for key in order:
    p = cells[key]
    r = [a[0] / b[0] for a, b in p]
    m = statistics.median(r)
    met += m >= 1.0
    rng = lambda v: "%.1f-%.1f" % (min(v), max(v))
    print("%-16s %6d d%-3s %s  pairs %d: ratios %s  median %.3f  cuda ahead %d of %d  cuda %s cudnn %s  MHz %s / %s" % (
        key[0], key[1], key[2], key[3], len(p), " ".join("%.3f" % x for x in r), m, sum(x > 1 for x in r), len(r),
        rng([a[0] for a, _ in p]), rng([b[0] for _, b in p]), rng([a[1] for a, _ in p]), rng([b[1] for _, b in p])))
print("# cells at a median of 1.0x cuDNN or more: %d of %d" % (met, len(order)))
PY
}
