#!/bin/sh
# GPU checks of comm/nccl. Build on a machine with Go (no GPU needed):
#   go test -c -tags gpu -o bin/nccl.test ./comm/nccl
# then run this from the repository root on the GPU machine (carry bin/):
#   sh comm/nccl/gpucheck.sh [bin/nccl.test]
# One rank always; N ranks under mpirun when the machine has N >= 2 GPUs.
set -eu
BIN=${1:-bin/nccl.test}
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
echo "# comm/nccl GPU checks with $BIN"
echo "# one rank: every operation (self send/recv), split, alltoall by send/recv"
"$BIN" -test.v -test.count=1 -test.run 'TestGPU(Operations|CommTable|Split|AllToAllBySendRecv)$'
echo "# one rank: the watchdog aborts a receive no send matches (alone: it aborts the communicator)"
"$BIN" -test.v -test.count=1 -test.run 'TestGPUWatchdogHungRecv$'
N=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$N" -ge 2 ] && command -v mpirun >/dev/null 2>&1; then
	echo "# $N ranks under mpirun"
	LONGCA_NCCL_TEST_DIR=$(mktemp -d)
	export LONGCA_NCCL_TEST_DIR
	mpirun --allow-run-as-root --oversubscribe -np "$N" -x NCCL_NVLS_ENABLE -x LONGCA_NCCL_TEST_DIR \
		"$BIN" -test.count=1 -test.run 'TestGPU(Operations|CommTable|Split)$'
else
	echo "# $N GPU(s): multi-rank checks skipped (need 2+ GPUs and mpirun)"
fi
if [ -x bin/longca ]; then
	echo "# longca selftest comm over NCCL, one rank"
	bin/longca selftest comm --backend nccl --verbose
fi
echo "# OK"
