#!/bin/sh
# The cuda kernel on the GPU machine, from the repository root, with bin/longca and
# bin/cuda.test built here (`make device`; each may arrive gzipped as bin/NAME.gz):
#
#   sh kernels/cuda/gpu.sh OUT resources            registers, stack, shared memory of each variant
#   sh kernels/cuda/gpu.sh OUT test VARIANT [REGEX]  the GPU tests (every mask fwd+bwd vs the CPU
#                                                    reference) for one variant (sm90, sm80)
#   sh kernels/cuda/gpu.sh OUT time VARIANT ARGS...  `longca kernel --kernels cuda --variant VARIANT ARGS`
#   sh kernels/cuda/gpu.sh OUT ncu VARIANT ARGS...   the same under Nsight Compute: tensor-pipe use,
#                                                    throughput and stall reasons of the attention kernels
#
# Every step is bounded (STEP_TIMEOUT seconds, default 120) and appends one summary line to
# OUT/summary.txt; logs go to OUT/*.log. Exit status 1 when a step failed.
set -u
out=${1:?usage: gpu.sh OUT STEP ...}
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(pwd)
export LONGCA_CACHE_DIR=${LONGCA_CACHE_DIR:-/tmp/longca-nvrtc}
export NCCL_NVLS_ENABLE=0
limit=${STEP_TIMEOUT:-120}
for f in longca cuda.test; do
	[ -x "bin/$f" ] || { [ -f "bin/$f.gz" ] && gunzip -c "bin/$f.gz" >"bin/$f" && chmod +x "bin/$f"; }
done
step=${1:?step: resources, test, time or ncu}
shift
note() { echo "$*" | tee -a "$out/summary.txt"; }
case $step in
resources)
	for v in sm90 sm80; do
		timeout -k 10 "$limit" bin/cuda.test -test.run '^TestCompile$' -test.v -test.count=1 -variant "$v" >"$out/resources-$v.log" 2>&1
		note "# resources $v (exit $?):"
		grep -E 'threads|NVRTC|error|FAIL' "$out/resources-$v.log" | sed 's/^ *//' | tee -a "$out/summary.txt"
	done
	;;
test)
	v=${1:?variant}
	run=${2:-.}
	log="$out/test-$v.log"
	# from the package's directory, as `go test` runs it: some tests read the package's sources
	(cd kernels/cuda && timeout -k 10 "$limit" "$root/bin/cuda.test" -test.v -test.count=1 -test.run "$run" -test.timeout "${limit}s" -variant "$v" >"$log" 2>&1)
	rc=$?
	pass=$(grep -c 'bwd=.*: PASS' "$log")
	fail=$(grep -c 'bwd=.*: FAIL' "$log")
	note "# test $v [$run]: exit $rc, $pass checks passed, $fail failed"
	grep -hE 'bwd=(true|false): FAIL|panic|^--- FAIL|timed out' "$log" | head -20 | tee -a "$out/summary.txt"
	[ "$rc" = 0 ]
	;;
time | ncu)
	v=${1:?variant}
	shift
	n=$(ls "$out" | grep -c '^\(time\|ncu\)-')
	tag=$n-$(echo "$v $*" | tr -c 'A-Za-z0-9\n' '_' | cut -c1-50)
	if [ "$step" = ncu ]; then
		timeout -k 10 "$limit" ncu --clock-control none -k 'regex:^(fwd|bwd)' -c "${NCU_COUNT:-2}" \
			--section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
			--metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
			bin/longca kernel --kernels cuda --variant "$v" --no-check -w 0 -n 1 --out "$out/ncu-run" "$@" >"$out/ncu-$tag.log" 2>&1
		note "# ncu $v $* (exit $?):"
		grep -E 'fwd|bwd|Duration|Compute \(SM\) Throughput|gmma_cycles|hmma_cycles|Registers|Achieved Occupancy|Stall|Warp Cycles Per Issued' "$out/ncu-$tag.log" | head -40 | tee -a "$out/summary.txt"
	else
		timeout -k 10 "$limit" bin/longca kernel --kernels cuda --variant "$v" --out "$out/run-$tag" "$@" >"$out/time-$tag.log" 2>&1
		rc=$?
		note "# time $v $* (exit $rc):"
		grep -vE '^#  |^$' "$out/time-$tag.log" | grep -E '^ |^# Cases|error|panic' | head -40 | tee -a "$out/summary.txt"
		[ "$rc" = 0 ]
	fi
	;;
*)
	echo "gpu.sh: unknown step $step" >&2
	exit 2
	;;
esac
