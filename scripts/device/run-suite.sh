#!/bin/sh
# `longca run` on the GPU (issue 22), from the repository root with bin/longca(.gz)
# carried (make device):
#   sh scripts/device/run-suite.sh OUT [full]
# Default (about 3 minutes): the GPU suite with cuda and the native cudnn only (the torch
# peers left out by an interpreter that is not there), to see cudnn in the suite, its
# cuDNN version in the rows, and the one time estimate (up front and as the ETA) against
# the real time. With `full`: the whole suite with every torch peer too (about 8 minutes):
# the README's wall time. A table last; logs packed as OUT/run-suite.tgz.
set -u
out=${1:?usage: run-suite.sh OUT [full]}
mode=${2:-quick}
mkdir -p "$out/r"
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc} NCCL_NVLS_ENABLE=0
[ -x bin/longca ] || { [ -f bin/longca.gz ] && gunzip -c bin/longca.gz >bin/longca && chmod +x bin/longca; }
L=bin/longca
peers=""
[ "$mode" = full ] || peers="--python /nonexistent/python3"
t0=$(date +%s)
timeout 900 $L --log-format json run $peers --out "$out/r/run" --run-id suite >"$out/r/run.out" 2>"$out/r/run.log"
rc=$?
wall=$(($(date +%s) - t0))
{
	echo "# longca run ($mode): rc=$rc, wall ${wall} s"
	grep -o '"estimate":"[^"]*"' "$out/r/run.log" | head -1 | sed 's/^/# up-front estimate: /'
	grep '"message":"case"' "$out/r/run.log" | sed -n '1p;2p;3p;10p;50p;100p' | grep -o '"case":[0-9]*\|"eta":"[^"]*"' | paste -d' ' - - | sed 's/^/# eta after /'
	echo "# rows per kernel and status:"
	grep -o '"kernel":"[^"]*".*"status":"[^"]*"' "$out/r/run.log" | sed 's/"mask".*"status"/ "status"/' | sort | uniq -c | sed 's/^/#   /'
	$L report "$out/r/run/suite.merged.arrow" 2>/dev/null | tail -3
	python3 -c 'import pyarrow.ipc as i,sys; t=i.open_file(sys.argv[1]).read_all().to_pandas(); print("# cudnn rows:", (t.kernel=="cudnn").sum(), "versions:", sorted(set(t[t.kernel=="cudnn"].kernel_versions)))' "$out/r/run/suite.merged.arrow" 2>/dev/null
} | tee "$out/r/summary.txt"
tar -C "$out" -czf "$out/run-suite.tgz" r
