package main

import (
	"testing"

	"github.com/longca/longca/comm/nccl"
	"github.com/longca/longca/internal/cuda"
)

// --backend nccl where it cannot run at all (no CUDA driver or GPU, no libnccl) is bad input
// for this machine, as --kernel cuda is for cp: one line naming the flag and what to use
// instead, exit 2. It exited 1 with "spmd: open nccl backend for rank 0 of 1: nccl: rank 0:
// GPU 0: no CUDA driver found: ..." naming neither (the s44-D probe).
func TestBackendNCCLUnavailableExits2(t *testing.T) {
	if cuda.Available() == nil && nccl.Probe().Found {
		t.Skip("a GPU and libnccl are here: the nccl backend can run")
	}
	for _, args := range [][]string{
		{"selftest", "comm", "--backend", "nccl", "--timeout", "5s"},
		{"cp", "--backend", "nccl", "--timeout", "5s", "--tokens-per-rank", "128", "--heads", "2:2", "--head-dim", "16", "--samples", "1",
			"-w", "0", "-n", "1", "--masks", "causal", "--methods", "ring-p2p", "--out", t.TempDir()},
	} {
		_, errOut, code := captureRun(t, args...)
		checkUsageError(t, args, code, errOut, "--backend nccl", "cannot run here", "--backend tcp")
	}
}
