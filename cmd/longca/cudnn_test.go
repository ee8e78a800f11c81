package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/longca/longca/kernels/cudnn"
	"github.com/longca/longca/results"
)

// TestKernelCudnnUnsupported: `longca kernel --kernels cudnn` where cuDNN cannot be
// opened exits 0 with one unsupported row per case, each saying why.
func TestKernelCudnnUnsupported(t *testing.T) {
	saved := cudnn.DefaultLibraries
	cudnn.DefaultLibraries = []string{"libcudnn-missing-for-test.so.9"}
	defer func() { cudnn.DefaultLibraries = saved }()
	dir := t.TempDir()
	_, errs, code := runCLI(t, "kernel", "--kernels", "cudnn", "--seqlens", "256", "--masks", "full,causal", "--heads", "4:2",
		"--head-dim", "64", "--passes", "fwd,bwd", "-w", "0", "-n", "1", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	rows, _, err := results.ReadRows(filepath.Join(dir, results.FileName(filepath.Base(dir), 0, 1)))
	if err != nil || len(rows) != 4 {
		t.Fatalf("%d rows: %v", len(rows), err)
	}
	for _, r := range rows {
		if r.Status != results.StatusUnsupported || r.Kernel != "cudnn" || !strings.Contains(r.Reason, "libcudnn-missing-for-test.so.9") || r.MedianMs != nil {
			t.Errorf("row %s %s %s: %s %q", r.Mask, r.Pass, r.Kernel, r.Status, r.Reason)
		}
	}
}
